#!/usr/bin/env bash
# CPU speed figures of bench/README.md, in one command:
#   scripts/bench.sh            kernels vs OpenBLAS and peak, MoE, attention, model steps, CLI benches
#   scripts/bench.sh kernels    only the kernel benchmarks (no 4.7 GB model slice)
#   scripts/bench.sh quant      quantized GEMMs (exact and int8-dot), quantized steps, memory of quantized checkpoints
# Builds the Release benchmarks in $DGEMMA_BENCH_BUILD (default build/release),
# writes results to $DGEMMA_BENCH_OUT (default bench/results) and the model
# slice to $DGEMMA_BENCH_SLICE (default $TMPDIR/dgemma_bench_slice_2l, reused).
# Timings on a shared machine are noisy: every ratio is measured in the same
# process, interleaved with its baseline, best of several runs.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
build=${DGEMMA_BENCH_BUILD:-build/release}
out=${DGEMMA_BENCH_OUT:-bench/results}
slice=${DGEMMA_BENCH_SLICE:-${TMPDIR:-/tmp}/dgemma_bench_slice_2l}
jobs=${DGEMMA_JOBS:-$(nproc)}
export DGEMMA_BENCH_SLICE=$slice

scripts/install-deps.sh  # libbenchmark-dev and libopenblas-dev (the sgemm baseline)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs" --target dgemma bench_cpu_kernels_bench bench_model_step_bench bench_quant_gemm \
  bench_quant_memory
mkdir -p "$out"

# Debian 12's OpenBLAS 0.3.21 does not know Zen 4/5 and runs its AVX2
# (Haswell) kernels there; the AVX-512 SkylakeX kernels are the stronger
# baseline on these CPUs. Override with OPENBLAS_CORETYPE=Haswell to compare
# with what an unconfigured OpenBLAS gives.
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}

quant() {
  echo "== quantized GEMMs (exact: dequantize in the tile; int8-dot) vs the bf16 path and OpenBLAS sgemm =="
  "$build/bench_quant_gemm" --benchmark_min_time=0.3 --benchmark_out="$out/quant_gemm.json" --benchmark_out_format=json
  echo "== whole steps on the slice: quantized at load, exact path vs int8-dot (and the bf16 exact step) =="
  "$build/dgemma" bench slice -o "$slice"
  for run in "" "--quantize nf4" "--quantize nf4 --precision int8-dot" "--quantize q8 --precision int8-dot" \
      "--quantize nvfp4-experts --precision int8-dot"; do
    "$build/dgemma" bench step -m "$slice" --steps 2 $run --json | tee -a "$out/dgemma_bench_step_quant.jsonl"
  done
  echo "== memory of quantized checkpoints (2-layer slice at real shapes) =="
  for fmt in nf4 nvfp4-experts mlx4; do
    q="$slice-$fmt"
    [ -f "$q/model.safetensors" ] || "$build/dgemma" quantize "$slice" "$q" --format "$fmt"
    echo "-- $fmt: file $(du -m "$q/model.safetensors" | cut -f1) MiB"
    /usr/bin/time -f "$fmt load+touch: peak RSS %M KiB" "$build/bench_quant_memory" load "$q" --touch
    /usr/bin/time -f "$fmt load+decode: peak RSS %M KiB" "$build/bench_quant_memory" load "$q" --decode
  done 2>&1 | tee "$out/quant_memory.txt"
}
if [ "$what" = quant ]; then quant; exit 0; fi

echo "== kernels: GEMM (vs OpenBLAS sgemm and peak), experts, MoE layer, attention, soft-cap =="
"$build/bench_cpu_kernels_bench" --benchmark_counters_tabular=true \
  --benchmark_out="$out/cpu_kernels.json" --benchmark_out_format=json
echo "== dgemma bench kernels (no BLAS; baseline: the scalar reference kernel) =="
"$build/dgemma" bench kernels --json | tee "$out/dgemma_bench_kernels.jsonl"
[ "$what" = kernels ] && exit 0

echo "== model steps on a 2-layer slice of the 26B-A4B model =="
"$build/dgemma" bench slice -o "$slice"
"$build/bench_model_step_bench" --benchmark_counters_tabular=true \
  --benchmark_out="$out/model_step.json" --benchmark_out_format=json
for mode in "" "--bf16-dot"; do
  "$build/dgemma" bench step -m "$slice" $mode
  "$build/dgemma" bench step -m "$slice" $mode --json >> "$out/dgemma_bench_step.jsonl"
done
quant
echo "results in $out"
