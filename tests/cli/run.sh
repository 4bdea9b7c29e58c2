#!/usr/bin/env bash
# `dgemma run` on the embedded default model (random weights), with
# DGEMMA_CACHE in a fresh temp dir so the first use creates it: creation is
# atomic (two first uses at once both work), -n is honoured exactly across
# canvas boundaries, --json event lines parse and agree with the plain text,
# --visualize without a TTY prints one line per step, the summary is on
# stderr, and seeds are reproducible across thread counts.
#
# usage: run.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"

# First use, twice at once: both succeed, one folder, no temp leftovers.
"$BIN" run -p "Hello" -n 1 --seed 1 >"$TMP/a.out" 2>"$TMP/a.err" &
pid_a=$!
"$BIN" run -p "Hello" -n 1 --seed 1 >"$TMP/b.out" 2>"$TMP/b.err"
rc_b=$?
wait $pid_a
rc_a=$?
model="$DGEMMA_CACHE/default-model-v2"
if [ $rc_a -eq 0 ] && [ $rc_b -eq 0 ] && [ -f "$model/model.safetensors" ] && [ -f "$model/tokenizer.json" ] &&
    [ -f "$model/config.json" ] && [ -f "$model/generation_config.json" ] &&
    [ -z "$(ls -A "$DGEMMA_CACHE" | grep -v '^default-model-v2$')" ]; then
  ok "first use creates $model atomically (two concurrent first uses)"
else
  bad "default model creation: rc $rc_a/$rc_b, cache: $(ls -la "$DGEMMA_CACHE") $(cat "$TMP/a.err" "$TMP/b.err")"
fi
if cat "$TMP/a.err" "$TMP/b.err" | grep -q "created the default model" && grep -q "RANDOM weights" "$TMP/a.err"; then
  ok "stderr says the default model was created and has random weights"
else
  bad "creation/random-weights notes missing: $(cat "$TMP/a.err")"
fi
if cmp -s "$TMP/a.out" "$TMP/b.out"; then ok "same seed, same text"; else bad "same seed gave different text"; fi

# Fewer denoising steps from here on keep the test fast (--max-denoising-steps
# overrides the default model's generation_config.json value of 8).
FAST="--max-denoising-steps 2"

# -n exactly, via the JSON events: 5 (inside the first canvas of 16), 16 (one
# whole canvas) and 20 (crosses into a second canvas).
for n in 5 16 20; do
  if "$BIN" run -p "Hello" -n $n --seed 2 $FAST --json >"$TMP/n$n.jsonl" 2>"$TMP/n$n.err" &&
      python3 - "$TMP/n$n.jsonl" $n <<'EOF'
import json, sys
n = int(sys.argv[2])
events = [json.loads(line) for line in open(sys.argv[1])]
kinds = [e["event"] for e in events]
done = events[-1]
canvas_tokens = sum(len(e["tokens"]) for e in events if e["event"] == "canvas")
canvases = (n + 15) // 16
ok = (kinds.count("done") == 1 and kinds[-1] == "done" and kinds.count("canvas") == canvases
      and kinds.count("step") == sum(done["steps_per_canvas"])
      and all(len(e["canvas_out"]) == 16 and len(e["accepted"]) == 16 for e in events if e["event"] == "step")
      and all(len(e["committed"]) == 16 for e in events if e["event"] == "canvas"))
if done["stop_reason"] == "length":
    ok = ok and done["generated_tokens"] == n and len(done["tokens"]) == n and canvas_tokens == n
else:  # an EOS before n tokens (vanishingly rare with random weights)
    ok = ok and done["stop_reason"] == "eos" and done["generated_tokens"] < n
# Canvas texts are the settled text as it streamed; done.text is all of it.
ok = ok and done["text"].startswith("".join(e["text"] for e in events if e["event"] == "canvas"))
sys.exit(0 if ok else 1)
EOF
  then
    ok "-n $n: exactly $n tokens emitted over $(((n + 15) / 16)) canvas(es); every event line is JSON"
  else
    bad "-n $n: $(head -c 600 "$TMP/n$n.jsonl") $(cat "$TMP/n$n.err")"
  fi
done

