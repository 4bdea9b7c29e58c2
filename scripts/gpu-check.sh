#!/usr/bin/env bash
# Device check of the CUDA backend, for a session that has an NVIDIA GPU (the
# H200 of the device tool). About 6 minutes on 16 cores before the slice
# section (step 4), which adds an estimated 2 more (every step has a timeout;
# the device tool stops a command after 600 s):
#   1. configures and builds Release with CUDA (sm_90 + PTX) in build-gpu:
#      only the `dgemma` CLI and the CUDA tests; then starts writing the
#      2-layer slice of step 4 in the background (`dgemma bench slice`:
#      real 26B-A4B dimensions, random bf16 weights, 4.7 GB in
#      build-gpu/slice2, about a minute of one core; kept for later runs);
#      then `dgemma_cuda_roofline`: HBM read/copy bandwidth, launch cost on a
#      stream and in a graph, cuBLAS fp32 pedantic vs bf16 at the model's shapes;
#   2. runs tests/cuda: every op against the CPU in the cuda, cuda:sync,
#      cuda:debug and cuda:bf16-dot modes, the fault guards, and the doctor on
#      golden_a;
#   3. runs `dgemma doctor -m tests/data/golden_a --json` with --backend cuda
#      (fp32, --precision bf16 and bf16-dot, int8-dot with --quantize nf4 and
#      q8) and cuda:debug, and prints per-op
#      max errors;
#   4. on the slice (real head dims 256/512, 128 experts, vocab 262144): the
#      doctor with --backend cuda (1 step, the default 12-token prompt), in
#      fp32, in bf16-dot, in int8-dot on NF4 weights and in bf16-dot on FP8
#      weights, and the same per-op table, then `dgemma bench step --context
#      512 --steps 3` with --backend cuda in fp32 (flash attention and CUDA
#      graphs, then cuda:eager, then cuda:cublas-attention), bf16-dot, bf16-dot with --quantize fp8, and
#      int8-dot with --quantize nf4 (steps
#      as generate() runs them, device time per op; batch 1 and 4, and the
#      host/device traffic per step) and, for comparison, --backend cpu -t 16
#      (DGEMMA_GPU_SKIP_CPU_BENCH=1 leaves it out): canvas positions/s, step
#      seconds, the slowest ops and the 30-layer estimate in ms per canvas;
#   5. generates on the default model with --backend cuda and --debug-device;
#   6. if compute-sanitizer is there, runs the op tests under memcheck;
#   7. OpenCL on the NVIDIA driver, when the machine has its ICD
#      (/etc/OpenCL/vendors/nvidia.icd) and the build found the OpenCL headers
#      and loader (-DDGEMMA_OPENCL=AUTO): the op catalogue's opencl rows and
#      tests/opencl, `doctor --backend opencl:P.D` (and its debug mode) on
#      golden_a, a golden replay of a generate_* case with --backend
#      opencl:P.D, and `bench step` with --backend opencl:P.D beside --backend
#      cuda, with the ratio of their step times. Until every op runs on
#      OpenCL, the doctor names the first op it refuses and the model runs say
#      so (reported, not failed). Without the ICD the section says so and is
#      skipped.
# Logs and JSON reports go to $OUT/gpu-check.tgz when $OUT is set (the device
# tool's output folder), else to build-gpu/out. Exit status: 0 when every
# step passed.
#
# The device image may lack GoogleTest (nothing can be installed there). Then,
# on a machine that has it (Debian: libgtest-dev), first run
#   scripts/gpu-check.sh --stage-gtest
# which copies headers, static libraries and CMake config into build-gpu-deps/
# (ignored by git, about 2 MB), and carry "build-gpu-deps" to the device.
#
# To spend no device time on the build, first run here
#   scripts/gpu-check.sh --stage-prebuilt [build/release]
# (the Release binaries and their non-system libraries into build-gpu/), carry
# "build-gpu" and run there with DGEMMA_GPU_PREBUILT=1; when the binaries do
# not start there, the script builds as above.
#
#   scripts/gpu-check.sh --emulate
# runs the same script without a GPU, on the emulated CUDA device
# (DGEMMA_CUDA=EMULATE, build-gpu-emu): a dry run of the script itself before
# spending device time. It skips the slice (real dimensions are too slow for
# the emulator) and memcheck, and generates fewer tokens.
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

