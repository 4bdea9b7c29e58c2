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
# Quantized at load: the bf16 model (≈ 50 GB) does not fit one 40 GiB device,
# with FP8 weights (a byte each) it does; a scale per row (fp8) takes fewer
# bytes than one per 64 columns (q8) or per 128 (fp8-block).
if "$bin" plan -m "$tmp/m" --devices cuda:0=40GiB --strategy single --json >"$tmp/bf16.json"; then exit 1; fi
weights() { python3 -c 'import json,sys; print(sum(d["weights_bytes"] for d in json.load(open(sys.argv[1]))["devices"]))' "$1"; }
for mode in fp8 fp8-block q8; do
  "$bin" plan -m "$tmp/m" --devices cuda:0=40GiB --strategy single --quantize $mode --json >"$tmp/$mode.json"
done
fp8=$(weights "$tmp/fp8.json") block=$(weights "$tmp/fp8-block.json") q8=$(weights "$tmp/q8.json")
[ "$fp8" -lt "$block" ] && [ "$block" -lt "$q8" ] || { echo "fp8 $fp8, fp8-block $block, q8 $q8 bytes"; exit 1; }
ok "--quantize fp8 fits 40 GiB (bf16 does not): fp8 $fp8 < fp8-block $block < q8 $q8 bytes"
# The vision tower (golden V: 2 layers, hidden 32, 4 heads of 8, MLP 64,
# patch 4): with the encoder's first stage, its activations at 280 soft
# tokens x 3^2 = 2,520 patches counted in that device's workspace and shown.
out=$("$bin" plan -m "$src/tests/data/golden_v" --devices cpu:0=4GiB,cpu:1=4GiB)
grep -q "^vision tower on cpu:0 with the encoder's first stage: .* at 2520 patches" <<<"$out" || { echo "$out"; exit 1; }
"$bin" plan -m "$src/tests/data/golden_v" --devices cpu:0=4GiB --json >"$tmp/v.json"
python3 - "$tmp/v.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
v = p["vision_tower"]
n, H, q, kv, F, patch = 2520, 32, 32, 32, 64, 3 * 4 * 4
want = n * (2 * patch + 8 * H + 3 * (q + 2 * kv) + 3 * F + 4 * n) * 4
assert v["device"] == "cpu:0" and v["patches"] == n and v["activation_bytes"] == want, (v, want)
assert v["weights_bytes"] > 0 and p["devices"][0]["workspace_bytes"] >= want, (v, p["devices"][0])
assert p["tensors"]["model.encoder.vision_tower.encoder.layers.1.mlp.down_proj.linear.weight"] == "cpu:0"
PY
ok "vision tower with the first stage, activations at 2520 patches counted"
echo "$passed passed, 0 failed"
