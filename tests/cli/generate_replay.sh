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

# probe_device NAME "NO-DEVICE PATTERN": adds NAME to device_list when a
# one-token generate runs on it here; else checks that its error says no
# device (or no backend in this build) is there.
device_list=()
probe_device() {
  if "$BIN" generate -m "$MODEL" --backend "$1" --prompt-ids 2,10 --max-new-tokens 1 -q --json >"$TMP/probe.json" \
      2>"$TMP/probe.err"; then
    device_list+=("$1")
  elif grep -qE "$2" "$TMP/probe.err"; then
    ok "no $1 device in this build/machine, and --backend $1 says so: $(head -c 120 "$TMP/probe.err")"
  else
    bad "--backend $1 failed without saying that no device is available: $(cat "$TMP/probe.err")"
  fi
}
# The CUDA backend (a GPU, or the emulated device of the sanitizer build) and
# the OpenCL backend (CI: PoCL): the whole trajectory on the device, every op
# included, must give the reference's output too.
probe_device cuda "no CUDA device found|has no CUDA backend"
probe_device opencl "has no OpenCL backend|no OpenCL platform|no OpenCL device"

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
  for backend in cpu "${device_list[@]}"; do
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


# A prompt with a picture (golden V): the ids already hold its placeholder run,
# --image fills it, and the replay gives the reference's tokens exactly
# (docs/model.md §7.6). The wrong picture (another size) is an error naming
# both counts.
V="$SRC/tests/data/golden_v"
V_IDS=$(python3 -c "import json; d = json.load(open('$V/cases/generate_image_one.json')); print(','.join(map(str, d['sequences'][0][:d['prompt_len']])))")
if "$BIN" generate -m "$V" --prompt-ids "$V_IDS" --image "$V/images/png_up.png" \
    --replay "$V/cases/generate_image_one.safetensors" --replay-self-conditioning -q >"$TMP/image.out" 2>"$TMP/image.err" &&
   python3 -c "import json, sys; d = json.load(open('$V/cases/generate_image_one.json'))
sys.exit(0 if [int(x) for x in open('$TMP/image.out').read().split(',')] == d['sequences'][0] else 1)"; then
  ok "generate_image_one: --image replay matches the reference token for token"
else
  bad "generate_image_one: $(head -c 300 "$TMP/image.err")"
fi
if "$BIN" generate -m "$V" --prompt-ids "$V_IDS" --image "$V/images/wide.jpg" -q >/dev/null 2>"$TMP/image.err"; then
  bad "a picture whose soft tokens do not fit the run was accepted"
elif grep -q "63" "$TMP/image.err" && grep -q "66" "$TMP/image.err"; then
  ok "the wrong picture for the run: $(head -1 "$TMP/image.err" | cut -c1-120)"
else
  bad "wrong picture: $(cat "$TMP/image.err")"
fi

finish
