#!/usr/bin/env bash
# Pipeline stages of a placement plan: one process with virtual CPU devices,
# one process with two CUDA devices, and `mpirun -np 2` with one rank per
# stage (loopback), each bit-identical to a single-device run.
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }

# Two virtual devices too small for the tiny model alone.
"$bin" plan -m "$data" --devices cpu:0=1000000,cpu:1=1000000 --margin 0 --utilization 1 --context 64 --image-tokens 0 \
  --strategy balanced --json >"$tmp/plan.json"
[ "$(grep -c '"name": "cpu:' "$tmp/plan.json")" -eq 2 ] || { cat "$tmp/plan.json"; exit 1; }
ok "two-stage plan"

args=(generate -m "$data" --prompt-ids 2,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56 --seed 7 --json)
"$bin" "${args[@]}" >"$tmp/single.json"
"$bin" "${args[@]}" --plan "$tmp/plan.json" >"$tmp/virtual.json"
cmp "$tmp/single.json" "$tmp/virtual.json"
ok "virtual CPU devices: identical output"

# The same split over two CUDA devices (a machine with two GPUs, or the
# emulated devices of a DGEMMA_CUDA=EMULATE build): each stage on its device,
# identical to one CUDA device. Without CUDA, --backend cuda must say why.
"$bin" plan -m "$data" --devices cuda:0=1000000,cuda:1=1000000 --margin 0 --utilization 1 --context 64 --image-tokens 0 \
  --strategy balanced --json >"$tmp/cuda_plan.json"
[ "$(grep -c '"name": "cuda:' "$tmp/cuda_plan.json")" -eq 2 ] || { cat "$tmp/cuda_plan.json"; exit 1; }
export DGEMMA_CUDA_EMULATED_DEVICES=2
cuda_two=0
if "$bin" "${args[@]}" --backend cuda >"$tmp/cuda_single.json" 2>"$tmp/cuda.err"; then
  if "$bin" "${args[@]}" --plan "$tmp/cuda_plan.json" >"$tmp/cuda_two.json" 2>"$tmp/cuda.err"; then
    cmp "$tmp/cuda_single.json" "$tmp/cuda_two.json" || { cat "$tmp/cuda_two.json"; exit 1; }
    ok "two CUDA devices: identical output to one"
    cuda_two=1
  else
    grep -q "CUDA device 1 does not exist" "$tmp/cuda.err" || { cat "$tmp/cuda.err"; exit 1; }
    ok "one CUDA device only: the plan's cuda:1 is a clear error"
  fi
else
  grep -qE "no CUDA device found|has no CUDA backend" "$tmp/cuda.err" || { cat "$tmp/cuda.err"; exit 1; }
  ok "no CUDA device here, and --backend cuda says so"
fi

# OpenMPI keeps allocations alive past MPI_Finalize; LeakSanitizer (ASan flavour) would flag them.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl=self,vader,tcp
mpirun -np 2 "$bin" "${args[@]}" --plan "$tmp/plan.json" >"$tmp/mpi.json" 2>"$tmp/mpi.err" ||
  { cat "$tmp/mpi.err"; exit 1; }
cmp "$tmp/single.json" "$tmp/mpi.json" || { cat "$tmp/mpi.json" "$tmp/mpi.err"; exit 1; }
ok "mpirun -np 2: identical output"
if [ "$cuda_two" = 1 ]; then  # one rank per CUDA device of the plan
  mpirun -np 2 -x DGEMMA_CUDA_EMULATED_DEVICES "$bin" "${args[@]}" --plan "$tmp/cuda_plan.json" >"$tmp/mpi_cuda.json" \
    2>"$tmp/mpi.err" || { cat "$tmp/mpi.err"; exit 1; }
  cmp "$tmp/cuda_single.json" "$tmp/mpi_cuda.json" || { cat "$tmp/mpi_cuda.json" "$tmp/mpi.err"; exit 1; }
  ok "mpirun -np 2 over two CUDA devices: identical output to one"
fi
unset DGEMMA_CUDA_EMULATED_DEVICES

if mpirun -np 1 "$bin" "${args[@]}" --plan "$tmp/plan.json" >/dev/null 2>"$tmp/err1"; then
  echo "a 2-stage plan ran on 1 rank"; exit 1
fi
grep -q "mpirun -np 2" "$tmp/err1" || { cat "$tmp/err1"; exit 1; }
ok "too few ranks is an error"
# Too many: every rank stops with the error (none waits for the extra one).
if timeout 120 mpirun -np 3 "$bin" "${args[@]}" --plan "$tmp/plan.json" >/dev/null 2>"$tmp/err3"; then
  echo "a 2-stage plan ran on 3 ranks"; exit 1
fi
grep -q "started 3 ranks (use mpirun -np 2)" "$tmp/err3" || { cat "$tmp/err3"; exit 1; }
ok "too many ranks is an error"
# A mixed CPU/CUDA plan runs in one process only (every rank computes the LM
# head itself, so all ranks must be the same kind of device).
"$bin" plan -m "$data" --devices cpu:0=1000000,cuda:0=1000000 --margin 0 --utilization 1 --context 64 --image-tokens 0 \
  --strategy balanced --json >"$tmp/mixed_plan.json"
if timeout 120 mpirun -np 2 "$bin" "${args[@]}" --plan "$tmp/mixed_plan.json" >/dev/null 2>"$tmp/errm"; then
  echo "a mixed CPU/CUDA plan ran under mpirun"; exit 1
fi
grep -q "under mpirun the devices must be all CUDA, all OpenCL or all CPU" "$tmp/errm" || { cat "$tmp/errm"; exit 1; }
ok "a mixed CPU/CUDA plan under mpirun is an error"
echo "$passed passed, 0 failed"
