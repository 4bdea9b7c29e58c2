#!/usr/bin/env bash
# README command (2), run verbatim by .ci/run: installs the Debian packages,
# checks the layering and the documents' citations (docs/architecture.md §5),
# then builds and runs the whole test suite in Release, again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and runs every fuzz target
# for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
fuzz_seconds=${DGEMMA_FUZZ_SECONDS:-30}
fuzz_jobs=${DGEMMA_FUZZ_JOBS:-2}

echo "== layering, citations and formatting =="
scripts/check-layers.sh
scripts/check-docs.sh
scripts/format.sh --check

echo "== Release build and tests =="
scripts/build.sh release
ctest --test-dir build/release --output-on-failure -j 2

echo "== ASan + UBSan build and tests =="
scripts/build.sh asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$PWD/scripts/lsan-suppressions.txt \
  ctest --test-dir build/asan --output-on-failure -j 2

echo "== fuzzing (${fuzz_seconds} s per target, ${fuzz_jobs} at a time) =="
scripts/build.sh fuzz
# One libFuzzer process per target (each single-threaded), fuzz_jobs at once.
fuzz_one() {
  local target=$1 name corpus work
  local seeds=()
  name=$(basename "$target")
  corpus=fuzz/corpus/${name#fuzz_}
  work=$(mktemp -d)
  [ -d "$corpus" ] && seeds=("$corpus")
  if "$target" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -print_final_stats=0 "$work" "${seeds[@]}" \
    >"$work.log" 2>&1; then
    rm -rf "$work" "$work.log"
    echo "fuzz: $name ran ${fuzz_seconds} s without a crash"
  else
    tail -40 "$work.log"
    echo "fuzz target $name failed"
    return 1
  fi
}
export -f fuzz_one
export fuzz_seconds
targets=(build/fuzz/fuzz_*)
printf '%s\n' "${targets[@]}" | xargs -P "$fuzz_jobs" -I{} bash -c 'fuzz_one "$1"' _ {} ||
  { echo "fuzz: a target failed"; exit 1; }
echo "fuzz: ${#targets[@]} passed, 0 failed"
