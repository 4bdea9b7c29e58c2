#!/usr/bin/env bash
# clang-tidy with the repository's .clang-tidy over C++ sources, using the
# compile commands of the Release build (scripts/build.sh release).
#   scripts/lint.sh                 the .cc files changed against HEAD~1
#   scripts/lint.sh FILE...         those files
#   scripts/lint.sh --all           every .cc file of src/ and tools/
# Exit 1 when clang-tidy reports a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-tidy >/dev/null || { echo "lint.sh: clang-tidy not found (apt-get install clang-tidy)" >&2; exit 2; }
db=build/release
[ -f $db/compile_commands.json ] || { echo "lint.sh: no $db/compile_commands.json: run scripts/build.sh release" >&2; exit 2; }
if [ "${1:-}" = "--all" ]; then
  mapfile -t files < <(git ls-files 'src/*.cc' 'tools/*.cc')
elif [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git diff --name-only --diff-filter=AM HEAD~1 -- '*.cc' | grep -v '^tests/data/' || true)
fi
[ ${#files[@]} -gt 0 ] || { echo "lint: no files"; exit 0; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# GCC flags clang does not know are dropped; the sources are GCC-built.
clang-tidy -p $db --quiet --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-unused-command-line-argument \
  "${files[@]}" >"$out" 2>/dev/null || true
if grep -q "warning:" "$out"; then
  cat "$out"
  echo "lint: $(grep -c 'warning:' "$out") warning(s) in ${#files[@]} file(s)"
  exit 1
fi
echo "lint: ${#files[@]} file(s) clean"
