#!/usr/bin/env bash
# `dgemma generate --replay` with the REAL model on golden config A: for every
# tests/data/golden_a/cases/generate_*.json case, take the prompt ids and the
# effective generation parameters from the case JSON, replay its recorded
# random draws, and require the output of the reference generate() exactly:
# `sequences` (full canvases, pad after EOS), steps per canvas and
# tokens_per_forward (float32 bits).
#
# The exact run uses --replay-self-conditioning: self-conditioning amplifies
# float32 rounding differences ~10x per denoising step, so a free-running
# replay drifts from the recording after a few steps (see
# src/generate/recorded_self_conditioning.h). The free-running replay is
# still run and must produce a well-formed result on its own.
#
# The exact replay runs again on the CUDA backend when the build has a device
# (a GPU, or the emulated device of a DGEMMA_CUDA=EMULATE build: the sanitizer
# build of scripts/build.sh): the whole trajectory, every op on the device,
# must give the reference's output too. Without one, `--backend cuda` must
# fail with a clear message. The same for the OpenCL backend (PoCL in CI).
#
# usage: generate_replay.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
MODEL="$SRC/tests/data/golden_a"

# The CUDA backend: "cuda" when it can run here, else nothing (checked once).
cuda_backends=()
if "$BIN" generate -m "$MODEL" --backend cuda --prompt-ids 2,10 --max-new-tokens 1 -q --json >"$TMP/probe.json" \
    2>"$TMP/probe.err"; then
  cuda_backends=(cuda)
elif grep -qE "no CUDA device found|has no CUDA backend" "$TMP/probe.err"; then
  ok "no CUDA device in this build/machine, and --backend cuda says so: $(head -c 120 "$TMP/probe.err")"
else
  bad "--backend cuda failed without saying that no device is available: $(cat "$TMP/probe.err")"
fi

# The OpenCL backend: "opencl" when the build has it and a device is there (CI:
# PoCL), else a clear message. The whole trajectory on the device, every op
# included, must give the reference's output too.
opencl_backends=()
if "$BIN" generate -m "$MODEL" --backend opencl --prompt-ids 2,10 --max-new-tokens 1 -q --json >"$TMP/probe.json" \
    2>"$TMP/probe.err"; then
  opencl_backends=(opencl)
elif grep -qE "has no OpenCL backend|no OpenCL platform|no OpenCL device" "$TMP/probe.err"; then
  ok "no OpenCL device in this build/machine, and --backend opencl says so: $(head -c 120 "$TMP/probe.err")"
else
  bad "--backend opencl failed without saying that no device is available: $(cat "$TMP/probe.err")"
fi

for case_json in "$MODEL"/cases/generate_*.json; do
  name=$(basename "$case_json" .json)
  tape="${case_json%.json}.safetensors"
  # Flags for every effective parameter, so the flag overrides are exercised too.
  args=$(python3 - "$case_json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["effective_generation_config"]
prompt = d["sequences"][0][: d["prompt_len"]]
eos = g["eos_token_id"] if isinstance(g["eos_token_id"], list) else [g["eos_token_id"]]
print(" ".join([
    "--prompt-ids", ",".join(map(str, prompt)),
    "--max-new-tokens", str(g["max_new_tokens"]),
    "--max-denoising-steps", str(g["max_denoising_steps"]),
    "--eos-token-id", ",".join(map(str, eos)),
    "--pad-token-id", str(g["pad_token_id"]),
    "--stability-threshold", str(g["stability_threshold"]),
    "--confidence-threshold", repr(g["confidence_threshold"]),
    "--entropy-bound", repr(g["sampler_config"]["entropy_bound"]),
    "--t-min", repr(g["t_min"]),
    "--t-max", repr(g["t_max"]),
]))
EOF
)
  for backend in cpu "${cuda_backends[@]}" "${opencl_backends[@]}"; do
    # shellcheck disable=SC2086
    if "$BIN" generate -m "$MODEL" --replay "$tape" --replay-self-conditioning --backend "$backend" --json -q $args \
        >"$TMP/$name.json" 2>"$TMP/$name.err"; then
      if python3 - "$case_json" "$TMP/$name.json" <<'EOF'
import json, struct, sys
ref = json.load(open(sys.argv[1]))
got = json.loads(open(sys.argv[2]).read())
f32 = lambda x: struct.pack("<f", x)
errors = []
if got["sequences"] != ref["sequences"]:
    errors.append("sequences differ:\n  got %s\n  ref %s" % (got["sequences"], ref["sequences"]))
steps = [len(c["steps"]) for c in ref["canvases"]]
if got["steps_per_canvas"] != steps:
    errors.append("steps_per_canvas %s, reference %s" % (got["steps_per_canvas"], steps))
if f32(got["tokens_per_forward"]) != f32(ref["tokens_per_forward"][0]):
    errors.append("tokens_per_forward %r, reference %r" % (got["tokens_per_forward"], ref["tokens_per_forward"][0]))
for e in errors:
    print("  " + e)
sys.exit(1 if errors else 0)
EOF
      then ok "$name on $backend: sequences, steps per canvas and tokens_per_forward equal the reference"
      else bad "$name on $backend: output differs from the reference"
      fi
    else
      bad "$name on $backend: dgemma generate failed: $(cat "$TMP/$name.err")"
    fi
  done

  # Free-running replay: our own self-conditioning. It may need more draws
  # than were recorded (then it fails cleanly, naming the tape); otherwise the
  # result must be well formed: prompt + whole canvases.
  # shellcheck disable=SC2086
  if "$BIN" generate -m "$MODEL" --replay "$tape" --json -q $args >"$TMP/$name.free.json" 2>"$TMP/$name.free.err"; then
    if python3 - "$case_json" "$TMP/$name.free.json" <<'EOF'
import json, sys
ref = json.load(open(sys.argv[1]))
got = json.loads(open(sys.argv[2]).read())
seq = got["sequences"][0]
n = len(got["steps_per_canvas"])
ok = (seq[: ref["prompt_len"]] == ref["sequences"][0][: ref["prompt_len"]]
      and len(seq) == ref["prompt_len"] + n * ref["canvas_length"]
      and all(1 <= s <= ref["effective_generation_config"]["max_denoising_steps"] for s in got["steps_per_canvas"]))
sys.exit(0 if ok else 1)
EOF
    then ok "$name: free-running replay is well formed"
    else bad "$name: free-running replay output is malformed"
    fi
  elif grep -q "draw" "$TMP/$name.free.err"; then
    ok "$name: free-running replay outran the tape and said so"
  else
    bad "$name: free-running replay failed: $(cat "$TMP/$name.free.err")"
  fi
done

finish
