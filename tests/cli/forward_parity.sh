#!/usr/bin/env bash
# `dgemma forward` + `dgemma compare` reproduce every golden A forward case
# (encoder, first decoder pass, self-conditioned decoder pass; short and long
# prompts), and compare fails when the outputs do not match.
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for size in short long; do
  for dec in first selfcond; do
    "$bin" forward -m "$data" --inputs "$data/cases/encoder_$size.safetensors" \
      --inputs "$data/cases/decoder_${dec}_$size.safetensors" --out "$tmp/out.safetensors" 2>/dev/null
    # Cache and early tensors 1e-4, logits and final hidden states 1e-3 (golden README).
    "$bin" compare "$data/cases/encoder_$size.safetensors" "$tmp/out.safetensors" --atol 1e-3 >/dev/null
    "$bin" compare "$data/cases/decoder_${dec}_$size.safetensors" "$tmp/out.safetensors" --atol 1e-3 >/dev/null
    echo "ok: $size/$dec"
  done
done

# The flat (published-checkpoint) config spelling gives the same results.
"$bin" forward -m "$data" --config "$data/config_flat_global_keys.json" \
  --inputs "$data/cases/encoder_long.safetensors" --inputs "$data/cases/decoder_selfcond_long.safetensors" \
  --out "$tmp/flat.safetensors" 2>/dev/null
"$bin" compare "$data/cases/decoder_selfcond_long.safetensors" "$tmp/flat.safetensors" --atol 1e-3 >/dev/null
echo "ok: flat config"

# A decoder pass on another cache (short prompt) must not match the long case.
"$bin" forward -m "$data" --inputs "$data/cases/encoder_short.safetensors" \
  --out "$tmp/short.safetensors" 2>/dev/null
if "$bin" compare "$data/cases/encoder_long.safetensors" "$tmp/short.safetensors" --atol 1e-3 >/dev/null; then
  echo "FAIL: compare accepted mismatching tensors"; exit 1
fi
echo "ok: compare rejects a mismatch"

# Bad input: a position that does not continue the cache.
if "$bin" forward -m "$data" --inputs "$data/cases/decoder_first_short.safetensors" --out "$tmp/x.safetensors" \
    2>"$tmp/err"; then
  echo "FAIL: decoder positions without a cache were accepted"; exit 1
fi
grep -q 'positions must continue the cache' "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "ok: bad positions rejected"
echo "7 passed, 0 failed"
