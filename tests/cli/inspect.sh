#!/usr/bin/env bash
# `dgemma inspect` on the bundled tiny checkpoint and on a sparse fake of the
# real 26B-A4B layout: counts, JSON fields, clear errors, and peak RSS under
# 200 MB for the full-size tensor list (the weights are never read).
set -euo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }

out=$("$bin" inspect "$src/tests/data/golden_a")
# The text model (381.256 K) and its one-layer vision tower (1544), which is loaded, not skipped.
grep -q "total *382.800 K" <<<"$out" || { echo "$out"; exit 1; }
grep -q "vision *1 layers, hidden 8" <<<"$out"
grep -q "skipped *0 unused tensors" <<<"$out"
ok "tiny checkpoint table"

json=$("$bin" inspect "$src/tests/data/golden_a" --json --context 100)
for key in parameters_total parameters_by_component bytes_by_dtype tie_groups skipped_tensors kv_cache_bytes; do
  grep -q "\"$key\"" <<<"$json" || { echo "missing $key"; exit 1; }
done
grep -q '"parameters_total": 382800' <<<"$json"
ok "tiny checkpoint json"

"$bin" fixture sparse "$src/tests/data/configs/diffusiongemma-26b-a4b.config.json" "$tmp/dg26b" 2>/dev/null
used_kb=$(du -sk "$tmp/dg26b" | cut -f1)
[ "$used_kb" -lt 10240 ] || { echo "sparse fixture uses $used_kb KB on disk"; exit 1; }
ok "sparse fixture takes no disk ($used_kb KB for ~50 GB of tensors)"

/usr/bin/time -f "%M" -o "$tmp/rss" "$bin" inspect "$tmp/dg26b" --json >"$tmp/big.json"
rss_kb=$(tail -1 "$tmp/rss")
total=$(grep -o '"parameters_total": [0-9]*' "$tmp/big.json" | grep -o '[0-9]*$')
vision=$(grep -o '"vision_[a-z]*": [0-9]*' "$tmp/big.json" | head -2 | awk '{s += $2} END {print s}')
# The text model: 25.2 B parameters +-0.5 % (docs/model.md §1.1); the tower 572,794,416 (§7.1).
[ "$vision" -eq 572794416 ] || { echo "vision parameters $vision"; exit 1; }
text=$((total - vision))
[ "$text" -gt 25074000000 ] && [ "$text" -lt 25326000000 ] || { echo "text parameters $text"; exit 1; }
[ "$rss_kb" -lt 204800 ] || { echo "peak RSS $rss_kb KB"; exit 1; }
ok "full-size fake: $total parameters, peak RSS $rss_kb KB"

if "$bin" inspect "$tmp/nonexistent" 2>"$tmp/err"; then exit 1; fi
grep -q "nonexistent" "$tmp/err"
ok "missing folder is an error naming it"

mkdir "$tmp/bad" && cp "$src/tests/data/golden_a/config.json" "$tmp/bad/"
head -c 1000 "$src/tests/data/golden_a/model.safetensors" >"$tmp/bad/model.safetensors"
if "$bin" inspect "$tmp/bad" 2>"$tmp/err"; then exit 1; fi
grep -q "model.safetensors" "$tmp/err" || { cat "$tmp/err"; exit 1; }
ok "truncated file is an error naming it: $(head -1 "$tmp/err")"

if "$bin" inspect --bogus 2>"$tmp/err"; then exit 1; fi
grep -q "unknown option '--bogus'" "$tmp/err"
ok "unknown option"
echo "$passed passed, 0 failed"