if [ "${1:-}" = "--stage-prebuilt" ]; then
  # Release binaries built here (scripts/build.sh release) and the shared
  # libraries they need beyond the C/C++ runtime, CUDA's and the driver's, into
  # build-gpu/ (ignored by git): carry "build-gpu" and run with
  # DGEMMA_GPU_PREBUILT=1 to skip the build on the device.
  set -e
  src=${2:-build/release}
  rm -rf build-gpu
  mkdir -p build-gpu/lib
  for b in dgemma cuda_tests dgemma_cuda_roofline opencl_tests ops_tests; do
    [ -x "$src/$b" ] && cp "$src/$b" build-gpu/ && strip build-gpu/$b
  done
  ldd build-gpu/dgemma build-gpu/cuda_tests 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcudart)\.so' |
    xargs -r -I{} cp -L {} build-gpu/lib/
  # CUDA's runtime as a last resort (the device's own toolkit comes first).
  mkdir -p build-gpu/lib-cudart
  ldd build-gpu/dgemma | awk '/libcudart/{print $3}' | xargs -r -I{} cp -L {} build-gpu/lib-cudart/
  du -sh build-gpu build-gpu/lib
  echo "staged prebuilt binaries in build-gpu; carry build-gpu and set DGEMMA_GPU_PREBUILT=1"
  exit 0
fi

emulate=0
[ "${1:-}" = "--emulate" ] && emulate=1
build=build-gpu
cuda_mode=ON
run_tokens=32
if [ $emulate = 1 ]; then
  build=build-gpu-emu
  cuda_mode=EMULATE
  run_tokens=4
fi
# The device tool returns at most 8 files from $OUT: the logs are written
# elsewhere and packed into $OUT/gpu-check.tgz at the end.
out=$build/out
[ -n "${OUT:-}" ] && out=$(mktemp -d)/out
mkdir -p "$out"
pack_results() {
  [ -n "${OUT:-}" ] && tar czf "$OUT/gpu-check.tgz" -C "$out" . && echo "logs and JSON reports: \$OUT/gpu-check.tgz"
}
trap pack_results EXIT
status=0
fail() {
  echo "FAILED: $*"
  status=1
}
section() { echo; echo "== $* =="; }

# doctor_table REPORT.json: ops compared, the per-op error table and the
# first failure of a `dgemma doctor --json` report (the raw file when it is
# not one).
doctor_table() {
  [ -s "$1" ] || { echo "(no report in $1)"; return 1; }
  python3 - "$1" <<'EOF' || cat "$1"
import json, sys
r = json.load(open(sys.argv[1]))
nan = float("nan")  # the report writes a NaN (or infinite) measure as null
num = lambda x: nan if x is None else x
print(f"ops compared {r['ops_compared']}, child {r['child_status']}")
print(f"{'op':16} {'count':>6} {'max_abs':>11} {'max_rel':>11} {'min_cosine':>12}")
for op, s in sorted(r["ops"].items()):
    if s["count"]:
        print(f"{op:16} {s['count']:>6} {num(s['max_abs']):>11.3g} {num(s['max_rel']):>11.3g} {num(s['min_cosine']):>12.9f}")
    if s.get("unsupported"):
        print(f"{op:16} {s['unsupported']:>6}   not run: the target does not support it")
f = r.get("first_failure")
if f:
    print(f"FIRST FAILURE: {f['op']} ({f['site']}) layer {f['layer']} {f['pass']} step {f['step']}: {f['kind']}")
    print(f"  inputs {f['inputs']} -> {f['outputs']}; max_abs {num(f['max_abs']):.4g} max_rel {num(f['max_rel']):.4g}")
    print("  " + f["message"][:3000])
EOF
}

