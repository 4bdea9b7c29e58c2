#!/usr/bin/env bash
# Fails on a comment citing a docs/ file or section that does not exist, an
# issue number, or a document outside the repository.
set -euo pipefail
exec python3 "$(dirname "$0")/check-docs.py" "$@"
