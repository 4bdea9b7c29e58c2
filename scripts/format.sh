#!/usr/bin/env bash
# Formats every C++ and CUDA source of the repository with .clang-format
# (clang-format 14, Debian's clang-format package).
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   change nothing; list the files that are not
#                               formatted and exit 1 if there are any (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.h' '*.cc' '*.cu' '*.cuh' ':!:tests/data/*')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
      echo "not formatted: $f (scripts/format.sh)"
      bad=$((bad + 1))
    fi
  done
  if [ $bad -gt 0 ]; then echo "format: $bad file(s) differ from .clang-format"; exit 1; fi
  echo "format: ${#files[@]} files formatted"
else
  for f in "${files[@]}"; do [ -f "$f" ] && clang-format -i "$f"; done
  echo "format: ${#files[@]} files"
fi