# bench_summary STEP.json: speed figures of a `dgemma bench step --json` run.
bench_summary() {
  [ -s "$1" ] || { echo "(no report in $1)"; return 1; }
  python3 - "$1" <<'EOF' || cat "$1"
import json, sys
d = json.load(open(sys.argv[1]))
cpu = f", {d['threads']} threads, {d['isa']}, {100 * d['fraction_of_peak']:.0f}% of peak" if "threads" in d else ""
print(f"backend {d['backend']}{cpu}: context {d['context']}, canvas {d['canvas']}, {d['layers']} layers")
print(f"  canvas positions/s {d['positions_per_s']:.1f}; step (self-conditioned) {d['step_sc_s']:.4f} s, "
      f"first step {d['step_first_s']:.4f} s, commit {d['commit_s']:.4f} s, "
      f"prefill incl. weights {d['prefill_s_incl_packing']:.2f} s; {d['gflops']:.0f} GFLOP/s")
ops = sorted(d["step_sc_by_op"].items(), key=lambda kv: -kv[1]["seconds"])[:5]
print("  slowest ops of the self-conditioned step: " +
      ", ".join(f"{op} {s['seconds']:.4f} s" for op, s in ops))
if "step_sc_device_s" in d:
    print(f"  steps as generate() runs them ({d['step_path']}): device busy {d['step_sc_device_s']:.4f} s of the "
          f"self-conditioned step; through the host API {d['step_sc_host_api_s']:.4f} s")
    print("  device time by op: " + ", ".join(f"{op} {s['seconds'] * 1e3:.2f} ms" for op, s in ops))
if "batch" in d:
    print(f"  batched: {d['batch']} canvases in one pass {d['batch_step_sc_s']:.4f} s, "
          f"{d['batch_positions_per_s']:.1f} positions/s ({d['batch_speedup']:.2f}x one canvas)")
    if "batch_device_s" in d:
        print(f"  batched pass device busy {d['batch_device_s']:.4f} s ({d['batch_device_speedup']:.2f}x one canvas's)")
for path, t in d.get("device_traffic_per_step", {}).items():
    print(f"  device traffic per step ({path}): {t['h2d_bytes']} B up, {t['d2h_bytes']} B down "
          f"({t['h2d_bytes_per_position']:.1f} / {t['d2h_bytes_per_position']:.1f} per position), "
          f"{t['synchronizations']} waits, {t['kernel_launches']} launches in {t.get('graph_launches', 0)} graphs")
e = d.get("estimate")
if e:
    canvas_ms = 1e3 * (e['step_first_s'] + 15 * e['step_sc_s'] + e['commit_s'])
    print(f"  estimate for {e['layers']} layers: step {1e3 * e['step_sc_s']:.1f} ms, {e['positions_per_s']:.1f} "
          f"positions/s, {canvas_ms:.0f} ms per canvas at 16 steps, {e['tokens_per_s_16_steps']:.2f} tokens/s")
EOF
}

section "device"
[ $emulate = 1 ] && echo "EMULATED device (--emulate, DGEMMA_CUDA=EMULATE): this checks the script, not a GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi not available"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvcc --version | tail -2

section "configure + build (Release, CUDA)"
tests=ON
# Prebuilt binaries (--prebuilt, see the header): used as they are when they
# run here; else built below.
prebuilt=0
if [ "${DGEMMA_GPU_PREBUILT:-0}" = 1 ] && [ -x "$build/dgemma" ]; then
  [ -d "$build/lib" ] && export LD_LIBRARY_PATH="$root/$build/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$root/$build/lib-cudart"
  if "$build/dgemma" --version >"$out/prebuilt.log" 2>&1; then
    prebuilt=1
    [ -x "$build/cuda_tests" ] || tests=OFF
    echo "prebuilt binaries in $build: $(head -1 "$out/prebuilt.log")"
  else
    echo "the prebuilt dgemma does not run here (building instead):"
    tail -3 "$out/prebuilt.log"
  fi
