#!/usr/bin/env bash
# `dgemma doctor` from the command line: the op list, a clean run, and
# injected faults named in the JSON report.
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_a
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }

ops=$("$bin" doctor --list-ops)
[ "$(wc -l <<<"$ops")" -eq 17 ] || { echo "$ops"; exit 1; }
grep -qx "moe_experts layer" <<<"$ops" && grep -qx "embedding model" <<<"$ops" && grep -qx "sample model" <<<"$ops"
ok "--list-ops"

"$bin" doctor -m "$data" --backend cpu --json | grep -q '"first_failure": null'
ok "cpu vs cpu: no failure"

check() {  # spec, then expected "op layer pass step kind"
  local out
  if out=$("$bin" doctor -m "$data" --backend "$1" --json); then echo "doctor exited 0 for $1"; exit 1; fi
  for field in "\"op\": \"$2\"" "\"layer\": $3" "\"pass\": \"$4\"" "\"step\": $5" "\"kind\": \"$6\""; do
    grep -q "$field" <<<"$out" || { echo "$1: missing $field in"; echo "$out"; exit 1; }
  done
  ok "$1"
}
check inject:rope:1:decoder:1:nan rope 1 decoder 1 nan
check inject:attention:3:encoder:0:crash attention 3 encoder 0 crash
check inject:softcap:model:decoder:0:value softcap -1 decoder 0 value
check inject:gelu_glu:0:decoder:1:oob gelu_glu 0 decoder 1 oob
# Golden A's vision tower runs a synthetic image in the prefill: a fault in
# one of its ops is named with the vision pass.
check inject:pool_cells:model:vision:0:value pool_cells -1 vision 0 value
check inject:rope:0:vision:0:nan rope 0 vision 0 nan
check inject:sample:model:decoder:1:value sample -1 decoder 1 value

# An injected NaN: the comparison fails and every measure of it reads nan
# (text) or null (JSON), never the cosine 1 of the elements that remain.
if text=$("$bin" doctor -m "$data" --backend inject:rope:1:decoder:1:nan); then echo "doctor exited 0 on a NaN"; exit 1; fi
grep -q "cosine nan" <<<"$text" || { echo "$text"; exit 1; }
grep -qE "^rope +[0-9]+ +nan +nan +nan$" <<<"$text" || { echo "$text"; exit 1; }
grep -q "NaN in the target's output" <<<"$text" || { echo "$text"; exit 1; }
out=$("$bin" doctor -m "$data" --backend inject:rope:1:decoder:1:nan --json) && exit 1
python3 -c 'import json,sys; f=json.loads(sys.argv[1])["first_failure"]; sys.exit(0 if f["kind"] == "nan" and f["cosine"] is None else 1)' "$out" ||
  { echo "$out"; exit 1; }
ok "injected NaN: cosine nan in the text, null in the JSON"

