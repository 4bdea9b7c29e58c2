#!/usr/bin/env bash
# `cmake --install` gives a binary that stands alone (docs/architecture.md
# §4): installed into a temporary prefix and copied elsewhere, it runs the
# built-in default model, `tokenize` and `chat` with its data from
# <prefix>/share/dgemma, never from the source tree or the build folder; with
# that data gone it fails with an error naming where it looked.
# usage: install.sh DGEMMA_BINARY SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
BUILD=$(cd "$(dirname "$BIN")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
[ -x "$TMP/prefix/bin/dgemma" ] || fail "no bin/dgemma under the prefix"
[ -f "$TMP/prefix/share/dgemma/tokenizer.json" ] || fail "no share/dgemma/tokenizer.json under the prefix"
# The installed tree moved to a folder the build never knew of: only what
# the install put there can be found.
mv "$TMP/prefix" "$TMP/moved"
DG=$TMP/moved/bin/dgemma
# Nothing in the binary points at the checkout or the build folder.
if grep -q -a -F "$(cd "$SRC" && pwd)/tests" "$DG"; then fail "the installed binary names the source tree"; fi
if grep -q -a -F "$BUILD/share" "$DG"; then fail "the installed binary names the build folder's data"; fi

# A clean environment: no cache, no data override, run from /.
run() { (cd / && env -u DGEMMA_DATA_DIR -u DGEMMA_SOURCE_DIR DGEMMA_CACHE="$TMP/cache" HOME="$TMP/home" "$@"); }
run "$DG" --version >/dev/null || fail "--version"
out=$(run "$DG" run -p "Hello" -n 16 --seed 3 2>"$TMP/run.err") || { cat "$TMP/run.err" >&2; fail "run on the default model"; }
[ -n "$out" ] || fail "run printed nothing"
[ -d "$TMP/cache/default-model-v2" ] || fail "the default model was not generated into DGEMMA_CACHE"
# The default model's tokenizer gives the real Gemma ids.
[ "$(run "$DG" tokenize "Hello world")" = "9259 1902" ] || fail "tokenize with the default tokenizer"
printf 'Hello\n' | run "$DG" chat -n 16 --seed 5 >"$TMP/chat.out" 2>"$TMP/chat.err" || {
  cat "$TMP/chat.err" >&2
  fail "chat on the default model"
}
[ -s "$TMP/chat.out" ] || fail "chat printed nothing"

# Without its data (and no cached default model) it says where it looked.
rm -rf "$TMP/moved/share/dgemma" "$TMP/cache"
if run "$DG" run -p "Hello" -n 16 >/dev/null 2>"$TMP/nodata.err"; then fail "ran without its data"; fi
grep -q "tokenizer.json was not found" "$TMP/nodata.err" || { cat "$TMP/nodata.err" >&2; fail "no clear error without data"; }
grep -q -F "$TMP/moved/share/dgemma" "$TMP/nodata.err" || fail "the error does not name <prefix>/share/dgemma"
# DGEMMA_DATA_DIR points it at a data folder of one's choosing.
mkdir -p "$TMP/data" && cp "$SRC/tests/data/tokenizer/tokenizer.json" "$TMP/data/"
out=$(cd / && DGEMMA_DATA_DIR="$TMP/data" DGEMMA_CACHE="$TMP/cache" "$DG" run -p "Hello" -n 16 --seed 3 2>/dev/null) ||
  fail "run with DGEMMA_DATA_DIR"
[ -n "$out" ] || fail "run with DGEMMA_DATA_DIR printed nothing"
echo "install: the installed binary ran the default model, tokenize and chat on its own"
