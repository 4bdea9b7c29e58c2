#!/usr/bin/env bash
# Device check of the CUDA backend, for a session that has an NVIDIA GPU (the
# H200 of the device tool). Bounded to about 6 minutes on 16 cores:
#   1. configures and builds Release with CUDA (sm_90 + PTX) in build-gpu:
#      only the `dgemma` CLI and the CUDA tests;
#   2. runs tests/cuda: every op against the CPU in the cuda, cuda:sync and
#      cuda:debug modes, the fault guards, and the doctor on golden_a;
#   3. runs `dgemma doctor -m tests/data/golden_a --json` with --backend cuda
#      (fp32 and --precision bf16) and cuda:debug, and prints per-op max errors;
#   4. generates on the default model with --backend cuda and --debug-device;
#   5. if compute-sanitizer is there, runs the op tests under memcheck.
# Logs and JSON reports go to $OUT when set (the device tool's output folder),
# else build-gpu/out. Exit status: 0 when every step passed.
#
# The device image may lack GoogleTest (nothing can be installed there). Then,
# on a machine that has it (Debian: libgtest-dev), first run
#   scripts/gpu-check.sh --stage-gtest
# which copies headers, static libraries and CMake config into build-gpu-deps/
# (ignored by git, about 2 MB), and carry "build-gpu-deps" to the device.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ "${1:-}" = "--stage-gtest" ]; then
  set -e
  arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  dst=build-gpu-deps/gtest
  rm -rf "$dst"
  mkdir -p "$dst/include" "$dst/lib/$arch/cmake"
  cp -r /usr/include/gtest /usr/include/gmock "$dst/include/"
  cp /usr/lib/"$arch"/libgtest*.a /usr/lib/"$arch"/libgmock*.a "$dst/lib/$arch/"
  cp -r /usr/lib/"$arch"/cmake/GTest "$dst/lib/$arch/cmake/"
  du -sh "$dst"
  echo "staged GoogleTest in $dst; carry build-gpu-deps to the device"
  exit 0
fi

build=build-gpu
out=${OUT:-$build/out}
mkdir -p "$out"
status=0
fail() {
  echo "FAILED: $*"
  status=1
}
section() { echo; echo "== $* =="; }

section "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi not available"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvcc --version | tail -2

section "configure + build (Release, CUDA)"
tests=ON
prefix=()
[ -d build-gpu-deps/gtest ] && prefix=(-DCMAKE_PREFIX_PATH="$root/build-gpu-deps/gtest")
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
configure() {
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDGEMMA_CUDA=ON -DDGEMMA_BENCH=OFF \
    -DDGEMMA_TESTS="$tests" "${prefix[@]}" >"$out/configure.log" 2>&1
}
if ! configure; then
  if grep -q -i gtest "$out/configure.log"; then
    echo "GoogleTest not found: building without tests (see --stage-gtest in this script)"
    tests=OFF
    rm -rf "$build/CMakeCache.txt"
    configure || { tail -30 "$out/configure.log"; exit 1; }
  else
    tail -30 "$out/configure.log"
    exit 1
  fi
fi
grep "dgemma: CUDA" "$out/configure.log"
targets=(dgemma)
[ "$tests" = ON ] && targets+=(cuda_tests)
start=$(date +%s)
if ! timeout 420 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1; then
  grep -E "error|FAILED" -A5 "$out/build.log" | head -60
  echo "build failed (log: $out/build.log)"
  exit 1
fi
echo "built ${targets[*]} in $(($(date +%s) - start)) s"
grep -E "warning" "$out/build.log" | grep -E "src/backend/cuda|tests/cuda" | head -20

