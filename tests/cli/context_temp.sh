#!/usr/bin/env bash
# Context size and temperature on run/chat/generate:
# -c/--ctx-size defaults to the model's max_position_embeddings and a request
# that cannot fit is refused with a message naming the limit; chat drops its
# oldest turns instead; --temp 0 is greedy and repeatable without --seed.
#
# usage: context_temp.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
FAST="--max-denoising-steps 1"
"$BIN" run -p hi -n 1 $FAST -q >/dev/null 2>&1  # creates the default model
M="$DGEMMA_CACHE/default-model-v2"
max_pos=$(grep -o '"max_position_embeddings": *[0-9]*' "$M/config.json" | grep -o '[0-9]*$')

# The default limit is max_position_embeddings: -n 3000000 does not fit.
expect_error "-n 3000000 over the model's context" "context size $max_pos (-c/--ctx-size)" \
  "$BIN" run -p hi -n 3000000 -q
grep -q "at most -n" "$TMP/err" && ok "the refusal says how much fits" || bad "no 'at most -n': $(cat "$TMP/err")"
expect_error "-n 10000000000" "context size $max_pos" "$BIN" run -p hi -n 10000000000 -q
# An explicit -c: "hi" is 14 prompt tokens; canvases of 16.
if "$BIN" run -p hi -c 64 -n 48 $FAST -q --seed 1 >/dev/null 2>"$TMP/fit.err"; then
  ok "-c 64: 14 + 48 positions fit"
else
  bad "-c 64 -n 48 refused: $(cat "$TMP/fit.err")"
fi
expect_error "-c 64 -n 60" "at most -n 48 fits" "$BIN" run -p hi -c 64 -n 60 -q
expect_error "generate -c 8" "context size 8" "$BIN" generate -m "$M" --prompt-ids 2,9259,1902 -c 8 -n 16 -q
"$BIN" run -p hi -n 3 -c -1 -q >/dev/null 2>"$TMP/neg.err"
if [ $? -eq 2 ] && grep -q -- "--ctx-size" "$TMP/neg.err"; then
  ok "-c -1 is a usage error"
else
  bad "-c -1: $(cat "$TMP/neg.err")"
fi
"$BIN" run --help | grep -q "max_position_embeddings" && ok "--help names the default of -c" || bad "--help lacks the -c default"

# chat: when the next turn would not fit, the oldest turns go (stderr says
# so) and the conversation continues; a message that cannot fit alone is an
# error for that message only (exit status 1 at the end).
printf 'one\ntwo\nthree\nfour\n' | "$BIN" chat -c 80 -n 16 $FAST --seed 1 -v >"$TMP/chat.out" 2>"$TMP/chat.err"
rc=$?
if [ $rc -eq 0 ] && grep -q "context size 80 (-c/--ctx-size) reached: dropped the 1 oldest turn" "$TMP/chat.err" &&
    [ "$(grep -c '^dgemma: turn [0-9]*: encoded' "$TMP/chat.err")" = 4 ]; then
  ok "chat -c 80: oldest turns dropped, all 4 turns answered"
else
  bad "chat truncation: rc $rc $(cat "$TMP/chat.err")"
fi
long=$(printf 'word %.0s' $(seq 60))
printf '%s\nshort\n' "$long" | "$BIN" chat -c 48 -n 16 $FAST --seed 1 -q >"$TMP/long.out" 2>"$TMP/long.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "more than the context size 48 (-c/--ctx-size)" "$TMP/long.err" &&
    [ "$(wc -l <"$TMP/long.out")" = 1 ]; then
  ok "chat: a message too long for -c is refused, the next one answered, exit 1"
else
  bad "chat long message: rc $rc $(cat "$TMP/long.err") / $(cat "$TMP/long.out")"
fi

# --temp 0: greedy; without --seed the seed is 0, so two runs agree.
"$BIN" run -p Hello -n 20 --temp 0 $FAST --json >"$TMP/g1.jsonl" 2>/dev/null
"$BIN" run -p Hello -n 20 --temp 0 $FAST --json >"$TMP/g2.jsonl" 2>/dev/null
if python3 - "$TMP/g1.jsonl" "$TMP/g2.jsonl" <<'EOF'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
sys.exit(0 if a[-1]["text"] == b[-1]["text"] and a[-1]["seed"] == 0 and a[-1]["generated_tokens"] == 20 else 1)
EOF
then ok "two run --temp 0 give the same text (seed 0)"; else bad "--temp 0 not repeatable: $(tail -c 300 "$TMP/g1.jsonl")"; fi
# --temp T sets the first step's temperature (the schedule keeps its shape).
"$BIN" run -p Hello -n 4 --temp 0.5 $FAST --seed 1 --json >"$TMP/t.jsonl" 2>/dev/null
if python3 -c 'import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][0]; sys.exit(0 if s["event"]=="step" and abs(s["temperature"]-0.5)<1e-6 else 1)' "$TMP/t.jsonl"; then
  ok "--temp 0.5: the first step runs at 0.5"
else
  bad "--temp 0.5: $(head -c 300 "$TMP/t.jsonl")"
fi
printf 'hi\n' | "$BIN" chat -n 4 --temp 0 $FAST -q >"$TMP/c1" 2>/dev/null
printf 'hi\n' | "$BIN" chat -n 4 --temp 0 $FAST -q >"$TMP/c2" 2>/dev/null
cmp -s "$TMP/c1" "$TMP/c2" && [ -s "$TMP/c1" ] && ok "chat --temp 0 is repeatable" || bad "chat --temp 0 differs"

finish
