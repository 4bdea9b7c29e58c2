#!/usr/bin/env bash
# `dgemma bench` as users run it, on the golden tiny checkpoint: the step
# benchmark via `bench -m DIR` and `bench step`, its JSON fields, and errors.
# (Speed figures live in bench/README.md; nothing here is timed.)
#
# usage: bench.sh DGEMMA_BINARY SOURCE_DIR
set -u
BIN=$1
GOLDEN="$2/tests/data/golden_a"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"

if "$BIN" bench -m "$GOLDEN" --steps 1 --context 8 --json >"$TMP/step.json" 2>"$TMP/err" &&
    python3 - "$TMP/step.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
need = ["positions_per_s", "step_sc_s", "step_first_s", "commit_s", "step_sc_flop", "gflops", "peak_gflops",
        "fraction_of_peak", "tokens_per_s_16_steps", "tokens_per_s_48_steps", "step_sc_by_op"]
assert d["name"] == "step" and d["canvas"] == 16 and d["layers"] == 4, d
assert all(k in d for k in need), [k for k in need if k not in d]
assert d["positions_per_s"] > 0 and d["step_sc_s"] > 0 and d["step_sc_flop"] > 0
assert d["tokens_per_s_16_steps"] > d["tokens_per_s_48_steps"] > 0
assert 0 < d["fraction_of_peak"] < 1.5
# 16 positions per step: tokens/s at S steps = 16 / (first + (S-1) sc + commit)
t16 = 16 / (d["step_first_s"] + 15 * d["step_sc_s"] + d["commit_s"])
assert abs(t16 - d["tokens_per_s_16_steps"]) < 1e-6 * t16, (t16, d["tokens_per_s_16_steps"])
assert d["step_sc_by_op"]["linear"]["gflop"] > 0
PY
then
  ok "bench -m DIR --json: step figures consistent"
else
  bad "bench -m DIR --json: $(cat "$TMP/step.json" "$TMP/err" | head -c 800)"
fi
if "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 >"$TMP/step.txt" 2>&1 &&
    grep -q "canvas positions/s" "$TMP/step.txt" && grep -q "estimated tokens/s" "$TMP/step.txt"; then
  ok "bench step: $(grep 'estimated tokens/s' "$TMP/step.txt")"
else
  bad "bench step text: $(cat "$TMP/step.txt")"
fi
expect_error "unknown benchmark" "unknown benchmark 'nope'" "$BIN" bench nope
expect_error "step without a model" "-m" "$BIN" bench step
finish
