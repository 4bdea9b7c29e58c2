#!/usr/bin/env bash
# `dgemma bench` as users run it, on the golden tiny checkpoint: the step
# benchmark via `bench -m DIR` and `bench step`, its JSON fields, the step
# benchmark on another backend (--backend inject:..., the CPU with a fault
# that never fires), and errors.
# (Speed figures live in bench/README.md; nothing here is timed.)
#
# usage: bench.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
GOLDEN="$SRC/tests/data/golden_a"

if "$BIN" bench -m "$GOLDEN" --steps 1 --context 8 --json >"$TMP/step.json" 2>"$TMP/err" &&
    python3 - "$TMP/step.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
need = ["positions_per_s", "step_sc_s", "step_first_s", "commit_s", "step_sc_flop", "gflops", "peak_gflops",
        "fraction_of_peak", "tokens_per_s_16_steps", "tokens_per_s_48_steps", "step_sc_by_op"]
assert d["name"] == "step" and d["canvas"] == 16 and d["layers"] == 4, d
assert d["backend"] == "cpu", d.get("backend")
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
# --batch N: batched self-conditioned steps (N canvases in one decoder pass).
if "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 --batch 3 --json >"$TMP/batch.json" 2>"$TMP/err" &&
    python3 - "$TMP/batch.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["batch"] == 3 and d["batch_step_sc_s"] > 0, d
assert abs(d["batch_positions_per_s"] - 3 * 16 / d["batch_step_sc_s"]) < 1e-6 * d["batch_positions_per_s"], d
assert d["batch_speedup"] > 0, d
PY
then
  ok "bench step --batch 3: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f positions/s batched, %.0f single" % (d["batch_positions_per_s"], d["positions_per_s"]))' "$TMP/batch.json")"
else
  bad "bench step --batch 3: $(cat "$TMP/batch.json" "$TMP/err" | head -c 800)"
fi
if "$BIN" bench step -m "$GOLDEN" --batch 0 >"$TMP/out" 2>&1; then
  bad "bench step --batch 0 was accepted"
else
  ok "bench step --batch 0: $(head -1 "$TMP/out")"
fi
# Another backend: the one --backend configured runs the steps (the injected
# fault is for decoder step 99, which these few passes never reach); the
# CPU-only figures (peak, its fraction, ISA, mode, threads) are left out.
INJECT=inject:add:-1:decoder:99:value
if "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 --backend $INJECT --json >"$TMP/inject.json" 2>"$TMP/err" &&
    python3 - "$TMP/inject.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["backend"] == "inject(cpu)", d.get("backend")
cpu_only = [k for k in ("peak_gflops", "fraction_of_peak", "isa", "mode", "threads") if k in d]
assert not cpu_only, cpu_only
assert d["name"] == "step" and d["canvas"] == 16 and d["layers"] == 4, d
assert d["positions_per_s"] > 0 and d["step_sc_s"] > 0 and d["step_sc_flop"] > 0 and d["gflops"] > 0
assert d["tokens_per_s_16_steps"] > d["tokens_per_s_48_steps"] > 0
assert d["step_sc_by_op"]["linear"]["gflop"] > 0
PY
then
  ok "bench step --backend $INJECT --json: backend named, no peak figures"
else
  bad "bench step --backend $INJECT --json: $(cat "$TMP/inject.json" "$TMP/err" | head -c 800)"
fi
if "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 --backend $INJECT >"$TMP/inject.txt" 2>&1 &&
    grep -q "backend inject(cpu)" "$TMP/inject.txt" && grep -q "canvas positions/s" "$TMP/inject.txt" &&
    ! grep -q "peak" "$TMP/inject.txt"; then
  ok "bench step --backend $INJECT: $(grep 'canvas positions/s' "$TMP/inject.txt")"
else
  bad "bench step --backend $INJECT text: $(cat "$TMP/inject.txt")"
