#!/usr/bin/env bash
# `dgemma bench vision` on the golden V checkpoint (a two-layer vision tower:
# hidden 32, 4 heads of 8, MLP 64, patch 4, pooling 3, 70 soft tokens at
# most): the JSON fields, the FLOP of the linears and the attention against
# the tower's shapes, the estimate and the ratios consistent with the rates,
# the text output, and errors. (Speed figures live in bench/README.md;
# nothing here is timed.)
#
# usage: bench_vision.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
GOLDEN="$SRC/tests/data/golden_v"

if "$BIN" bench vision -m "$GOLDEN" --height 48 --width 72 --repeats 1 -t 1 --json >"$TMP/v.json" 2>"$TMP/err" &&
    python3 - "$TMP/v.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
need = ["tower_s", "tower_flop", "gflops", "peak_gflops", "gemm_gflops", "attention_gflops", "gemm_attention_gflops",
        "canvas_linear_gflops", "gemm_ratio_to_canvas", "gemm_attention_ratio_to_canvas", "layer_s",
        "outside_layers_s", "estimate_s", "by_op", "patches", "soft_tokens"]
assert all(k in d for k in need), [k for k in need if k not in d]
assert d["name"] == "vision" and d["backend"] == "cpu" and d["vision_layers"] == 2 and d["threads"] == 1, d
assert (d["hidden"], d["heads"], d["head_dim"], d["intermediate"]) == (32, 4, 8, 64), d
# A 48 x 72 image (12 x 18 patches) is scaled up by sqrt(630 / 216) within the
# 70-token budget (docs/image.md §5.2): 72 x 120 pixels, 18 x 30 patches, 6 x 10 cells.
n, s = d["patches"], d["soft_tokens"]
assert (n, s) == (540, 60), (n, s)
# FLOP: patch input projection (3*4*4 -> 32), per layer q/k/v/o (32 x 32) and
# gate/up/down (32 x 64), embed_vision's projection (32 -> 64 text hidden);
# attention 4 * n^2 * heads * head_dim per layer (every patch sees every patch).
linear = 2 * n * 48 * 32 + 2 * (4 * 2 * n * 32 * 32 + 3 * 2 * n * 32 * 64) + 2 * s * 32 * 64
attention = 2 * 4 * n * n * 4 * 8
ops = d["by_op"]
assert abs(ops["linear"]["gflop"] * 1e9 - linear) < 1e-6 * linear, (ops["linear"], linear)
assert abs(ops["attention"]["gflop"] * 1e9 - attention) < 1e-6 * attention, (ops["attention"], attention)
for op in ("pool_cells", "affine", "rope", "rms_norm"):
    assert op in ops, (op, ops.keys())
assert d["tower_s"] > 0 and d["gemm_gflops"] > 0 and d["attention_gflops"] > 0 and d["canvas_linear_gflops"] > 0
assert d["canvas_linear_mkn"] == [16, 64, 64], d["canvas_linear_mkn"]
rate = lambda f, t: f / t / 1e9
assert abs(d["gemm_gflops"] - rate(linear, ops["linear"]["seconds"])) < 1e-6 * d["gemm_gflops"]
both = rate(linear + attention, ops["linear"]["seconds"] + ops["attention"]["seconds"])
assert abs(d["gemm_attention_gflops"] - both) < 1e-6 * both
assert abs(d["gemm_ratio_to_canvas"] - d["gemm_gflops"] / d["canvas_linear_gflops"]) < 1e-9 * d["gemm_ratio_to_canvas"]
# per-layer time x 27 + the ops outside layers; the two parts make up the run.
assert d["estimate_layers"] == 27
assert abs(d["estimate_s"] - (27 * d["layer_s"] + d["outside_layers_s"])) < 1e-9 + 1e-9 * d["estimate_s"], d
assert abs(2 * d["layer_s"] + d["outside_layers_s"] - d["tower_s"]) < 1e-9 + 1e-6 * d["tower_s"], d
PY
then
  ok "bench vision --json: FLOP by op match the tower's shapes, rates, ratios and estimate consistent"
else
  bad "bench vision --json: $(cat "$TMP/v.json" "$TMP/err" | head -c 1500)"
fi
if "$BIN" bench vision -m "$GOLDEN" --height 48 --width 72 --repeats 1 --estimate-layers 5 >"$TMP/v.txt" 2>&1 &&
    grep -q "^image 48 x 72: 540 patches, 60 soft tokens$" "$TMP/v.txt" && grep -q "^GEMM rate: " "$TMP/v.txt" &&
    grep -q "^canvas linear M=16 K=64 N=64 (bf16)" "$TMP/v.txt" && grep -q "^  pool_cells " "$TMP/v.txt" &&
    grep -q "estimated 5-layer tower: .* s per 60-token image$" "$TMP/v.txt"; then
  ok "bench vision: $(grep 'estimated' "$TMP/v.txt")"
else
  bad "bench vision text: $(cat "$TMP/v.txt")"
fi
expect_error "bench vision on another backend" "CPU backend" \
  "$BIN" bench vision -m "$GOLDEN" --backend inject:add:-1:decoder:99:value
expect_error "bench vision without a model" "-m" "$BIN" bench vision
expect_error "a typo of vision" "vision" "$BIN" bench visoin
finish
