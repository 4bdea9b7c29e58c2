#!/usr/bin/env bash
# `dgemma quantize --format nvfp4-experts --calibrate-ids` on the golden tiny
# checkpoint (docs/formats.md §3.5): every expert's input_scale equals
# amax / (6 * 448) of the expert inputs that `dgemma forward --expert-inputs`
# taps on the same samples, computed by lib/calibration_check.py, which shares
# no code with the calibration; the configs follow ModelOpt's schema for W4A4
# and, without calibration, for the weight-only W4A16_NVFP4; the calibrated
# export loads and generates; bad calibration input is a clear error.
#
# usage: quantize_calibration.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
GOLDEN="$SRC/tests/data/golden_a"
CHECK="$SRC/tests/cli/lib/calibration_check.py"

# Three samples, one longer than --calib-seq-len (cut), separators as
# `dgemma tokenize` and hand-written lists use them, and a blank line.
cat >"$TMP/samples.txt" <<'IDS'
2 17 45 301 77 9 120 33 250 18 400 5 66 91 12 7 300 201 44 8 15 16 23 42 99 100 101
2, 88, 199, 3, 47, 256, 311, 12

[2, 480, 35, 36, 37, 120, 121, 122, 5, 6]
IDS

for mode in both:layer both:expert encoder:layer; do
  passes=${mode%%:*}
  scales=${mode##*:}
  out="$TMP/cal-$passes-$scales"
  if "$BIN" quantize "$GOLDEN" "$out" --format nvfp4-experts --calibrate-ids "$TMP/samples.txt" --calib-seq-len 20 \
      --calib-passes "$passes" --input-scales "$scales" >"$TMP/q.out" 2>"$TMP/q.err" &&
      grep -q "peak RSS" "$TMP/q.err"; then
    ok "calibrated export ($passes passes, $scales scales): $(grep 'calibrate: ' "$TMP/q.err" | head -1)"
  else
    bad "calibrated export ($passes, $scales) failed: $(cat "$TMP/q.err")"
    continue
  fi
  mkdir -p "$TMP/check-$passes-$scales"
  if python3 "$CHECK" "$BIN" "$GOLDEN" "$TMP/samples.txt" 20 "$passes" "$scales" "$out" "$TMP/check-$passes-$scales" \
      >"$TMP/check.out" 2>&1; then
    ok "independent check ($passes, $scales): $(tail -1 "$TMP/check.out")"
  else
    bad "independent check ($passes, $scales): $(head -20 "$TMP/check.out")"
  fi
done

# The W4A4 schema ModelOpt writes for nvfp4_experts_only (docs/formats.md §3.4).
if python3 - "$TMP/cal-both-layer" <<'PY'
import json, sys
d = sys.argv[1]
hq = json.load(open(d + "/hf_quant_config.json"))
cfg = json.load(open(d + "/config.json"))["quantization_config"]
scheme = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}
q = hq["quantization"]
ok = (hq["producer"]["name"] == "modelopt" and q["quant_algo"] == "NVFP4" and q["group_size"] == 16 and
      "*router*" in q["exclude_modules"] and "*self_conditioning*" in q["exclude_modules"] and
      cfg["quant_method"] == "modelopt" and cfg["quant_algo"] == "NVFP4" and
      cfg["config_groups"]["group_0"] == {"input_activations": scheme, "weights": scheme, "targets": ["Linear"]} and
      cfg["ignore"] == q["exclude_modules"] and hq["producer"]["calibration"]["passes"] == "encoder+decoder")
sys.exit(0 if ok else 1)
PY
then ok "W4A4 configs: quant_algo NVFP4, input_activations group 16, the calibration set recorded"
else bad "W4A4 configs: $(cat "$TMP/cal-both-layer/hf_quant_config.json")"; fi

