#!/usr/bin/env bash
# Placement on OpenCL devices (docs/placement.md §3.1, docs/opencl.md §2):
# `plan` reads an OpenCL device's memory when no size is given, and a plan's
# OpenCL stages run their layers there — after a CPU stage, and as two stages
# on the same device (two backends, the hidden states handed over through the
# host): the two-stage run must equal the one-device run bit for bit, with
# and without the debug mode's guards.
# usage: bash opencl_pipeline.sh <dgemma-binary> <source-dir>
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" devices --json >"$tmp/devices.json"
dev=$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))["opencl"]; d=o.get("devices", []); print(d[-1]["backend"] if d else "")' \
  "$tmp/devices.json")
if [ -z "$dev" ]; then
  echo "skip: no OpenCL device (or no OpenCL backend in this build): $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["opencl"].get("error", "not built"))' "$tmp/devices.json")"
  exit 77  # skipped (CMakeLists.txt: SKIP_RETURN_CODE)
fi
memory=$(python3 -c 'import json,sys; print(next(d["global_memory_bytes"] for d in json.load(open(sys.argv[1]))["opencl"]["devices"] if d["backend"] == sys.argv[2]))' \
  "$tmp/devices.json" "$dev")

# A device without a size is sized by the memory it reports.
"$bin" plan -m "$data" --devices "$dev" --json >"$tmp/one.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"]; assert len(d) == 1 and d[0]["name"] == sys.argv[2] and d[0]["capacity_bytes"] == int(sys.argv[3]), d' \
  "$tmp/one.json" "$dev" "$memory" || fail "plan --devices $dev: $(cat "$tmp/one.json")"
ok "plan --devices $dev: its own memory ($memory bytes)"
if "$bin" plan -m "$data" --devices "${dev%.*}.99" 2>"$tmp/err"; then fail "a device that does not exist was planned"; fi
grep -qF "no such OpenCL device" "$tmp/err" || fail "$(cat "$tmp/err")"
ok "plan: an OpenCL device that does not exist"

# A CPU stage, then an OpenCL stage (layers 2-3 of golden A's 4).
"$bin" plan -m "$data" --devices "cpu:0=1000000,$dev=1000000" --margin 0 --utilization 1 --context 64 --image-tokens 0 \
  --strategy balanced --json >"$tmp/mixed.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"]; assert [(x["name"], x["layers"]) for x in d] == [("cpu:0", [0, 1]), (sys.argv[2], [2, 3])], d' \
  "$tmp/mixed.json" "$dev" || fail "$(cat "$tmp/mixed.json")"
# The same split, both stages on the one OpenCL device.
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["devices"][0]["name"] = sys.argv[2]; p["tensors"] = {k: sys.argv[2] for k in p["tensors"]}; json.dump(p, open(sys.argv[3], "w"))' \
  "$tmp/mixed.json" "$dev" "$tmp/twice.json"
ok "plans: cpu:0 + $dev, and $dev twice"

args=(generate -m "$data" --prompt-ids 2,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56 --seed 7 --json)
"$bin" "${args[@]}" --backend "$dev" >"$tmp/single.json" 2>"$tmp/single.err" || fail "$(cat "$tmp/single.err")"
"$bin" "${args[@]}" --plan "$tmp/twice.json" >"$tmp/twice.out" 2>"$tmp/err" || fail "$(cat "$tmp/err")"
cmp "$tmp/single.json" "$tmp/twice.out" || fail "two stages on $dev differ from one"
ok "two stages on $dev: identical output to one"
# The guards of --debug-device change no result.
"$bin" "${args[@]}" --plan "$tmp/twice.json" --debug-device >"$tmp/twice_debug.out" 2>"$tmp/err" ||
  fail "$(cat "$tmp/err")"
cmp "$tmp/single.json" "$tmp/twice_debug.out" || fail "--debug-device changed the output"
ok "two stages on $dev with --debug-device: the same output"
# CPU and OpenCL stages: CPU and device arithmetic differ in rounding, so
# the check is that it runs to the end with the prompt kept.
"$bin" "${args[@]}" --plan "$tmp/mixed.json" >"$tmp/mixed.out" 2>"$tmp/err" || fail "$(cat "$tmp/err")"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sequences"][0]; assert s[:18] == [2] + list(range(40, 57)) and len(s) > 18, s' \
  "$tmp/mixed.out" || fail "cpu:0 + $dev: $(cat "$tmp/mixed.out")"
ok "cpu:0 + $dev: runs to the end"
echo "$passed passed, 0 failed"
