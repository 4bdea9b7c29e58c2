#!/usr/bin/env bash
# Fails on an #include against the layer table of docs/architecture.md §1.
set -euo pipefail
exec python3 "$(dirname "$0")/check-layers.py" "$@"
