#!/usr/bin/env bash
# `dgemma forward` + `dgemma compare` reproduce every golden V encoder case
# with images (the vision tower on the case's pixels, the soft tokens merged,
# the case's mask rule from its JSON; docs/model.md §7.6, §7.7) and every
# decoder pass over such a cache; the masks compare exactly. --image-mask
# overrides the case's rule (and then the case no longer matches).
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_v
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0

for c in one two one_jaxmask two_jaxmask one_forwardmask; do
  "$bin" forward -m "$data" --inputs "$data/cases/encoder_image_$c.safetensors" --out "$tmp/out.safetensors" 2>/dev/null
  # Cache and early tensors 1e-4, final hidden states 1e-3 (golden README); masks and routers exact.
  "$bin" compare "$data/cases/encoder_image_$c.safetensors" "$tmp/out.safetensors" --atol 1e-3 >/dev/null
  "$bin" compare "$data/cases/encoder_image_$c.safetensors" "$tmp/out.safetensors" --atol 0 >"$tmp/exact" || true
  for t in encoder.mask.full_attention encoder.mask.sliding_attention; do
    grep -E "^$t .* ok$" "$tmp/exact" >/dev/null || { echo "FAIL: $c: $t not exact"; cat "$tmp/exact"; exit 1; }
  done
  echo "ok: encoder_image_$c"
  passed=$((passed + 1))
done

for c in one one_jaxmask two; do
  enc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uses_cache_from"])' \
    "$data/cases/decoder_after_image_$c.json")
  "$bin" forward -m "$data" --inputs "$data/cases/$enc.safetensors" \
    --inputs "$data/cases/decoder_after_image_$c.safetensors" --out "$tmp/out.safetensors" 2>/dev/null
  "$bin" compare "$data/cases/decoder_after_image_$c.safetensors" "$tmp/out.safetensors" --atol 1e-3 >/dev/null
  echo "ok: decoder_after_image_$c (cache of $enc)"
  passed=$((passed + 1))
done

# Another rule than the case's: the masks and the states differ.
"$bin" forward -m "$data" --image-mask hf --inputs "$data/cases/encoder_image_one_jaxmask.safetensors" \
  --out "$tmp/hf.safetensors" 2>/dev/null
if "$bin" compare "$data/cases/encoder_image_one_jaxmask.safetensors" "$tmp/hf.safetensors" --atol 1e-3 >/dev/null; then
  echo "FAIL: the hf rule reproduced the jax case"; exit 1
fi
echo "ok: --image-mask hf does not reproduce the jax case"
passed=$((passed + 1))

# An unknown rule is refused by name.
if "$bin" forward -m "$data" --image-mask google --inputs "$data/cases/encoder_image_one.safetensors" \
    --out "$tmp/x.safetensors" 2>"$tmp/err"; then
  echo "FAIL: --image-mask google was accepted"; exit 1
fi
grep -q "unknown image mask 'google'" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "ok: unknown --image-mask rejected"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
