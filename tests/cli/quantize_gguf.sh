#!/usr/bin/env bash
# `dgemma quantize IN OUT.gguf` end to end on the golden tiny checkpoint (with
# a small tokenizer.json and chat template beside it): the file is a GGUF v3
# with the 44 published keys and their value types, one tensor per stored
# weight under its GGUF name (no output.weight), the file type's tensor types
# and 32-aligned packed offsets, all read here by a parser of this script's
# own; bad requests are clear errors (exit 2).
#
# usage: quantize_gguf.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
GOLDEN="$SRC/tests/data/golden_a"

IN="$TMP/in"
mkdir -p "$IN"
cp "$GOLDEN/config.json" "$GOLDEN/model.safetensors" "$IN/"
python3 - "$IN" <<'PY'
import json, sys
d = sys.argv[1]
vocab = json.load(open(d + "/config.json"))["text_config"]["vocab_size"]
special = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
pieces = special + ["<0x%02X>" % i for i in range(256)]
pieces += ["p%d" % i for i in range(vocab - len(pieces))]
tok = {"added_tokens": [{"id": i, "content": s, "special": s != "<mask>"} for i, s in enumerate(special)],
       "model": {"type": "BPE", "vocab": {p: i for i, p in enumerate(pieces)}, "merges": [["p", "1"], "p1 2"],
                 "unk_token": "<unk>"}}
json.dump(tok, open(d + "/tokenizer.json", "w"))
json.dump({"chat_template": "{{ bos_token }}"}, open(d + "/tokenizer_config.json", "w"))
PY

# A GGUF reader of this script's own: prints one JSON line with the header,
# the keys' value types and the tensors (name, ne, type, offset).
cat >"$TMP/read_gguf.py" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
pos = 0
def take(fmt):
    global pos
    v = struct.unpack_from("<" + fmt, b, pos); pos += struct.calcsize("<" + fmt); return v[0]
def string():
    global pos
    n = take("Q"); s = b[pos:pos + n].decode(); pos += n; return s
SIZES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
def value(t):
    if t == 8: return string()
    if t == 9:
        et = take("I"); n = take("Q"); return {"elem": et, "values": [value(et) for _ in range(n)]}
    return take(SIZES[t])
assert b[:4] == b"GGUF"; pos = 4
version = take("I"); nt = take("Q"); nk = take("Q")
keys = {}
for _ in range(nk):
    k = string(); t = take("I"); keys[k] = {"type": t, "value": value(t)}
tensors = []
for _ in range(nt):
    name = string(); nd = take("I"); ne = [take("q") for _ in range(nd)]; ty = take("I"); off = take("Q")
    tensors.append({"name": name, "ne": ne, "type": ty, "offset": off})
data = (pos + 31) // 32 * 32
print(json.dumps({"version": version, "keys": keys, "tensors": tensors, "data": data, "size": len(b)}))
PY

# The layout checks of one exported file (its JSON from read_gguf.py, its file type).
cat >"$TMP/check.py" <<'PY'
import json, sys
g = json.load(open(sys.argv[1])); ftype = int(sys.argv[2])
k = g["keys"]; A = "diffusion-gemma."
U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9
want = {"general.architecture": STR, "general.file_type": U32, "general.quantization_version": U32,
        A + "block_count": U32, A + "embedding_length": U32, A + "attention.head_count_kv": ARR,
        A + "attention.sliding_window_pattern": ARR, A + "rope.freq_base": F32, A + "final_logit_softcapping": F32,
        A + "attention.causal": BOOL, "diffusion.canvas_length": U32, "tokenizer.ggml.tokens": ARR,
        "tokenizer.ggml.mask_token_id": U32, "tokenizer.chat_template": STR}
