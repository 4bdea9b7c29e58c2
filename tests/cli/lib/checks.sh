# Shared by the CLI test scripts (sourced; not a test itself: ctest runs only
# tests/cli/*.sh). Counts checks, prints "ok"/"FAIL" lines and the final
# "N passed, M failed" line; expect_error needs $TMP.
pass=0
fail=0

# cli_test_setup "$@": BIN (the dgemma binary, the script's first argument),
# SRC (the source tree, its second), TMP (a scratch folder removed on exit)
# and DGEMMA_CACHE inside it (the default model is generated afresh). Scripts
# with a cleanup of their own (servers to stop) set these themselves.
cli_test_setup() {
  BIN=$1
  SRC=${2:-}
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  export DGEMMA_CACHE="$TMP/cache"
}
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# expect_error DESCRIPTION EXPECTED_STDERR_SUBSTRING COMMAND...: the command
# must fail and say that on stderr.
expect_error() {
  local what=$1 want=$2
  shift 2
  if "$@" >"$TMP/out" 2>"$TMP/err"; then
    bad "$what: succeeded"
  elif grep -qF -- "$want" "$TMP/err"; then
    ok "$what: $(head -c 160 "$TMP/err")"
  else
    bad "$what: stderr lacks '$want': $(cat "$TMP/err")"
  fi
}

# Prints the summary and sets the exit status (call last).
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
