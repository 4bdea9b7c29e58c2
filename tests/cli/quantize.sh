#!/usr/bin/env bash
# `dgemma quantize` end to end on the golden tiny checkpoint: each format
# writes a checkpoint that our loader reads back (inspect reports the stored
# scheme and fewer bytes), the parity tool runs on it, progress goes to
# stderr, and bad requests are clear errors. `run --quantize` quantizes the
# default model at load.
#
# usage: quantize.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
GOLDEN="$SRC/tests/data/golden_a"

plain_bytes=$(stat -c %s "$GOLDEN/model.safetensors")
for fmt in nf4:nf4 nvfp4-experts:nvfp4 mlx4:affine4; do
  name=${fmt%%:*}
  scheme=${fmt##*:}
  out="$TMP/$name"
  if "$BIN" quantize "$GOLDEN" "$out" --format "$name" >"$TMP/q.out" 2>"$TMP/q.err" &&
      grep -q "quantize: 100.0%" "$TMP/q.err" && grep -q "tensors quantized" "$TMP/q.err"; then
    ok "$name: export with progress on stderr ($(tail -1 "$TMP/q.err"))"
  else
    bad "$name: export failed: $(cat "$TMP/q.err")"
    continue
  fi
  q_bytes=$(stat -c %s "$out/model.safetensors")
  if [ "$q_bytes" -lt "$plain_bytes" ]; then ok "$name: $q_bytes bytes < $plain_bytes"; else bad "$name: not smaller"; fi
  if "$BIN" inspect "$out" --json >"$TMP/i.json" 2>"$TMP/i.err" &&
      python3 -c "import json,sys; d=json.load(open('$TMP/i.json')); sys.exit(0 if '$scheme' in d['bytes_by_dtype'] else 1)"; then
    ok "$name: inspect reports weights stored as $scheme"
  else
    bad "$name: inspect lacks $scheme: $(cat "$TMP/i.json" "$TMP/i.err" | head -c 600)"
  fi
  # The parity tool runs the quantized model and gives finite, soft-capped
  # logits of the right shape. (How close they are to the plain model is a
  # property of 4-bit weights, not of the code; the gtests compare against
  # the checkpoint's own dequantized copy at 1e-5.)
  "$BIN" forward -m "$out" --inputs "$GOLDEN/cases/encoder_long.safetensors" \
    --inputs "$GOLDEN/cases/decoder_selfcond_long.safetensors" --out "$TMP/$name.st" 2>"$TMP/f.err"
  "$BIN" compare "$GOLDEN/cases/decoder_selfcond_long.safetensors" "$TMP/$name.st" --json >"$TMP/c.json" 2>&1
  if python3 - "$TMP/c.json" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
lg = [r for r in rows if r.get("tensor") == "decoder.logits"]
ok = len(lg) == 1 and lg[0]["numel"] == 16 * 512 and not lg[0]["shape_mismatch"] and \
     math.isfinite(lg[0]["max_abs"]) and lg[0]["max_abs"] <= 60.0  # both sides within the cap of 30
sys.exit(0 if ok else 1)
PY
  then
    ok "$name: forward runs; decoder logits finite and within the soft cap"
  else
    bad "$name: forward/compare: $(cat "$TMP/f.err"; grep decoder.logits "$TMP/c.json")"
  fi
done

# An OUT that already holds files is refused (exit 2, naming it) unless --force; an empty folder is fine.
before=$(md5sum <"$TMP/nf4/model.safetensors")
"$BIN" quantize "$GOLDEN" "$TMP/nf4" --format mlx4 -q >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "$TMP/nf4 already exists" "$TMP/err" && grep -q -- "--force" "$TMP/err" &&
    [ "$(md5sum <"$TMP/nf4/model.safetensors")" = "$before" ]; then
  ok "existing OUT refused, untouched: $(cat "$TMP/err")"
else
  bad "existing OUT: rc $rc $(cat "$TMP/err")"
fi
touch "$TMP/a-file"
"$BIN" quantize "$GOLDEN" "$TMP/a-file" --format nf4 -q >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "$TMP/a-file already exists (as a file)" "$TMP/err"; then ok "OUT that is a file refused"; else bad "OUT file: rc $rc $(cat "$TMP/err")"; fi
mkdir "$TMP/empty-out"
if "$BIN" quantize "$GOLDEN" "$TMP/empty-out" --format nf4 -q 2>"$TMP/err" && [ -f "$TMP/empty-out/model.safetensors" ]; then
  ok "an empty OUT folder is written into"
else
  bad "empty OUT: $(cat "$TMP/err")"
fi
if "$BIN" quantize "$GOLDEN" "$TMP/nf4" --format mlx4 -q --force 2>"$TMP/err" &&
    [ "$(md5sum <"$TMP/nf4/model.safetensors")" != "$before" ] &&
    "$BIN" inspect "$TMP/nf4" --json 2>/dev/null | grep -q affine4; then
  ok "--force overwrites: OUT now holds the mlx4 export"
else
  bad "--force: $(cat "$TMP/err")"
fi
"$BIN" quantize "$GOLDEN" "$TMP/nf4" --format nf4 -q --force 2>/dev/null  # back to nf4 for the checks below
expect_error "unknown format" "q3" "$BIN" quantize "$GOLDEN" "$TMP/x" --format q3
expect_error "missing input" "$TMP/nope" "$BIN" quantize "$TMP/nope" "$TMP/y" --format nf4
expect_error "quantized input" "quantized" "$BIN" quantize "$TMP/nf4" "$TMP/z" --format nf4

if "$BIN" run -p "Hello" -n 8 --seed 2 --quantize q8 >"$TMP/r.out" 2>"$TMP/r.err" && [ -s "$TMP/r.out" ]; then
  ok "run --quantize q8 on the default model"
else
  bad "run --quantize q8: $(cat "$TMP/r.err")"
fi

# FP8 E4M3 at load, per channel and per block: runs, and the plan counts a
# byte per covered weight.
for mode in fp8 fp8-block; do
  if "$BIN" run -p "Hello" -n 4 --seed 2 --quantize $mode >"$TMP/rf.out" 2>"$TMP/rf.err" && [ -s "$TMP/rf.out" ]; then
    ok "run --quantize $mode on the default model"
  else
    bad "run --quantize $mode: $(cat "$TMP/rf.err")"
  fi
done
expect_error "unknown load quantization" "fp8-block" "$BIN" run -p hi -n 2 --quantize fp4

# --precision int8-dot: quantized GEMMs on int8 activations (the CPU backend).
if "$BIN" run -p "Hello" -n 8 --seed 2 --quantize q8 --precision int8-dot >"$TMP/r8.out" 2>"$TMP/r8.err" &&
    [ -s "$TMP/r8.out" ]; then
  ok "run --quantize q8 --precision int8-dot on the default model"
else
  bad "run --precision int8-dot: $(cat "$TMP/r8.err")"
fi
"$BIN" forward -m "$TMP/nf4" --precision int8-dot --inputs "$GOLDEN/cases/encoder_long.safetensors" \
  --inputs "$GOLDEN/cases/decoder_selfcond_long.safetensors" --out "$TMP/nf4_int8.st" 2>"$TMP/f8.err"
"$BIN" compare "$TMP/nf4.st" "$TMP/nf4_int8.st" --json >"$TMP/c8.json" 2>&1
if python3 - "$TMP/c8.json" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
lg = [r for r in rows if r.get("tensor") == "decoder.logits"]
# Same checkpoint, int8 activations: finite, and not bit-identical to the exact path.
sys.exit(0 if len(lg) == 1 and math.isfinite(lg[0]["max_abs"]) and 0 < lg[0]["max_abs"] <= 60.0 else 1)
PY
then
  ok "forward --precision int8-dot on the nf4 export: finite logits that differ from the exact path"
else
  bad "forward --precision int8-dot: $(cat "$TMP/f8.err"; grep decoder.logits "$TMP/c8.json")"
fi
# int8-dot is a mode of the CUDA backend too: with --backend cuda it either runs
# (a GPU or the emulated device) or fails for want of a device, never for the
# precision.
if "$BIN" run -p hi -n 4 --quantize q8 --precision int8-dot --backend cuda >"$TMP/c8.out" 2>"$TMP/c8.err"; then
  [ -s "$TMP/c8.out" ] && ok "run --precision int8-dot --backend cuda on a device" ||
    bad "run --precision int8-dot --backend cuda printed nothing"
elif grep -q "no CUDA device\|no CUDA backend" "$TMP/c8.err" && ! grep -q -- "--precision" "$TMP/c8.err"; then
  ok "run --precision int8-dot --backend cuda without a device: $(head -c 80 "$TMP/c8.err")"
else
  bad "run --precision int8-dot --backend cuda: $(cat "$TMP/c8.err")"
fi
expect_error "int8-dot on another backend" "CPU and CUDA" "$BIN" run -p hi -n 4 --precision int8-dot \
  --backend inject:linear:0:encoder:0:nan
expect_error "unknown precision" "int8-dot" "$BIN" run -p hi -n 4 --precision int4

# The vision tower (golden A's one layer: 16 tensors) is copied through as
# stored, each tensor byte for byte, and one line says so.
"$BIN" quantize "$GOLDEN" "$TMP/nf4_vision" --format nf4 -q >/dev/null 2>"$TMP/qv.err"
if grep -q "^quantize: vision tower: 16 tensors (.*) copied through unquantized, as stored (F32)$" "$TMP/qv.err" &&
    python3 - "$GOLDEN/model.safetensors" "$TMP/nf4_vision/model.safetensors" <<'PY'
import json, struct, sys
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b)[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
src, out = read(sys.argv[1]), read(sys.argv[2])
vision = [k for k in src if "vision_tower" in k or "embed_vision" in k]
assert len(vision) == 16, vision
for k in vision:
    assert out[k] == src[k], k
PY
then
  ok "quantize nf4: the vision tower's 16 tensors copied through byte for byte, and said so"
else
  bad "quantize nf4 vision tower: $(cat "$TMP/qv.err")"
fi

finish
