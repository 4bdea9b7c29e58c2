#!/usr/bin/env bash
# Pipeline stages of a placement plan: one process with virtual CPU devices,
# and `mpirun -np 2` with one rank per stage (loopback), both bit-identical to
# a single-device run.
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }

# Two virtual devices too small for the tiny model alone.
"$bin" plan -m "$data" --devices cpu:0=1000000,cpu:1=1000000 --margin 0 --utilization 1 --context 64 \
  --strategy balanced --json >"$tmp/plan.json"
[ "$(grep -c '"name": "cpu:' "$tmp/plan.json")" -eq 2 ] || { cat "$tmp/plan.json"; exit 1; }
ok "two-stage plan"

args=(generate -m "$data" --prompt-ids 2,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56 --seed 7 --json)
"$bin" "${args[@]}" >"$tmp/single.json"
"$bin" "${args[@]}" --plan "$tmp/plan.json" >"$tmp/virtual.json"
cmp "$tmp/single.json" "$tmp/virtual.json"
ok "virtual CPU devices: identical output"

# OpenMPI keeps allocations alive past MPI_Finalize; LeakSanitizer (ASan flavour) would flag them.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl=self,vader,tcp
mpirun -np 2 "$bin" "${args[@]}" --plan "$tmp/plan.json" >"$tmp/mpi.json" 2>"$tmp/mpi.err" ||
  { cat "$tmp/mpi.err"; exit 1; }
cmp "$tmp/single.json" "$tmp/mpi.json" || { cat "$tmp/mpi.json" "$tmp/mpi.err"; exit 1; }
ok "mpirun -np 2: identical output"

if mpirun -np 1 "$bin" "${args[@]}" --plan "$tmp/plan.json" >/dev/null 2>"$tmp/err1"; then
  echo "a 2-stage plan ran on 1 rank"; exit 1
fi
grep -q "mpirun -np 2" "$tmp/err1" || { cat "$tmp/err1"; exit 1; }
ok "too few ranks is an error"
echo "$passed passed, 0 failed"