if [ "$tests" = ON ]; then
  section "tests/cuda (ops vs CPU in cuda, cuda:sync, cuda:debug; guards; doctor)"
  if timeout 300 "$build/cuda_tests" --gtest_color=no >"$out/cuda_tests.log" 2>&1; then
    grep -E "^\[  (PASSED|SKIPPED|FAILED) |tests ran" "$out/cuda_tests.log"
  else
    grep -E "Failure|FAILED|error|Expected|Which is|cpu .* cuda|\[  SKIPPED" -A3 "$out/cuda_tests.log" | head -80
    fail "tests/cuda (log: $out/cuda_tests.log)"
  fi
  grep -q "SKIPPED" "$out/cuda_tests.log" && grep -E "SKIPPED|no CUDA device" "$out/cuda_tests.log" | head -5
fi

section "dgemma doctor on golden_a"
for run in "cuda fp32" "cuda bf16" "cuda:debug fp32"; do
  set -- $run
  name=doctor_${1/:/_}_$2
  timeout 120 "$build/dgemma" doctor -m tests/data/golden_a --backend "$1" --precision "$2" -t 4 --json \
    >"$out/$name.json" 2>"$out/$name.err"
  rc=$?
  echo "-- --backend $1 --precision $2: exit $rc"
  [ $rc -eq 0 ] || { fail "doctor --backend $1 --precision $2"; cat "$out/$name.err"; }
  python3 - "$out/$name.json" <<'EOF' || cat "$out/$name.json"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"ops compared {r['ops_compared']}, child {r['child_status']}")
print(f"{'op':16} {'count':>6} {'max_abs':>11} {'max_rel':>11} {'min_cosine':>12}")
for op, s in sorted(r["ops"].items()):
    print(f"{op:16} {s['count']:>6} {s['max_abs']:>11.3g} {s['max_rel']:>11.3g} {s['min_cosine']:>12.9f}")
f = r.get("first_failure")
if f:
    print(f"FIRST FAILURE: {f['op']} ({f['site']}) layer {f['layer']} {f['pass']} step {f['step']}: {f['kind']}")
    print(f"  inputs {f['inputs']} -> {f['outputs']}; max_abs {f['max_abs']:.4g} max_rel {f['max_rel']:.4g}")
    print("  " + f["message"][:3000])
EOF
done

section "generation on the default model: --backend cuda, then --debug-device"
export DGEMMA_CACHE="$build/cache"
timeout 120 "$build/dgemma" run -p "Hello" -n 32 --seed 3 -t 4 >"$out/run_cpu.txt" 2>"$out/run_cpu.err" ||
  { fail "run on the CPU"; tail -5 "$out/run_cpu.err"; }
for flags in "--backend cuda" "--backend cuda --debug-device"; do
  name=run_$(echo "$flags" | tr -c 'a-z\n' '_')
  if timeout 120 "$build/dgemma" run -p "Hello" -n 32 --seed 3 -t 4 $flags >"$out/$name.txt" 2>"$out/$name.err"; then
    grep -E "tokens/s|first token" "$out/$name.err"
    # Same seed: same text as the CPU unless a near-tie flips an argmax (random weights).
    cmp -s "$out/run_cpu.txt" "$out/$name.txt" && echo "-- $flags: same text as the CPU" ||
      echo "-- $flags: text differs from the CPU run (check $out/$name.txt)"
  else
    fail "run $flags"
    tail -20 "$out/$name.err"
  fi
done

if [ "$tests" = ON ] && command -v compute-sanitizer >/dev/null; then
  section "compute-sanitizer memcheck (op tests, plain mode)"
  if timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/cuda_tests" \
      --gtest_filter='Modes/CudaOps.*/cuda:CudaGuards.*' \
      --gtest_color=no >"$out/memcheck.log" 2>&1; then
    grep -E "ERROR SUMMARY|PASSED" "$out/memcheck.log"
  else
    rc=$?
    grep -E "=========|ERROR SUMMARY|FAILED" "$out/memcheck.log" | head -40
    [ $rc -eq 124 ] && echo "(memcheck timed out: not a failure of the backend)" || fail "memcheck (log: $out/memcheck.log)"
  fi
fi

section "summary"
[ $status -eq 0 ] && echo "gpu-check: all steps passed" || echo "gpu-check: FAILED (logs in $out)"
exit $status
