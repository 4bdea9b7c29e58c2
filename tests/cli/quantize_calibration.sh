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

# passes:scales:seq-len:samples. The first is the plain command (defaults:
# both passes, layer scales, 512 tokens, 512 samples); the last reaches only
# some experts (3 tokens, top-2 of 8), so unreached experts take their layer's.
for mode in both:layer:512:512 both:expert:20:3 encoder:layer:20:3 encoder:expert:3:1; do
  IFS=: read -r passes scales seq count <<<"$mode"
  out="$TMP/cal-$passes-$scales-$seq"
  flags=()
  [ "$mode" = both:layer:512:512 ] || flags=(--calib-seq-len "$seq" --calib-samples "$count"
    --calib-passes "$passes" --input-scales "$scales")
  if "$BIN" quantize "$GOLDEN" "$out" --format nvfp4-experts --calibrate-ids "$TMP/samples.txt" "${flags[@]}" \
      >"$TMP/q.out" 2>"$TMP/q.err" && grep -q "peak RSS" "$TMP/q.err"; then
    ok "calibrated export ($mode): $(grep 'calibrate: ' "$TMP/q.err" | head -1)"
  else
    bad "calibrated export ($mode) failed: $(cat "$TMP/q.err")"
    continue
  fi
  mkdir -p "$out.check"
  if python3 "$CHECK" "$BIN" "$GOLDEN" "$TMP/samples.txt" "$seq" "$count" "$passes" "$scales" "$out" "$out.check" \
      >"$TMP/check.out" 2>&1; then
    ok "independent check ($mode): $(tail -1 "$TMP/check.out")"
  else
    bad "independent check ($mode): $(head -20 "$TMP/check.out")"
  fi
done
if grep -q "of 32 layer experts reached" "$TMP/check.out" && ! grep -q "(32 of 32" "$TMP/check.out"; then
  ok "the last case left experts unreached: $(tail -1 "$TMP/check.out")"
else
  bad "the last case reached every expert: $(tail -1 "$TMP/check.out")"
fi

# The W4A4 schema ModelOpt writes for nvfp4_experts_only (docs/formats.md §3.4).
if python3 - "$TMP/cal-both-layer-512" <<'PY'
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
      cfg["ignore"] == q["exclude_modules"] and hq["producer"]["calibration"]["passes"] == "encoder+decoder" and
      hq["producer"]["calibration"]["precision"] == "fp32" and
      q["kv_cache_quant_algo"] == "FP8" and cfg["kv_cache_scheme"] == {"dynamic": False, "num_bits": 8, "type": "float"})
sys.exit(0 if ok else 1)
PY
then ok "W4A4 configs: quant_algo NVFP4, input_activations group 16, FP8 KV cast, the calibration set recorded"
else bad "W4A4 configs: $(cat "$TMP/cal-both-layer-512/hf_quant_config.json")"; fi

# The calibrated export loads and generates.
if "$BIN" generate -m "$TMP/cal-both-layer-512" --prompt-ids 2,17,45,301 --seed 1 --json >"$TMP/g.json" 2>"$TMP/g.err" &&
    python3 -c "import json,sys; d=json.load(open('$TMP/g.json')); sys.exit(0 if len(d['sequences'][0]) > 0 else 1)"; then
  ok "the calibrated export generates"
else
  bad "generate on the calibrated export: $(cat "$TMP/g.err" "$TMP/g.json" | head -c 600)"
fi

# Without calibration: the weight-only variant, no activation scale anywhere.
if "$BIN" quantize "$GOLDEN" "$TMP/w4a16" --format nvfp4-experts --kv-cache none >/dev/null 2>"$TMP/w.err" &&
    grep -q "W4A16_NVFP4" "$TMP/w.err" && python3 - "$TMP/w4a16" <<'PY'
import json, struct, sys
d = sys.argv[1]
hq = json.load(open(d + "/hf_quant_config.json"))
cfg = json.load(open(d + "/config.json"))["quantization_config"]
with open(d + "/model.safetensors", "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
scheme = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}
ok = (hq["quantization"]["quant_algo"] == "W4A16_NVFP4" and cfg["quant_algo"] == "W4A16_NVFP4" and
      cfg["config_groups"]["group_0"] == {"weights": scheme, "targets": ["Linear"]} and
      hq["quantization"]["kv_cache_quant_algo"] is None and "kv_cache_scheme" not in cfg and
      not any(k.endswith(".input_scale") for k in header) and any(k.endswith(".weight_scale_2") for k in header))
