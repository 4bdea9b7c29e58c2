#!/usr/bin/env bash
# Failed writes to stdout are errors: with stdout on
# /dev/full or closed, every command that prints says so on stderr and exits
# non-zero instead of 0 with the output lost.
#
# usage: output_errors.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"

# expect_write_error DESCRIPTION WANT_STDERR REDIRECT COMMAND...: REDIRECT is
# "full" (stdout on /dev/full) or "closed" (stdout closed).
expect_write_error() {
  local what=$1 want=$2 how=$3 rc
  shift 3
  if [ "$how" = full ]; then "$@" >/dev/full 2>"$TMP/err"; else "$@" >&- 2>"$TMP/err"; fi
  rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$want" "$TMP/err"; then
    ok "$what ($how): exit $rc, $(grep -F -- "$want" "$TMP/err" | head -c 120)"
  else
    bad "$what ($how): exit $rc, stderr: $(head -c 300 "$TMP/err")"
  fi
}

GEN="-n 4 --max-denoising-steps 1 --seed 1 -q"
for how in full closed; do
  want="writing to stdout failed"
  [ "$how" = closed ] && want="stdout is closed"
  expect_write_error "run" "$want" $how "$BIN" run -p hi $GEN
  expect_write_error "run --json" "$want" $how "$BIN" run -p hi $GEN --json
  expect_write_error "run --visualize (pipe lines)" "$want" $how "$BIN" run -p hi $GEN --visualize
  expect_write_error "chat" "$want" $how bash -c "echo hi | \"\$0\" chat $GEN" "$BIN"
  expect_write_error "tokenize" "$want" $how "$BIN" tokenize hello
  expect_write_error "inspect" "$want" $how "$BIN" inspect "$SRC/tests/data/golden_a"
  expect_write_error "generate" "$want" $how "$BIN" generate -m "$DGEMMA_CACHE/default-model-v2" --prompt-ids 2,9259 $GEN
  expect_write_error "--help" "$want" $how "$BIN" run --help
  expect_write_error "--version" "$want" $how "$BIN" --version
done

# A long run stops at the first failed write instead of generating to the end.
start=$(date +%s)
"$BIN" run -p hi -n 4000 --max-denoising-steps 1 --seed 1 -q >/dev/full 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && [ $(($(date +%s) - start)) -lt 30 ] && [ "$(grep -c 'error:' "$TMP/err")" = 1 ]; then
  ok "a long run stops at the first failed write, with one error line"
else
  bad "long run on /dev/full: rc $rc after $(($(date +%s) - start)) s: $(cat "$TMP/err")"
fi

# Output that succeeds is unaffected.
if "$BIN" tokenize hello >"$TMP/ok.out" 2>"$TMP/ok.err" && [ -s "$TMP/ok.out" ] && [ ! -s "$TMP/ok.err" ]; then
  ok "a normal write still exits 0 with nothing on stderr"
else
  bad "normal tokenize: $(cat "$TMP/ok.err")"
fi

finish