# The calibrated export loads and generates.
if "$BIN" generate -m "$TMP/cal-both-layer" --prompt-ids 2,17,45,301 --seed 1 --json >"$TMP/g.json" 2>"$TMP/g.err" &&
    python3 -c "import json,sys; d=json.load(open('$TMP/g.json')); sys.exit(0 if len(d['tokens']) > 0 else 1)"; then
  ok "the calibrated export generates"
else
  bad "generate on the calibrated export: $(cat "$TMP/g.err" "$TMP/g.json" | head -c 600)"
fi

# Without calibration: the weight-only variant, no activation scale anywhere.
if "$BIN" quantize "$GOLDEN" "$TMP/w4a16" --format nvfp4-experts >/dev/null 2>"$TMP/w.err" &&
    grep -q "W4A16_NVFP4" "$TMP/w.err" && python3 - "$TMP/w4a16" <<'PY'
import json, struct, sys
d = sys.argv[1]
hq = json.load(open(d + "/hf_quant_config.json"))
cfg = json.load(open(d + "/config.json"))["quantization_config"]
with open(d + "/model.safetensors", "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
ok = (hq["quantization"]["quant_algo"] == "W4A16_NVFP4" and cfg["quant_algo"] == "W4A16_NVFP4" and
      "input_activations" not in cfg["config_groups"]["group_0"] and
      not any(k.endswith(".input_scale") for k in header) and any(k.endswith(".weight_scale_2") for k in header))
sys.exit(0 if ok else 1)
PY
then ok "no --calibrate: W4A16_NVFP4, no input_scale, no input_activations"
else bad "no --calibrate: $(cat "$TMP/w.err" "$TMP/w4a16/hf_quant_config.json" | head -c 800)"; fi
if "$BIN" forward -m "$TMP/w4a16" --inputs "$GOLDEN/cases/encoder_long.safetensors" --out "$TMP/w.st" 2>"$TMP/wf.err"; then
  ok "the weight-only export loads (forward runs)"
else
  bad "forward on the weight-only export: $(cat "$TMP/wf.err")"
fi

# Bad input: clear errors naming the file, line and value.
printf '2 17 45\n2 9999 3\n' >"$TMP/bad_id.txt"
expect_error "an id outside the vocabulary" "bad_id.txt:2: token id 9999" \
  "$BIN" quantize "$GOLDEN" "$TMP/e1" --format nvfp4-experts --calibrate-ids "$TMP/bad_id.txt" -q
printf '2 17 x5\n' >"$TMP/bad_text.txt"
expect_error "an item that is not an id" "bad_text.txt:1: 'x5' is not a token id" \
  "$BIN" quantize "$GOLDEN" "$TMP/e2" --format nvfp4-experts --calibrate-ids "$TMP/bad_text.txt" -q
printf '\n\n' >"$TMP/empty.txt"
expect_error "an empty samples file" "empty.txt: no calibration samples" \
  "$BIN" quantize "$GOLDEN" "$TMP/e3" --format nvfp4-experts --calibrate-ids "$TMP/empty.txt" -q
expect_error "a missing samples file" "nowhere.txt" \
  "$BIN" quantize "$GOLDEN" "$TMP/e4" --format nvfp4-experts --calibrate-ids "$TMP/nowhere.txt" -q
"$BIN" quantize "$GOLDEN" "$TMP/e5" --format nf4 --calibrate-ids "$TMP/samples.txt" -q >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "no activation parameters" "$TMP/err"; then
  ok "--calibrate with nf4: usage error (exit 2): $(cat "$TMP/err")"
else
  bad "--calibrate with nf4: rc=$rc $(cat "$TMP/err")"
fi
"$BIN" quantize "$GOLDEN" "$TMP/e6" --format nvfp4-experts --calibrate-ids "$TMP/samples.txt" \
  --calibrate "$TMP/samples.txt" -q >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "not both" "$TMP/err"; then ok "--calibrate and --calibrate-ids together: exit 2"
else bad "--calibrate with --calibrate-ids: rc=$rc $(cat "$TMP/err")"; fi

finish
