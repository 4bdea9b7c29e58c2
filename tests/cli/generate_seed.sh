#!/usr/bin/env bash
# `dgemma generate` with the seeded generator on golden config A: the same
# seed gives byte-identical output with 1 and 2 threads and across runs;
# generation_config.json supplies the defaults and flags override them; bad
# input fails with a message that names the problem.
#
# usage: generate_seed.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
MODEL="$SRC/tests/data/golden_a"
PROMPT=2,427,158,188,358,234,273,300,261,285,441,270,129,180

gen() { "$BIN" generate -m "$MODEL" --prompt-ids "$PROMPT" -q "$@"; }

# Thread count and repetition do not change the output.
gen --seed 7 --max-new-tokens 48 --threads 1 >"$TMP/t1.txt" 2>"$TMP/err" || bad "threads 1 run failed: $(cat "$TMP/err")"
gen --seed 7 --max-new-tokens 48 --threads 2 >"$TMP/t2.txt" 2>"$TMP/err" || bad "threads 2 run failed: $(cat "$TMP/err")"
gen --seed 7 --max-new-tokens 48 --threads 2 >"$TMP/t2b.txt" 2>/dev/null
if [ -s "$TMP/t1.txt" ] && cmp -s "$TMP/t1.txt" "$TMP/t2.txt" && cmp -s "$TMP/t2.txt" "$TMP/t2b.txt"; then
  ok "same seed: byte-identical ids with --threads 1 and --threads 2, and across runs"
else
  bad "same seed gave different output: $(cat "$TMP/t1.txt") / $(cat "$TMP/t2.txt") / $(cat "$TMP/t2b.txt")"
fi
gen --seed 7 --max-new-tokens 48 --threads 1 --json >"$TMP/j1.json" 2>/dev/null
gen --seed 7 --max-new-tokens 48 --threads 2 --json >"$TMP/j2.json" 2>/dev/null
if [ -s "$TMP/j1.json" ] && cmp -s "$TMP/j1.json" "$TMP/j2.json"; then
  ok "same seed: byte-identical --json with 1 and 2 threads"
else
  bad "--json differs between thread counts"
fi
gen --seed 8 --max-new-tokens 48 >"$TMP/s8.txt" 2>/dev/null
if ! cmp -s "$TMP/t1.txt" "$TMP/s8.txt"; then ok "another seed gives another output"; else bad "seeds 7 and 8 agree"; fi

# Shape: prompt + whole canvases (canvas 16), generation_config.json defaults.
if python3 - "$TMP/j1.json" "$PROMPT" <<'EOF'
import json, sys
got = json.load(open(sys.argv[1]))
prompt = [int(x) for x in sys.argv[2].split(",")]
seq = got["sequences"][0]
steps = got["steps_per_canvas"]
ok = (seq[: len(prompt)] == prompt and len(seq) == len(prompt) + 16 * len(steps)
      and 1 <= len(steps) <= 3 and all(1 <= s <= 10 for s in steps)   # max_denoising_steps 10 from the file
      and got["prompt_length"] == len(prompt) and got["seed"] == 7
      and got["decoder_forwards"] == sum(steps))
sys.exit(0 if ok else 1)
EOF
then ok "--json: sequences = prompt + whole canvases; steps from generation_config.json; seed echoed"
else bad "--json result malformed: $(cat "$TMP/j1.json")"
fi
gen --seed 7 --max-new-tokens 16 --max-denoising-steps 3 --json >"$TMP/o.json" 2>/dev/null
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["steps_per_canvas"]==[3] or (len(d["steps_per_canvas"])==1 and d["steps_per_canvas"][0]<=3) else 1)' "$TMP/o.json"; then
  ok "--max-new-tokens / --max-denoising-steps override generation_config.json"
else
  bad "overrides not applied: $(cat "$TMP/o.json")"
fi

# Bad input.
expect_error "out-of-range --prompt-ids" "outside the vocabulary" gen --prompt-ids 2,512,3
expect_error "negative --prompt-ids" "out of range" gen --prompt-ids 2,-1
expect_error "malformed --prompt-ids" "expected an integer" gen --prompt-ids 2,x,3
expect_error "empty element in --prompt-ids" "empty element" gen --prompt-ids 2,,3
expect_error "missing --prompt-ids" "--prompt-ids" "$BIN" generate -m "$MODEL"
expect_error "missing -m folder" "$TMP/nope" "$BIN" generate -m "$TMP/nope" --prompt-ids 2,3
expect_error "no -m" "-m DIR" "$BIN" generate --prompt-ids 2,3
expect_error "--replay with --seed" "exclude" gen --replay "$MODEL/cases/generate_short.safetensors" --seed 1
expect_error "--replay-self-conditioning alone" "--replay" gen --replay-self-conditioning
expect_error "invalid --t-max" "t_max" gen --t-min 0.8 --t-max 0.4
expect_error "missing replay file" "$TMP/none.safetensors" gen --replay "$TMP/none.safetensors"

finish
