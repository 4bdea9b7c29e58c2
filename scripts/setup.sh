#!/usr/bin/env bash
# README command (1): installs the Debian packages, builds dgemma in Release
# and runs the main job on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
echo
echo "== dgemma inspect tests/data/golden_a (bundled tiny DiffusionGemma checkpoint) =="
build/release/dgemma inspect tests/data/golden_a