# Plain text = the JSON text for the same seed; summary on stderr.
"$BIN" run -p "Hello" -n 20 --seed 2 $FAST >"$TMP/plain.out" 2>"$TMP/plain.err"
if python3 - "$TMP/plain.out" "$TMP/n20.jsonl" <<'EOF'
import json, sys
plain = open(sys.argv[1], encoding="utf-8").read()
done = [json.loads(l) for l in open(sys.argv[2])][-1]
sys.exit(0 if plain == done["text"] + "\n" else 1)
EOF
then ok "plain output equals the --json text (same seed)"; else bad "plain and --json text differ"; fi
missing=""
for key in "prompt tokens" "canvases" "steps per canvas" "canvas positions/s" "tokens/s" "first token" "peak memory"; do
  grep -q "$key" "$TMP/plain.err" || missing="$missing '$key'"
done
if [ -z "$missing" ]; then ok "summary on stderr"; else bad "summary lacks$missing: $(cat "$TMP/plain.err")"; fi
if ! grep -q "created the default model" "$TMP/plain.err"; then ok "second use reuses the cached model"; else bad "model created twice"; fi

# --visualize without a TTY: one line per step, then the final text.
"$BIN" run -p "Hello" -n 20 --seed 2 $FAST --visualize -q >"$TMP/vis.out" 2>"$TMP/vis.err"
steps=$(grep -c '^canvas [0-9]* step [0-9]*/2 ' "$TMP/vis.out")
want=$(python3 -c 'import json,sys; print(sum([json.loads(l) for l in open(sys.argv[1])][-1]["steps_per_canvas"]))' "$TMP/n20.jsonl")
if [ "$steps" = "$want" ] && python3 - "$TMP/vis.out" "$TMP/plain.out" "$want" <<'EOF'
import sys
vis = open(sys.argv[1], encoding="utf-8").read()
plain = open(sys.argv[2], encoding="utf-8").read()
lines = vis.split("\n")
sys.exit(0 if "\n".join(lines[int(sys.argv[3]):]) == plain and "\x1b" not in vis else 1)
EOF
then ok "--visualize on a pipe: $steps step lines, then the same final text, no ANSI codes"
else bad "--visualize output: $(head -c 400 "$TMP/vis.out")"
fi

# Threads do not change anything but timings.
"$BIN" run -p "Hi" -n 16 --seed 3 $FAST --json -t 1 >"$TMP/t1.jsonl" 2>/dev/null
"$BIN" run -p "Hi" -n 16 --seed 3 $FAST --json -t 2 >"$TMP/t2.jsonl" 2>/dev/null
if python3 - "$TMP/t1.jsonl" "$TMP/t2.jsonl" <<'EOF'
import json, sys
def load(p):
    out = []
    for line in open(p):
        e = json.loads(line)
        for k in ("seconds", "first_token_seconds", "tokens_per_second", "positions_per_second", "peak_rss_bytes"):
            e.pop(k, None)
        out.append(e)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a and a == b else 1)
EOF
then ok "same seed: identical events with --threads 1 and --threads 2"; else bad "events differ between thread counts"; fi

# Chat template vs --raw: "Hello" is 2 ids raw (<bos> Hello), more with the template.
raw=$("$BIN" run -p "Hello" --raw -n 1 --seed 1 --max-denoising-steps 1 --json 2>/dev/null | python3 -c 'import json,sys; print([json.loads(l) for l in sys.stdin][-1]["prompt_tokens"])')
tpl=$("$BIN" run -p "Hello" -n 1 --seed 1 --max-denoising-steps 1 --json 2>/dev/null | python3 -c 'import json,sys; print([json.loads(l) for l in sys.stdin][-1]["prompt_tokens"])')
if [ "$raw" = "2" ] && [ "$tpl" = "14" ]; then
  ok "--raw encodes <bos>Hello (2 ids); the chat template gives 14"
else
  bad "prompt tokens raw=$raw template=$tpl (want 2 and 14)"
fi

# Help and errors.
if "$BIN" run --help | grep -q "RANDOM WEIGHTS" && "$BIN" run --help | grep -q "diffusiongemma-26B-A4B-it"; then
  ok "--help says the default model has random weights and how to use the real one"
else
  bad "--help lacks the default-model note"
fi
expect_error "no prompt" "-p" "$BIN" run
expect_error "missing -m folder" "$TMP/nope" "$BIN" run -m "$TMP/nope" -p hi
expect_error "-n 0" "option -n/--max-new-tokens: expected an integer >= 1" "$BIN" run -p hi -n 0
expect_error "-n malformed" "integer" "$BIN" run -p hi -n x
expect_error "--visualize with --json" "exclude" "$BIN" run -p hi --visualize --json
expect_error "--debug-device on the CPU" "no device buffers" "$BIN" run -p hi --debug-device
expect_error "unknown backend" "unknown backend 'tpu'" "$BIN" run -p hi --backend tpu
# --backend reaches the model: a NaN injected into the first decoder step's
# LM head stops the run with the sampler's error naming the step.
expect_error "--backend inject: NaN logits are an error" "canvas 0 step 0" \
  "$BIN" run -p hi -n 4 --backend inject:linear:-1:decoder:0:nan