sys.exit(0 if ok else 1)
PY
then ok "no --calibrate: W4A16_NVFP4, no input_scale, no input_activations; --kv-cache none: no KV scheme"
else bad "no --calibrate: $(cat "$TMP/w.err" "$TMP/w4a16/hf_quant_config.json" | head -c 800)"; fi
if "$BIN" forward -m "$TMP/w4a16" --inputs "$GOLDEN/cases/encoder_long.safetensors" --out "$TMP/w.st" 2>"$TMP/wf.err"; then
  ok "the weight-only export loads (forward runs)"
else
  bad "forward on the weight-only export: $(cat "$TMP/wf.err")"
fi

# Texts (JSON lines) on the built-in default model, tokenized with its
# tokenizer.json: the recorded set is the ids `dgemma tokenize` gives the same
# texts (with <bos>), or the chat prompt ids with --calib-chat.
"$BIN" run -p "hello" --n-predict 1 -q >/dev/null 2>"$TMP/r.err" || bad "default model: $(cat "$TMP/r.err")"
DEFAULT="$DGEMMA_CACHE/default-model-v2"
printf '{"text": "The quick brown fox jumps over the lazy dog."}\n\n{"text": "Calibration reads what the experts see.", "id": 2}\n' \
  >"$TMP/texts.jsonl"
sha_of() {  # sha_of FILE_OF_ID_LINES
  python3 -c "
import hashlib, struct, sys
h = hashlib.sha256()
for line in open(sys.argv[1]):
    ids = [int(t) for t in line.split()]
    h.update(struct.pack('<i', len(ids)) + struct.pack('<%di' % len(ids), *ids))
print(h.hexdigest())" "$1"
}
recorded_sha() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['producer']['calibration']['sha256'])" "$1"; }
"$BIN" tokenize -m "$DEFAULT" --add-special "The quick brown fox jumps over the lazy dog." >"$TMP/t.ids"
"$BIN" tokenize -m "$DEFAULT" --add-special "Calibration reads what the experts see." >>"$TMP/t.ids"
if "$BIN" quantize "$DEFAULT" "$TMP/text" --format nvfp4-experts --calibrate "$TMP/texts.jsonl" -q 2>"$TMP/t.err" &&
    [ "$(recorded_sha "$TMP/text/hf_quant_config.json")" = "$(sha_of "$TMP/t.ids")" ]; then
  ok "--calibrate JSON lines: the set recorded is the tokenized texts ($(wc -l <"$TMP/t.ids") samples)"
else
  bad "--calibrate JSON lines: $(cat "$TMP/t.err") $(recorded_sha "$TMP/text/hf_quant_config.json") vs $(sha_of "$TMP/t.ids")"
fi
for t in "The quick brown fox jumps over the lazy dog." "Calibration reads what the experts see."; do
  python3 -c "import json,sys; print(json.dumps([{'role': 'user', 'content': sys.argv[1]}]))" "$t" |
    "$BIN" tokenize -m "$DEFAULT" --chat
done >"$TMP/c.ids"
if "$BIN" quantize "$DEFAULT" "$TMP/chat" --format nvfp4-experts --calibrate "$TMP/texts.jsonl" --calib-chat -q \
    2>"$TMP/c.err" && [ "$(recorded_sha "$TMP/chat/hf_quant_config.json")" = "$(sha_of "$TMP/c.ids")" ]; then
  ok "--calibrate --calib-chat: the set recorded is the chat prompts' ids"
else
  bad "--calib-chat: $(cat "$TMP/c.err") $(recorded_sha "$TMP/chat/hf_quant_config.json") vs $(sha_of "$TMP/c.ids")"
fi
printf '{"text": "ok"}\n{"body": "no text"}\n' >"$TMP/bad.jsonl"
expect_error "a JSON line without text" "bad.jsonl:2: the object has no \"text\" field" \
  "$BIN" quantize "$DEFAULT" "$TMP/e0" --format nvfp4-experts --calibrate "$TMP/bad.jsonl" -q

# A quantized input is refused before the calibration runs, not after.
expect_error "a quantized input" "is already quantized" \
  "$BIN" quantize "$TMP/w4a16" "$TMP/e7" --format nvfp4-experts --calibrate-ids "$TMP/samples.txt"
if ! grep -q "calibrate: " "$TMP/err"; then ok "a quantized input: refused before any calibration"
else bad "a quantized input: the calibration ran first: $(cat "$TMP/err")"; fi

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
