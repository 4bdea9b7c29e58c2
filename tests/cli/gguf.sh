#!/usr/bin/env bash
# GGUF checkpoints on the command line (docs/formats.md §5.3): the golden A
# checkpoint written as an F32 GGUF forwards and generates exactly as the
# safetensors folder does; the sparse fake of the published Q4_K_M file is
# inspected (692 tensors, bytes per type) and planned on 24 GiB; a bad file
# gives one clear error.
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }

"$bin" fixture gguf "$data" "$tmp/a.gguf" 2>/dev/null
for size in short long; do
  for dec in first selfcond; do
    args=(--inputs "$data/cases/encoder_$size.safetensors" --inputs "$data/cases/decoder_${dec}_$size.safetensors")
    "$bin" forward -m "$data" "${args[@]}" --out "$tmp/st.safetensors" 2>/dev/null
    "$bin" forward -m "$tmp/a.gguf" "${args[@]}" --out "$tmp/gguf.safetensors" 2>/dev/null
    cmp "$tmp/st.safetensors" "$tmp/gguf.safetensors" || { echo "forward $size/$dec differs"; exit 1; }
  done
done
ok "F32 GGUF forward: every golden case bit-identical to the safetensors folder"

gen() { "$bin" generate -m "$1" --prompt-ids 2,17,301,44,9 --seed 5 -n 32 \
          --generation-config "$data/generation_config.json" 2>/dev/null; }
[ "$(gen "$data")" = "$(gen "$tmp/a.gguf")" ] || { echo "generate differs"; exit 1; }
ok "F32 GGUF generate: the same ids as the safetensors folder"

out=$("$bin" inspect "$tmp/a.gguf")
grep -q "(1 GGUF file, " <<<"$out" || { echo "$out"; exit 1; }
ok "inspect names the GGUF file"

"$bin" fixture sparse-gguf "$src/tests/data/configs/diffusiongemma-26b-a4b.config.json" "$tmp/q4km.gguf" 2>/dev/null
"$bin" inspect "$tmp/q4km.gguf" --json >"$tmp/inspect.json"
# Expected from the published types (docs/formats.md §5.3), rows x blocks x block bytes:
# q6_K: token_embd (262144 rows of 2816) + 13 sliding attn_v (2048 rows); q8_0:
# 14 layers of ffn_down (2816 rows of 2112) and ffn_down_exps (128 x 2816 rows of 704).
python3 - "$tmp/inspect.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["stored_tensors"] == 692, r["stored_tensors"]
assert r["file_format"] == "GGUF", r["file_format"]
by = r["bytes_by_dtype"]
q6k = 262144 * 11 * 210 + 13 * 2048 * 11 * 210
q80 = 14 * (2816 * 66 * 34 + 128 * 2816 * 22 * 34)
assert by["q6_K"] == q6k, (by["q6_K"], q6k)
assert by["q8_0"] == q80, (by["q8_0"], q80)
assert set(by) == {"F32", "q4_K", "q5_0", "q6_K", "q8_0"}, by
PY
ok "sparse published Q4_K_M: 692 tensors, q6_K and q8_0 bytes as the published types give"

"$bin" plan -m "$tmp/q4km.gguf" --devices cuda:0=24GiB --strategy single --json >"$tmp/plan.json"
python3 - "$tmp/plan.json" "$tmp/inspect.json" <<'PY'
import json, sys
plan, insp = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
weights = sum(d["weights_bytes"] for d in plan["devices"])
dense_embedding = 262144 * 2816 * 2  # the bf16 soft-embedding copy of the quantized table
assert weights == insp["weight_bytes"] + dense_embedding, (weights, insp["weight_bytes"])
PY
ok "plan: the Q4_K_M GGUF fits one 24 GiB device, counting the bf16 soft-embedding copy"

printf 'GGUF\003\000\000\000garbage' >"$tmp/bad.gguf"
if "$bin" inspect "$tmp/bad.gguf" 2>"$tmp/err"; then exit 1; fi
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "bad.gguf" "$tmp/err" || { cat "$tmp/err"; exit 1; }
ok "a truncated GGUF: one error line naming the file"

echo "not a model" >"$tmp/plain.txt"
if "$bin" run -m "$tmp/plain.txt" -p hi 2>"$tmp/err"; then exit 1; fi
grep -q "neither a checkpoint folder nor a GGUF file" "$tmp/err" || { cat "$tmp/err"; exit 1; }
ok "-m on another file: refused by name"

echo "$passed passed, 0 failed"