if "$BIN" run -p hi -n 8 --seed 4 --backend cpu >"$TMP/cpu.out" 2>/dev/null &&
    "$BIN" run -p hi -n 8 --seed 4 >"$TMP/default.out" 2>/dev/null && cmp -s "$TMP/cpu.out" "$TMP/default.out"; then
  ok "--backend cpu gives the default run's text"
else
  bad "--backend cpu differs from the default run"
fi

# -f/--file FILE (and '-': stdin) gives the prompt of -p "$(cat FILE)"; llama.cpp's --n-predict and
# --temperature are -n and --temp.
printf 'Write a haiku\nabout Lisbon.\n\n' >"$TMP/prompt.txt"
R=(-n 8 --max-denoising-steps 2 --seed 11 -q)
want=$("$BIN" run -p "$(cat "$TMP/prompt.txt")" "${R[@]}" 2>&1)
from_file=$("$BIN" run -f "$TMP/prompt.txt" "${R[@]}" 2>&1)
from_stdin=$("$BIN" run --file - "${R[@]}" <"$TMP/prompt.txt" 2>&1)
if [ -n "$want" ] && [ "$from_file" = "$want" ] && [ "$from_stdin" = "$want" ]; then
  ok "-f FILE and -f - give the reply of -p \"\$(cat FILE)\""
else
  bad "-f: '$from_file' / '$from_stdin' vs '$want'"
fi
"$BIN" run -f "$TMP/prompt.txt" -p hi "${R[@]}" >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "not both" "$TMP/err"; then ok "-p and -f together: exit 2"; else bad "-p with -f: rc $rc $(cat "$TMP/err")"; fi
"$BIN" run -f "$TMP/no-such-prompt" "${R[@]}" >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "$TMP/no-such-prompt" "$TMP/err"; then
  ok "-f with a missing file: exit 1 naming it"
else
  bad "-f missing file: rc $rc $(cat "$TMP/err")"
fi
greedy=$("$BIN" run -p Hello -n 8 --max-denoising-steps 2 --temp 0 -q 2>&1)
aliases=$("$BIN" run -p Hello --n-predict 8 --max-denoising-steps 2 --temperature 0 -q 2>&1)
if [ -n "$greedy" ] && [ "$aliases" = "$greedy" ]; then
  ok "--n-predict and --temperature are -n and --temp"
else
  bad "aliases: '$aliases' vs '$greedy'"
fi


# --image: the picture's soft tokens join the prompt; --raw refuses it; an
# unsupported format is refused naming the file.
IMG="$SRC/tests/data/golden_v/images"
"$BIN" run -p "What is this?" -n 16 --max-denoising-steps 2 --seed 3 >/dev/null 2>"$TMP/plain.err"
"$BIN" run --image "$IMG/jpeg_exif.jpg" -p "What is this?" -n 16 --max-denoising-steps 2 --seed 3 >"$TMP/img.out" 2>"$TMP/img.err"
rc=$?
p0=$(sed -n 's/^prompt tokens *\([0-9]*\).*/\1/p' "$TMP/plain.err")
p1=$(sed -n 's/^prompt tokens *\([0-9]*\).*/\1/p' "$TMP/img.err")
if [ $rc -eq 0 ] && [ -s "$TMP/img.out" ] && [ "${p1:-0}" -gt $((${p0:-0} + 10)) ]; then
  ok "run --image: $p1 prompt tokens against $p0 without the picture"
else
  bad "run --image: rc $rc, '$p0' '$p1': $(tail -3 "$TMP/img.err")"
fi
if "$BIN" run --raw --image "$IMG/png_up.png" -p x 2>"$TMP/err" >/dev/null; then bad "--raw --image accepted"
else ok "--raw --image refused: $(head -1 "$TMP/err")"; fi
printf 'BM\x00\x00' >"$TMP/x.bmp"
if "$BIN" run --image "$TMP/x.bmp" -p x 2>"$TMP/err" >/dev/null; then bad "a BMP was accepted"
elif grep -q "x.bmp" "$TMP/err"; then ok "a BMP is refused naming the file: $(head -1 "$TMP/err" | cut -c1-100)"
else bad "BMP: $(cat "$TMP/err")"; fi

finish