if "$bin" doctor -m "$data" --backend inject:nope:0:encoder:0:value 2>/tmp/doctor_err_$$; then exit 1; fi
grep -q "unknown op 'nope'" /tmp/doctor_err_$$ && rm -f /tmp/doctor_err_$$
ok "bad injection spec"
# The CUDA backend, op by op against the CPU in its debug mode (canaries, NaN
# fill, launch log): on a GPU or on the emulated device of a
# DGEMMA_CUDA=EMULATE build (the sanitizer build of scripts/build.sh) every op
# must agree; a build without CUDA, or a machine without a device, must say so.
err=/tmp/doctor_cuda_err_$$
if out=$("$bin" doctor -m "$data" --backend cuda:debug --steps 2 --json 2>"$err"); then
  grep -q '"first_failure": null' <<<"$out" || { echo "$out"; exit 1; }
  compared=$(grep -o '"ops_compared": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  [ "$compared" -gt 100 ] || { echo "only $compared ops compared"; exit 1; }
  where=$(grep -q "emulated device" "$err" && echo "emulated device" || echo "GPU")
  ok "cuda:debug vs cpu on the $where: $compared ops agree"
  # Quantized checkpoints: the weights stay packed on the device.
  qdir=/tmp/doctor_quant_$$
  for format in nf4 nvfp4-experts mlx4; do
    rm -rf "$qdir"
    "$bin" quantize "$data" "$qdir" --format $format >/dev/null 2>&1 || { echo "quantize --format $format failed"; exit 1; }
    out=$("$bin" doctor -m "$qdir" --backend cuda --steps 2 --json 2>"$err") || { cat "$err"; exit 1; }
    grep -q '"first_failure": null' <<<"$out" || { echo "$out"; exit 1; }
    ok "cuda vs cpu on a $format checkpoint: all ops agree"
  done
  rm -rf "$qdir"
  # FP8 E4M3 quantized at load in both runs, in the dot mode: a scale per
  # channel, so the tensor cores on the device and bf16 activations on both
  # sides (the exact FP8 path is in the op tests).
  out=$("$bin" doctor -m "$data" --backend cuda --quantize fp8 --precision bf16-dot --steps 2 --json 2>"$err") ||
    { cat "$err"; echo "$out"; exit 1; }
  grep -q '"first_failure": null' <<<"$out" || { echo "$out"; exit 1; }
  ok "cuda vs cpu, --quantize fp8 --precision bf16-dot: all ops agree"
  # The integer mode: GEMMs over quantized weights on int8 activation blocks
  # (the integer tensor cores) against the CPU's int8-dot, op by op; golden A's
  # shapes tile into 32-column blocks, so the integer kernels run.
  for format in q8 nf4; do
    out=$("$bin" doctor -m "$data" --backend cuda --quantize $format --precision int8-dot --steps 2 --json \
      2>"$err") || { cat "$err"; echo "$out"; exit 1; }
    grep -q '"first_failure": null' <<<"$out" || { echo "$out"; exit 1; }
    ok "cuda vs cpu in int8-dot, --quantize $format: all ops agree"
  done
  # GGUF files of golden A with ggml blocks (docs/cuda.md §3.9), written by `dgemma quantize` from a copy with
  # a small tokenizer.json: the blocks stay packed on the device and decode exactly; in int8-dot they run on
  # the integer tensor cores against the CPU's int8-dot. Golden A's rows are under 256 columns, so q4_k_m
  # falls back to q5_0, q5_1 and q8_0 blocks.
  gdir=/tmp/doctor_gguf_$$
  mkdir -p "$gdir"
  cp "$data/config.json" "$data/model.safetensors" "$gdir/"
  python3 - "$gdir" <<'PY'
import json, sys
d = sys.argv[1]
vocab = json.load(open(d + "/config.json"))["text_config"]["vocab_size"]
special = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
pieces = special + ["<0x%02X>" % i for i in range(256)]
pieces += ["p%d" % i for i in range(vocab - len(pieces))]
json.dump({"added_tokens": [{"id": i, "content": s, "special": s != "<mask>"} for i, s in enumerate(special)],
           "model": {"type": "BPE", "vocab": {p: i for i, p in enumerate(pieces)}, "merges": [], "unk_token": "<unk>"}},
          open(d + "/tokenizer.json", "w"))
PY
  for format in q8_0 q4_k_m q4_1 iq4_nl; do
    "$bin" quantize "$gdir" "$gdir/m.gguf" --format $format --force >/dev/null 2>"$err" || { cat "$err"; exit 1; }
    for precision in fp32 int8-dot; do
      out=$("$bin" doctor -m "$gdir/m.gguf" --backend cuda --precision $precision --steps 2 --json 2>"$err") ||
        { cat "$err"; echo "$out"; exit 1; }
      grep -q '"first_failure": null' <<<"$out" || { echo "$out"; exit 1; }
      ok "cuda vs cpu on a $format GGUF, --precision $precision: all ops agree"
    done
  done
  rm -rf "$gdir"
else
  grep -qE "no CUDA device found|has no CUDA backend" "$err" || { cat "$err"; exit 1; }
  ok "cuda without a device: $(head -c 120 "$err")"
fi
rm -f "$err"

# The OpenCL backend on PoCL (docs/opencl.md §4), when the build has it and
# PoCL is installed: every op of golden A runs there and must agree, in the
# plain and the debug mode, on quantized checkpoints (the bitsandbytes NF4
# layout of the field report among them: the weights stay packed on the
# device) and with weights quantized at load, and faults injected into its
# ops are named. (A refused op is reported as unsupported: tested in
# tests/backend/differential_unsupported_test.cc.)
pocl=$("$bin" devices --json | python3 -c '
import json, sys
o = json.load(sys.stdin)["opencl"]
print(next((d["backend"] for d in o.get("devices", []) if "Portable Computing Language" in d["platform_name"]), ""))')
if [ -z "$pocl" ]; then
  echo "skip: OpenCL doctor (this build has no OpenCL backend, or PoCL is not installed: dgemma devices lists no PoCL device)"
else
  # opencl_doctor SPEC MODEL [FLAGS...]: doctor --backend SPEC must find no divergence, every op kind compared.
  opencl_doctor() {
    local spec=$1 model=$2 rc=0 out
    shift 2
    out=$("$bin" doctor -m "$model" --backend "$spec" --steps 2 --json "$@" 2>"$err") || rc=$?
    python3 -c '
import json, sys
r = json.loads(sys.argv[1]); rc = int(sys.argv[2])
assert r["child_status"] == "exited 0", r["child_status"]
assert r["first_failure"] is None and rc == 0, (rc, r["first_failure"])
assert r["ops_unsupported"] == 0 and r["ops_compared"] > 100, r
assert len(r["ops"]) == 17, sorted(r["ops"])  # golden A has a vision tower: its ops run too
assert r["vision_ops_compared"] > 0, r["vision_ops_compared"]
print("no divergence: %d ops agree" % r["ops_compared"])
' "$out" "$rc" || { cat "$err"; echo "$out"; exit 1; }
  }
  for spec in "$pocl" "$pocl,debug"; do
    verdict=$(opencl_doctor "$spec" "$data") || exit 1
    ok "doctor --backend $spec: $verdict"
  done
  qdir=/tmp/doctor_opencl_quant_$$
  for format in nf4 nvfp4-experts mlx4; do
    rm -rf "$qdir"
    "$bin" quantize "$data" "$qdir" --format $format >/dev/null 2>&1 || { echo "quantize --format $format failed"; exit 1; }
    verdict=$(opencl_doctor "$pocl" "$qdir") || exit 1
    ok "doctor --backend $pocl on a $format checkpoint: $verdict"
  done
  rm -rf "$qdir"
  for q in q8 fp8-block; do
    verdict=$(opencl_doctor "$pocl" "$data" --quantize $q) || exit 1
    ok "doctor --backend $pocl --quantize $q: $verdict"
  done
  # Faults placed in OpenCL ops are named.
  check "inject:linear:0:encoder:0:value:self_attn.k_proj@$pocl" linear 0 encoder 0 value
  check "inject:rms_norm:0:encoder:0:nan@$pocl" rms_norm 0 encoder 0 nan
  check "inject:rope:0:encoder:0:oob@$pocl" rope 0 encoder 0 oob
  check "inject:embedding:model:encoder:0:crash@$pocl" embedding -1 encoder 0 crash
  check "inject:attention:1:decoder:1:value@$pocl" attention 1 decoder 1 value
  check "inject:moe_experts:2:encoder:0:nan@$pocl" moe_experts 2 encoder 0 nan
  check "inject:sample:model:decoder:1:value@$pocl" sample -1 decoder 1 value
fi
rm -f "$err"
echo "$passed passed, 0 failed"
