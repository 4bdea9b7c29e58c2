#!/usr/bin/env bash
# `dgemma plan` on the sparse fake of the real 26B-A4B checkpoint: 1, 2, 4 and
# 8 devices, the JSON fields, and the error for a model larger than the devices.
set -euo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
"$bin" fixture sparse "$src/tests/data/configs/diffusiongemma-26b-a4b.config.json" "$tmp/m" 2>/dev/null

devices() {  # n, size
  local list="" i
  for ((i = 0; i < $1; i++)); do list+="${list:+,}cuda:$i=$2"; done
  echo "$list"
}
for spec in "1 80GiB" "2 40GiB" "4 24GiB" "8 12GiB"; do
  set -- $spec
  out=$("$bin" plan -m "$tmp/m" --devices "$(devices "$1" "$2")" --strategy balanced --json)
  for key in '"devices"' '"capacity_bytes"' '"weights_bytes"' '"kv_bytes"' '"workspace_bytes"' '"layers"' \
             '"tensors"' '"tie_groups"' '"edges"' '"lm_head.weight"' '"model.encoder.language_model.layers.29.layer_scalar"'; do
    grep -q "$key" <<<"$out" || { echo "missing $key"; exit 1; }
  done
  n=$(grep -c '"name": "cuda:' <<<"$out")
  [ "$n" -eq "$1" ] || { echo "expected $1 devices in the plan, got $n"; exit 1; }
  ok "$1 x $2"
done

if "$bin" plan -m "$tmp/m" --devices cuda:0=24GiB --strategy single --json >"$tmp/err.json"; then exit 1; fi
grep -q '"min_bytes_per_device"' "$tmp/err.json" && grep -q '"error"' "$tmp/err.json"
ok "model larger than one device: JSON error with min_bytes_per_device"

if "$bin" plan -m "$tmp/m" --devices cuda:0=lots 2>"$tmp/err"; then exit 1; fi
grep -q "invalid byte size 'lots'" "$tmp/err"
ok "bad device size"
echo "$passed passed, 0 failed"
