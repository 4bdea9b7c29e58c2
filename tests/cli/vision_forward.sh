#!/usr/bin/env bash
# `dgemma forward --inputs vision_X.safetensors` runs the vision tower on a
# golden V case (docs/model.md §7) and `dgemma compare --rows N` matches every
# vision.* tensor on the case's N real patches; compare fails on another
# image's outputs and without --rows (the reference's padding rows).
set -euo pipefail
bin=$1
src=$2
data=$src/tests/data/golden_v
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }

real_patches() { grep -o '"n_real_patches": [0-9]*' "$data/cases/$1.json" | grep -o '[0-9]*$'; }

for name in vision_png_up vision_jpeg_exif vision_wide; do
  "$bin" forward -m "$data" --inputs "$data/cases/$name.safetensors" --out "$tmp/$name.safetensors" 2>/dev/null
  n=$(real_patches "$name")
  # The vision bound: 5e-4 + 1e-4·|ref|.
  "$bin" compare "$data/cases/$name.safetensors" "$tmp/$name.safetensors" --rows "$n" --atol 5e-4 --rtol 1e-4 \
    >"$tmp/report"
  for t in vision.patch_embeddings vision.layer_out.0 vision.layer_out.1 vision.pooled vision.pooled_mask \
    vision.standardized vision.soft_tokens; do
    grep -q "^$t " "$tmp/report" || { cat "$tmp/report"; echo "FAIL: $t not compared"; exit 1; }
  done
  ok "$name ($n real patches)"
done

# `forward --image FILE`: the processor's stages exactly, then the tower's
# taps within the vision bound, from the picture file itself.
for pair in png_up:png_up.png jpeg_exif:jpeg_exif.jpg wide:wide.jpg; do
  name=${pair%%:*} file=${pair#*:}
  "$bin" forward -m "$data" --image "$data/images/$file" --out "$tmp/image_$name.safetensors" 2>"$tmp/err" ||
    { cat "$tmp/err"; echo "FAIL: forward --image $file"; exit 1; }
  "$bin" compare "$data/cases/preprocess_$name.safetensors" "$tmp/image_$name.safetensors" --atol 0 --rtol 0 \
    >"$tmp/report" || { cat "$tmp/report"; echo "FAIL: preprocess_$name differs"; exit 1; }
  for t in image.decoded image.resized num_soft_tokens; do
    grep -q "^$t " "$tmp/report" || { cat "$tmp/report"; echo "FAIL: $t not compared"; exit 1; }
  done
  n=$(real_patches "vision_$name")
  "$bin" compare "$data/cases/vision_$name.safetensors" "$tmp/image_$name.safetensors" --rows "$n" --atol 5e-4 \
    --rtol 1e-4 >"$tmp/report" || { cat "$tmp/report"; echo "FAIL: vision_$name from the file differs"; exit 1; }
  grep -q "^vision.soft_tokens " "$tmp/report" || { cat "$tmp/report"; echo "FAIL: soft tokens not compared"; exit 1; }
  ok "forward --image $file: processor exact, tower within the bound"
done
printf 'GIF89a\x01\x00\x01\x00' >"$tmp/x.gif"
if "$bin" forward -m "$data" --image "$tmp/x.gif" --out "$tmp/x.safetensors" 2>"$tmp/err"; then
  echo "FAIL: a GIF was accepted"; exit 1
fi
grep -q "x.gif" "$tmp/err" && grep -qi "gif" "$tmp/err" || { cat "$tmp/err"; exit 1; }
ok "forward --image refuses a GIF naming the file: $(head -1 "$tmp/err")"

# Another image's tower outputs do not match.
if "$bin" compare "$data/cases/vision_wide.safetensors" "$tmp/vision_png_up.safetensors" --rows 567 \
    --atol 5e-4 --rtol 1e-4 >/dev/null; then
  echo "FAIL: compare accepted another image's outputs"; exit 1
fi
ok "another image's outputs are rejected"

# The padding rows are zero here and the reference's own values there.
if "$bin" compare "$data/cases/vision_wide.safetensors" "$tmp/vision_wide.safetensors" --atol 5e-4 --rtol 1e-4 \
    >/dev/null; then
  echo "FAIL: padding rows compared equal"; exit 1
fi
ok "without --rows the padding rows differ"

# A model without a tower refuses the case, naming why.
mkdir "$tmp/text_only"
python3 - "$src/tests/data/golden_a/config.json" "$tmp/text_only/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c.pop("vision_config")
json.dump(c, open(sys.argv[2], "w"))
PY
if "$bin" forward -m "$src/tests/data/golden_a" --config "$tmp/text_only/config.json" \
    --inputs "$data/cases/vision_wide.safetensors" --out "$tmp/x.safetensors" 2>"$tmp/err"; then
  echo "FAIL: a model without a tower ran a vision case"; exit 1
fi
grep -q "no vision_config" "$tmp/err" || { cat "$tmp/err"; exit 1; }
ok "no tower: $(head -1 "$tmp/err")"
echo "$passed passed, 0 failed"