errors = [key for key, t in want.items() if k.get(key, {}).get("type") != t]
if len(k) != 44: errors.append("%d keys" % len(k))
if k[A + "attention.head_count_kv"]["value"]["elem"] != I32: errors.append("head_count_kv not i32")
if k[A + "attention.sliding_window_pattern"]["value"]["elem"] != BOOL: errors.append("pattern not bool")
if k["general.file_type"]["value"] != ftype: errors.append("file_type")
if k["tokenizer.ggml.mask_token_id"]["value"] != 4: errors.append("mask id")
t = {x["name"]: x for x in g["tensors"]}
if g["version"] != 3: errors.append("version")
if "output.weight" in t or "token_embd.weight" not in t: errors.append("tied embedding")
if "rope_freqs.weight" not in t: errors.append("rope_freqs")
# Types: rows of 64 fit no K-quant, so Q4_K_M's embedding is Q8_0 (8) and its
# other matrices fall back to Q5_0 (6), Q8_0 or, for the Q5_K that 8 experts
# give attn_output, Q5_1 (7); the router and every 1-D tensor F32 (0).
for n, x in t.items():
    dims = len([d for d in x["ne"] if d != 1]) or 1
    if dims == 1 or n.endswith("ffn_gate_inp.weight"):
        if x["type"] != 0: errors.append(n + " not F32")
    elif ftype == 7 and x["type"] != 8: errors.append(n + " not Q8_0")
    elif ftype == 15 and x["type"] not in (6, 7, 8): errors.append(n + " type %d" % x["type"])
if t["token_embd.weight"]["type"] != 8: errors.append("token_embd")
if ftype == 15 and t["blk.0.attn_output.weight"]["type"] != 7: errors.append("attn_output")
# Offsets: packed in file order, each tensor padded to 32, inside the file.
BLOCK = {0: (1, 4), 6: (32, 22), 7: (32, 24), 8: (32, 34)}
at = 0
for x in g["tensors"]:
    if x["offset"] != at: errors.append(x["name"] + " offset"); break
    be, bb = BLOCK[x["type"]]; n = 1
    for d in x["ne"]: n *= d
    at += (n // be * bb + 31) // 32 * 32
if g["data"] + at > g["size"]: errors.append("data past the end")
print(errors or "ok"); sys.exit(1 if errors else 0)
PY

for fmt in q4_k_m:15 q8_0:7; do
  name=${fmt%%:*}
  ftype=${fmt##*:}
  out="$TMP/$name.gguf"
  if "$BIN" quantize "$IN" "$out" --format "$name" >"$TMP/q.out" 2>"$TMP/q.err" &&
      grep -q "relative RMS error" "$TMP/q.err"; then
    ok "$name: written ($(tail -1 "$TMP/q.err"))"
  else
    bad "$name: export failed: $(cat "$TMP/q.err")"
    continue
  fi
  python3 "$TMP/read_gguf.py" "$out" >"$TMP/$name.json"
  if python3 "$TMP/check.py" "$TMP/$name.json" "$ftype" >"$TMP/check.out" 2>&1
  then
    ok "$name: 44 keys with the published value types, $(python3 -c "import json; print(len(json.load(open('$TMP/$name.json'))['tensors']))") tensors, file type $ftype's types, packed offsets"
  else
    bad "$name: layout: $(tail -3 "$TMP/check.out")"
  fi
done

# A GGUF written here has no vision tower: golden A's 16 tower tensors are
# dropped, and one line says so.
"$BIN" quantize "$IN" "$TMP/vision.gguf" --format q8_0 >/dev/null 2>"$TMP/qv.err"
if grep -q "^quantize: vision tower: 16 tensors (.*) dropped: a GGUF written here has no vision tower" "$TMP/qv.err"; then
  ok "quantize .gguf: the vision tower dropped, and said so"
else
  bad "quantize .gguf vision tower: $(cat "$TMP/qv.err")"
fi
expect_error "unknown file type" "a .gguf output takes" "$BIN" quantize "$IN" "$TMP/x.gguf" --format q4_k
expect_error "folder options on a .gguf" "do not apply to a .gguf output" \
  "$BIN" quantize "$IN" "$TMP/x.gguf" --format q8_0 --quantize-router
expect_error "existing OUT.gguf" "already exists" "$BIN" quantize "$IN" "$TMP/q8_0.gguf" --format q8_0
rm "$IN/tokenizer.json"
expect_error "no tokenizer.json" "no tokenizer.json" "$BIN" quantize "$IN" "$TMP/y.gguf" --format q8_0
finish