fi
if [ $prebuilt = 0 ]; then
prefix=()
[ -d build-gpu-deps/gtest ] && prefix=(-DCMAKE_PREFIX_PATH="$root/build-gpu-deps/gtest")
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
configure() {
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDGEMMA_CUDA=$cuda_mode -DDGEMMA_BENCH=OFF \
    -DDGEMMA_OPENCL=AUTO -DDGEMMA_TESTS="$tests" "${prefix[@]}" >"$out/configure.log" 2>&1
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
grep -E "dgemma: (CUDA|OpenCL)" "$out/configure.log"
targets=(dgemma)
[ $emulate = 0 ] && targets+=(dgemma_cuda_roofline)  # nvcc-only: no such target in the emulated build
[ "$tests" = ON ] && targets+=(cuda_tests)
# The OpenCL tests of section 7, where the build has OpenCL and the NVIDIA ICD is there to run them.
if [ "$tests" = ON ] && [ -f /etc/OpenCL/vendors/nvidia.icd ] && grep -q "dgemma: OpenCL backend ON" "$out/configure.log"; then
  targets+=(opencl_tests ops_tests)
fi
start=$(date +%s)
if ! timeout 420 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1; then
  grep -E "error|FAILED" -A5 "$out/build.log" | head -60
  echo "build failed (log: $out/build.log)"
  exit 1
fi
echo "built ${targets[*]} in $(($(date +%s) - start)) s"
grep -E "warning" "$out/build.log" | grep -E "src/backend/cuda|tests/cuda" | head -20
fi  # prebuilt

if [ $emulate = 0 ] && [ -x "$build/dgemma_cuda_roofline" ]; then
  section "roofline: HBM bandwidth, launch cost, cuBLAS fp32 vs bf16 at the model's shapes"
  timeout 120 "$build/dgemma_cuda_roofline" --json "$out/roofline.json" 2>&1 | tee "$out/roofline.txt" ||
    fail "dgemma_cuda_roofline"
fi

# The slice for the section "2-layer slice" is written while the tests run
# (CPU and disk only; returns at once when build-gpu/slice2 already holds it).
slice=$build/slice2
slice_start=$(date +%s)
slice_pid=
if [ $emulate = 0 ]; then
  timeout 240 "$build/dgemma" bench slice -o "$slice" --layers 2 >"$out/slice.log" 2>&1 &
  slice_pid=$!
fi

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
for run in "cuda fp32" "cuda bf16" "cuda bf16-dot" "cuda:debug fp32" "cuda int8-dot nf4" "cuda int8-dot q8"; do
  set -- $run
  name=doctor_${1/:/_}_$2${3:+_$3}
  quant=()
  [ -n "${3:-}" ] && quant=(--quantize "$3")
  timeout 120 "$build/dgemma" doctor -m tests/data/golden_a --backend "$1" --precision "$2" "${quant[@]}" -t 4 --json \
    >"$out/$name.json" 2>"$out/$name.err"
  rc=$?
  echo "-- --backend $1 --precision $2 ${quant[*]}: exit $rc"
  [ $rc -eq 0 ] || { fail "doctor --backend $1 --precision $2 ${quant[*]}"; cat "$out/$name.err"; }
  doctor_table "$out/$name.json"
done

section "2-layer slice of the real dimensions: doctor and bench step (cuda, then cpu)"
rc=0
[ -n "$slice_pid" ] && { wait $slice_pid; rc=$?; }
if [ $emulate = 1 ]; then
  echo "skipped on the emulated device (--emulate): real dimensions are too slow for it"
elif [ $rc -ne 0 ]; then
  fail "bench slice -o $slice --layers 2: exit $rc$([ $rc -eq 124 ] && echo ' (timed out)')"
  tail -5 "$out/slice.log"
else
  echo "slice $slice ($(du -sh "$slice" | cut -f1)) ready $(($(date +%s) - slice_start)) s after it was started"
  # One step with the default 12-token prompt. --routing-from-reference: with
  # random weights and 128 experts, a near-tie among the router scores can
  # pick another top-8 than the CPU without any kernel being wrong (the top-k
  # weights are still compared, and the model follows the CPU's routing).
  # slice_doctor NAME FLAGS...: doctor --backend cuda FLAGS on the slice, its
  # JSON in $out/doctor_slice_NAME.json and the per-op table.
  slice_doctor() {
    local name=$1 rc
    shift
    timeout 240 "$build/dgemma" doctor -m "$slice" --backend cuda "$@" --steps 1 --routing-from-reference --json \
      >"$out/doctor_slice_$name.json" 2>"$out/doctor_slice_$name.err"
    rc=$?
    echo "-- doctor --backend cuda $*: exit $rc$([ $rc -eq 124 ] && echo ' (timed out after 240 s)')"
    [ $rc -eq 0 ] || { fail "doctor on the slice --backend cuda $*"; tail -20 "$out/doctor_slice_$name.err"; }
    doctor_table "$out/doctor_slice_$name.json"
  }
  slice_doctor fp32
  # The dot mode (tensor cores) against the CPU's dot mode.
  slice_doctor dot --precision bf16-dot
  # The integer mode on NF4 experts and linears (quantized at load) against
  # the CPU's int8-dot.
  slice_doctor int8 --quantize nf4 --precision int8-dot
  # FP8 weights with a scale per channel on the bf16 tensor cores, against
  # the CPU's dot mode.
  slice_doctor fp8 --quantize fp8 --precision bf16-dot
  # cuda-cublasattn: attention as two cuBLAS products (the flash kernel's A/B);
  # cuda-eager: every kernel launched directly (the CUDA graphs' A/B).
  benches="cuda cuda-eager cuda-cublasattn cuda-dot cuda-fp8 cuda-int8 cpu"
  [ "${DGEMMA_GPU_SKIP_CPU_BENCH:-0}" = 1 ] && benches="cuda cuda-eager cuda-cublasattn cuda-dot cuda-fp8 cuda-int8"
  for backend in $benches; do
    name=bench_step_slice_$backend
    flags=(--backend ${backend%-*})
    [ $backend = cuda-cublasattn ] && flags=(--backend cuda:cublas-attention)
    [ $backend = cuda-eager ] && flags=(--backend cuda:eager)
    [ $backend = cuda-fp8 ] && flags+=(--quantize fp8 --precision bf16-dot)
    [ $backend = cpu ] && flags+=(-t 16)
    [ $backend = cuda-dot ] && flags+=(--precision bf16-dot)
    [ $backend = cuda-int8 ] && flags+=(--quantize nf4 --precision int8-dot)
    [ $backend != cpu ] && flags+=(--batch 4)  # batch 1 and 4 (the batch-of-4 throughput target, docs/cuda.md §7.2)
    timeout 180 "$build/dgemma" bench step -m "$slice" "${flags[@]}" --json --context 512 --steps 3 \
      >"$out/$name.json" 2>"$out/$name.err"
    rc=$?
    echo "-- bench step ${flags[*]}: exit $rc$([ $rc -eq 124 ] && echo ' (timed out after 180 s)')"
    if [ $rc -eq 0 ]; then
      bench_summary "$out/$name.json"
    else
      fail "bench step on the slice --backend $backend"
      tail -20 "$out/$name.err"
    fi
  done
fi

section "generation on the default model: --backend cuda, then --debug-device"
export DGEMMA_CACHE="$build/cache"
timeout 120 "$build/dgemma" run -p "Hello" -n $run_tokens --seed 3 -t 4 >"$out/run_cpu.txt" 2>"$out/run_cpu.err" ||
  { fail "run on the CPU"; tail -5 "$out/run_cpu.err"; }
for flags in "--backend cuda" "--backend cuda --debug-device" "--backend cuda --precision bf16-dot" \
  "--backend cuda --quantize q8 --precision int8-dot"; do
  name=run_$(echo "$flags" | tr -c 'a-z\n' '_')
  if timeout 120 "$build/dgemma" run -p "Hello" -n $run_tokens --seed 3 -t 4 $flags >"$out/$name.txt" 2>"$out/$name.err"; then
    grep -E "tokens/s|first token" "$out/$name.err"
    # Same seed: same text as the CPU unless a near-tie flips an argmax (random weights).
    cmp -s "$out/run_cpu.txt" "$out/$name.txt" && echo "-- $flags: same text as the CPU" ||
      echo "-- $flags: text differs from the CPU run (check $out/$name.txt)"
  else
    fail "run $flags"
    tail -20 "$out/$name.err"
  fi
done

if [ "$tests" = ON ] && [ $emulate = 0 ] && command -v compute-sanitizer >/dev/null; then
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

section "OpenCL on the NVIDIA driver: catalogue rows, doctor, replay, bench step beside CUDA"
# The OpenCL device of the NVIDIA platform ("" when there is none), from `dgemma devices --json`.
opencl_nvidia_device() {
  "$build/dgemma" devices --json 2>"$out/devices.err" | tee "$out/devices.json" | python3 -c '
import json, sys
o = json.load(sys.stdin)["opencl"]
print(next((d["backend"] for d in o.get("devices", []) if "NVIDIA" in d["platform_name"]), ""))'
}
# Whether an error log says the model reached an op OpenCL does not run yet.
refused() { grep -q "is not yet on OpenCL" "$1"; }
if [ ! -f /etc/OpenCL/vendors/nvidia.icd ]; then
  echo "skipped: no OpenCL ICD for the NVIDIA driver here (/etc/OpenCL/vendors/nvidia.icd)"
elif ! ocl=$(opencl_nvidia_device) || [ -z "$ocl" ]; then
  echo "skipped: the NVIDIA ICD is there, but this build lists no NVIDIA OpenCL device:"
  "$build/dgemma" devices 2>&1 | head -12
else
  "$build/dgemma" devices 2>&1 | sed -n "/  $ocl /,/extensions/p"
  if [ "$tests" = ON ] && [ -x "$build/ops_tests" ] && [ -x "$build/opencl_tests" ]; then
    # The catalogue's opencl target is the default device where there is no PoCL: the GPU.
    # The doctor tests fork, so each runs in a process of its own (as under ctest).
    opencl_tests_ok=1
    timeout 120 "$build/opencl_tests" --gtest_filter='-OpenClDoctor.*' --gtest_color=no >"$out/opencl_tests.log" 2>&1 ||
      opencl_tests_ok=0
    for t in $("$build/opencl_tests" --gtest_list_tests --gtest_filter='OpenClDoctor.*' | awk '/^  /{print "OpenClDoctor." $1}'); do
      timeout 120 "$build/opencl_tests" --gtest_filter="$t" --gtest_color=no >>"$out/opencl_tests.log" 2>&1 ||
        opencl_tests_ok=0
    done
    if timeout 240 "$build/ops_tests" --gtest_filter='*__opencl' --gtest_color=no >"$out/opencl_catalogue.log" 2>&1 &&
        [ $opencl_tests_ok = 1 ]; then
      grep -hE "^\[==========\] .* ran|^\[  (PASSED|SKIPPED) \] [0-9]+ test" "$out/opencl_catalogue.log" "$out/opencl_tests.log"
    else
      grep -hE "Failure|FAILED|Expected|Which is" -A3 "$out/opencl_catalogue.log" "$out/opencl_tests.log" | head -60
      fail "OpenCL catalogue rows or tests/opencl on $ocl"
    fi
  fi
  for spec in "$ocl" "$ocl,debug"; do
    name=doctor_opencl
    [ "$spec" != "$ocl" ] && name=doctor_opencl_debug
    timeout 120 "$build/dgemma" doctor -m tests/data/golden_a --backend "$spec" -t 4 --json >"$out/$name.json" \
      2>"$out/$name.err"
    rc=$?
    echo "-- doctor --backend $spec: exit $rc"
    if [ $rc -eq 1 ] && grep -q '"kind": "unsupported"' "$out/$name.json"; then
      echo "   (the first op OpenCL does not run yet is named below; the ops before it were compared)"
    elif [ $rc -ne 0 ]; then
      fail "doctor --backend $spec"
      tail -5 "$out/$name.err"
    fi
    doctor_table "$out/$name.json"
  done
  # A golden replay (the recorded draws and self-conditioning) on the device:
  # the reference's sequences exactly.
  case_json=$(ls tests/data/golden_a/cases/generate_*.json | head -1)
  replay_args=$(python3 - "$case_json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["effective_generation_config"]
eos = g["eos_token_id"] if isinstance(g["eos_token_id"], list) else [g["eos_token_id"]]
print(" ".join(["--prompt-ids", ",".join(map(str, d["sequences"][0][: d["prompt_len"]])),
                "--max-new-tokens", str(g["max_new_tokens"]), "--max-denoising-steps", str(g["max_denoising_steps"]),
                "--eos-token-id", ",".join(map(str, eos)), "--pad-token-id", str(g["pad_token_id"]),
                "--stability-threshold", str(g["stability_threshold"]),
                "--confidence-threshold", repr(g["confidence_threshold"]),
                "--entropy-bound", repr(g["sampler_config"]["entropy_bound"]),
                "--t-min", repr(g["t_min"]), "--t-max", repr(g["t_max"])]))
EOF
)
  # shellcheck disable=SC2086
  if timeout 120 "$build/dgemma" generate -m tests/data/golden_a --replay "${case_json%.json}.safetensors" \
      --replay-self-conditioning --backend "$ocl" --json -q $replay_args >"$out/replay_opencl.json" \
      2>"$out/replay_opencl.err"; then
    if python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); g=json.load(open(sys.argv[2])); sys.exit(0 if g["sequences"] == r["sequences"] else 1)' \
        "$case_json" "$out/replay_opencl.json"; then
      echo "-- replay $(basename "$case_json" .json) on $ocl: the reference's sequences"
    else
      fail "replay $(basename "$case_json" .json) on $ocl: sequences differ from the reference"
    fi
  elif refused "$out/replay_opencl.err"; then
    echo "-- replay on $ocl: not yet ($(grep -o '[a-z_]* is not yet on OpenCL' "$out/replay_opencl.err" | head -1))"
  else
    fail "replay on $ocl"
    tail -5 "$out/replay_opencl.err"
  fi
  # bench step, OpenCL beside CUDA on the same model: the ratio of the
  # self-conditioned step times (golden_a, and the slice when it was written).
  bench_models=(tests/data/golden_a)
  [ -f "$slice/config.json" ] && bench_models+=("$slice")
  for model in "${bench_models[@]}"; do
    tag=$(basename "$model")
    for backend in cuda "$ocl"; do
      json=$out/bench_step_${tag}_${backend%%:*}.json
      timeout 150 "$build/dgemma" bench step -m "$model" --backend "$backend" --json --context 64 --steps 3 \
        >"$json" 2>"${json%.json}.err"
      rc=$?
      echo "-- bench step -m $tag --backend $backend: exit $rc$([ $rc -eq 124 ] && echo ' (timed out after 150 s)')"
      if [ $rc -eq 0 ]; then
        bench_summary "$json"
      elif [ "$backend" = "$ocl" ] && refused "${json%.json}.err"; then
        echo "   not yet: $(grep -o '[a-z_]* is not yet on OpenCL' "${json%.json}.err" | head -1)"
      else
        fail "bench step -m $tag --backend $backend"
        tail -5 "${json%.json}.err"
      fi
    done
    python3 - "$out/bench_step_${tag}_cuda.json" "$out/bench_step_${tag}_opencl.json" <<'EOF' || true
import json, os, sys
if all(os.path.exists(p) and os.path.getsize(p) > 0 for p in sys.argv[1:]):
    c, o = (json.load(open(p)) for p in sys.argv[1:])
    print(f"   opencl / cuda step time on this model: {o['step_sc_s'] / c['step_sc_s']:.2f}x "
          f"({o['step_sc_s'] * 1e3:.2f} ms vs {c['step_sc_s'] * 1e3:.2f} ms per self-conditioned step)")
else:
    print("   (no ratio: a run did not finish)")
EOF
  done
fi

section "summary"
[ $status -eq 0 ] && echo "gpu-check: all steps passed" || echo "gpu-check: FAILED (logs in $out)"
exit $status
