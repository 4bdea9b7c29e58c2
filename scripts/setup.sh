#!/usr/bin/env bash
# README command (1): installs the Debian packages, builds dgemma in Release
# and runs the main job on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
echo
echo "== dgemma run --visualize on the built-in default model (RANDOM weights: gibberish by design) =="
echo "   for the real model: build/release/dgemma run -m /path/to/diffusiongemma-26B-A4B-it -p \"...\""
build/release/dgemma run --visualize -p "Write a haiku about diffusion."
echo
echo "== the same with a picture: dgemma run --image FILE (decoded, resized, through the vision tower) =="
build/release/dgemma run --image tests/data/golden_v/images/png_up.png -p "What is in this picture?"