fi
# A CUDA device (a GPU, or the emulated one of the sanitizer build): the steps
# are timed as generate() runs them (decode_sample), split by the device's
# own per-op times, in every precision (int8-dot on q8 weights), with a
# batched step of 2 canvases sampled in the pass; without a device the error
# says so.
for prec in fp32 bf16-dot int8-dot; do
  quant=()
  [ $prec = int8-dot ] && quant=(--quantize q8)
  if "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 --backend cuda --precision $prec "${quant[@]}" --batch 2 \
      --json >"$TMP/cuda.json" 2>"$TMP/cuda.err"; then
    if python3 - "$TMP/cuda.json" "$prec" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["backend"] == ("cuda" if sys.argv[2] == "fp32" else "cuda:" + sys.argv[2]), d["backend"]
assert d["batch"] == 2 and d["batch_step_sc_s"] > 0 and d["batch_device_s"] > 0, d
assert d["step_path"] == "decode_sample", d.get("step_path")
assert d["step_sc_s"] > 0 and d["step_sc_host_api_s"] > 0 and d["step_sc_device_s"] > 0, d
ops = sum(v["seconds"] for v in d["step_sc_by_op"].values())
assert abs(ops - d["step_sc_device_s"]) <= 1e-9 + 1e-6 * ops, (ops, d["step_sc_device_s"])
assert "moe_experts" in d["step_sc_by_op"] and "sample" in d["step_sc_by_op"], d["step_sc_by_op"].keys()
t = d["device_traffic_per_step"]["on_device_sampler"]
assert t["h2d_bytes"] == 16 * 16 and t["synchronizations"] == 1, t
# The step runs as one CUDA graph (the default graph mode), all its kernels in it.
assert t["graph_launches"] == 1 and t["kernel_launches"] > 100, t
PY
    then
      ok "bench step --backend cuda --precision $prec: decode_sample steps, device time by op"
    else
      bad "bench step --backend cuda --precision $prec: $(head -c 1500 "$TMP/cuda.json")"
    fi
  elif grep -q "no CUDA device\|no CUDA backend" "$TMP/cuda.err"; then
    ok "bench step --backend cuda: no device here, and it says so"
  else
    bad "bench step --backend cuda --precision $prec: $(cat "$TMP/cuda.err" | head -c 800)"
  fi
done
# The OpenCL backend (PoCL in CI): the same decode_sample steps, the device's
# time by op from its profiling stamps, and at most 64 bytes per canvas
# position across the bus each way (docs/opencl.md §1).
if "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 --backend opencl --json >"$TMP/opencl.json" \
    2>"$TMP/opencl.err"; then
  if python3 - "$TMP/opencl.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["backend"].startswith("opencl:"), d["backend"]
assert d["step_path"] == "decode_sample", d.get("step_path")
assert d["step_sc_s"] > 0 and d["step_sc_device_s"] > 0, d
ops = sum(v["seconds"] for v in d["step_sc_by_op"].values())
assert abs(ops - d["step_sc_device_s"]) <= 1e-9 + 1e-6 * ops, (ops, d["step_sc_device_s"])
for op in ("attention", "moe_experts", "router_topk", "soft_embedding", "sample"):
    assert op in d["step_sc_by_op"], (op, d["step_sc_by_op"].keys())
t = d["device_traffic_per_step"]["on_device_sampler"]
assert 0 < t["h2d_bytes_per_position"] <= 64 and 0 < t["d2h_bytes_per_position"] <= 64, t
PY
  then
    ok "bench step --backend opencl: decode_sample steps, device time by op, <= 64 bytes per position each way"
  else
    bad "bench step --backend opencl: $(head -c 1500 "$TMP/opencl.json")"
  fi
elif grep -qE "has no OpenCL backend|no OpenCL platform|no OpenCL device" "$TMP/opencl.err"; then
  ok "bench step --backend opencl: no OpenCL device or backend here, and it says so"
else
  bad "bench step --backend opencl: $(head -c 800 "$TMP/opencl.err")"
fi
expect_error "--bf16-dot with another backend" "--bf16-dot" \
  "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 --backend $INJECT --bf16-dot
expect_error "--isa with another backend" "--isa" \
  "$BIN" bench step -m "$GOLDEN" --steps 1 --context 8 --backend $INJECT --isa avx2
expect_error "unknown benchmark" "unknown benchmark 'nope'" "$BIN" bench nope
expect_error "step without a model" "-m" "$BIN" bench step
finish
