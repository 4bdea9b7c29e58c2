#!/usr/bin/env bash
# Installs the Debian 12 packages dgemma needs to build and test. Idempotent:
# does nothing (and needs no network) when everything is already installed.
set -euo pipefail
packages=(build-essential cmake ninja-build ccache pkg-config libgtest-dev libgmock-dev libbenchmark-dev
          clang libclang-rt-14-dev time python3 libopenblas-dev libopenmpi-dev openmpi-bin
          libcpp-httplib-dev libssl-dev curl clang-format libjpeg62-turbo-dev libpng-dev libwebp-dev
          ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The server tests drive `dgemma serve` with the official `openai` npm client:
# Debian's Node.js and npm, unless a Node.js is already installed (e.g. from
# NodeSource, whose package bundles npm and conflicts with Debian's npm).
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "dgemma: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
