#!/usr/bin/env bash
# `dgemma chat` driven through a pipe, on the embedded default model (created
# on first use in a temp DGEMMA_CACHE): two turns reuse the KV cache (the
# prompt and the first, encoded canvas of the reply), /reset starts over,
# /quit stops reading, unknown commands are reported.
#
# usage: chat.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
FAST="--max-denoising-steps 2"

# Two turns, -n 32 = two canvases of 16: generate() encodes the first canvas,
# so turn 1 reuses the first prompt + 16 reply tokens and encodes the rest.
printf 'Hello\nHow are you?\n' | "$BIN" chat -n 32 --seed 5 $FAST --verbose >"$TMP/two.out" 2>"$TMP/two.err"
rc=$?
turn0=$(sed -n 's/.*turn 0: encoded \([0-9]*\) new tokens, reused \([0-9]*\) cached.*/\1 \2/p' "$TMP/two.err")
turn1=$(sed -n 's/.*turn 1: encoded \([0-9]*\) new tokens, reused \([0-9]*\) cached.*/\1 \2/p' "$TMP/two.err")
read -r new0 reused0 <<<"$turn0"
read -r new1 reused1 <<<"$turn1"
if [ $rc -eq 0 ] && [ "${reused0:-x}" = 0 ] && [ -n "${new0:-}" ] && [ "${reused1:-x}" = $((new0 + 16)) ] &&
    [ "${new1:-0}" -gt 18 ]; then
  ok "turn 1 reuses the cache: turn 0 encoded $new0; turn 1 reused $reused1 and encoded $new1 (last canvas + <turn|>\\n + new turn)"
else
  bad "cache reuse: rc $rc, turn0 '$turn0', turn1 '$turn1': $(cat "$TMP/two.err")"
fi
if [ "$(grep -c 'generated tokens  32' "$TMP/two.err")" = 2 ] && [ -s "$TMP/two.out" ]; then
  ok "two replies of 32 tokens printed"
else
  bad "replies: $(cat "$TMP/two.out") $(cat "$TMP/two.err")"
fi
if grep -q "created the default model" "$TMP/two.err"; then ok "first use created the default model"; else bad "no creation note"; fi

# /reset: the same first message encodes the same prompt again from scratch;
# /quit ends the session (the line after it is not read); unknown commands
# are reported and skipped.
printf 'Hello\n/reset\n/bogus\nHello\n/quit\nNot read\n' |
  "$BIN" chat -n 16 --seed 5 $FAST --verbose >"$TMP/reset.out" 2>"$TMP/reset.err"
rc=$?
turns=$(grep -c 'turn [0-9]*: encoded' "$TMP/reset.err")
second=$(sed -n 's/.*turn 1: encoded \([0-9]*\) new tokens, reused \([0-9]*\) cached.*/\1 \2/p' "$TMP/reset.err")
if [ $rc -eq 0 ] && [ "$turns" = 2 ] && [ "$second" = "$new0 0" ] && grep -q "conversation reset" "$TMP/reset.err"; then
  ok "/reset re-encodes the first prompt ($second); /quit stops reading"
else
  bad "/reset: rc $rc, turns $turns, second '$second': $(cat "$TMP/reset.err")"
fi
if grep -q "unknown command /bogus" "$TMP/reset.err"; then ok "unknown command reported"; else bad "no unknown-command note"; fi

# End of input without /quit ends cleanly; empty lines are skipped.
if printf '\n\n' | "$BIN" chat -n 16 --seed 5 $FAST >"$TMP/empty.out" 2>"$TMP/empty.err" && [ ! -s "$TMP/empty.out" ]; then
  ok "empty input: no turns, clean exit"
else
  bad "empty input: $(cat "$TMP/empty.out" "$TMP/empty.err")"
fi

# Same seed, same conversation.
printf 'Hello\nHow are you?\n' | "$BIN" chat -n 32 --seed 5 $FAST -q >"$TMP/again.out" 2>/dev/null
if cmp -s "$TMP/two.out" "$TMP/again.out"; then ok "same seed, same replies"; else bad "replies differ between runs"; fi

# Errors.
if printf 'hi\n' | "$BIN" chat -m "$TMP/nope" >/dev/null 2>"$TMP/err"; then
  bad "missing -m folder accepted"
elif grep -q "$TMP/nope" "$TMP/err"; then
  ok "missing -m folder: $(cat "$TMP/err")"
else
  bad "missing -m folder: $(cat "$TMP/err")"
fi
if "$BIN" chat --help | grep -q "/reset" && "$BIN" chat --help | grep -q "RANDOM WEIGHTS"; then
  ok "--help documents /reset and the random default model"
else
  bad "--help incomplete"
fi

# /help lists the commands (on stderr; stdout holds only replies).
printf '/help\n' | "$BIN" chat -n 16 $FAST >"$TMP/help.out" 2>"$TMP/help.err"
if grep -q "^/help" "$TMP/help.err" && grep -q "^/reset" "$TMP/help.err" && grep -q "^/quit" "$TMP/help.err" &&
    [ ! -s "$TMP/help.out" ]; then
  ok "/help lists /help, /reset and /quit"
else
  bad "/help: $(cat "$TMP/help.out" "$TMP/help.err")"
fi

# -f FILE: the file's text (all its lines) is the first turn, then stdin's lines follow.
printf 'Hello\nthere\n' >"$TMP/first.txt"
printf 'How are you?\n' | "$BIN" chat -f "$TMP/first.txt" -n 16 --seed 5 $FAST --verbose >"$TMP/f.out" 2>"$TMP/f.err"
rc=$?
printf 'Hello there\nHow are you?\n' | "$BIN" chat -n 16 --seed 5 $FAST --verbose >"$TMP/nof.out" 2>"$TMP/nof.err"
turns=$(grep -c 'turn [0-9]*: encoded' "$TMP/f.err")
first_f=$(sed -n 's/.*turn 0: encoded \([0-9]*\) new tokens.*/\1/p' "$TMP/f.err")
first_line=$(sed -n 's/.*turn 0: encoded \([0-9]*\) new tokens.*/\1/p' "$TMP/nof.err")
if [ $rc -eq 0 ] && [ "$turns" = 2 ] && grep -q "first message from $TMP/first.txt" "$TMP/f.err" &&
    [ -n "$first_f" ] && [ -n "$first_line" ] && [ "$first_f" -gt 0 ]; then
  ok "chat -f FILE: the file is turn 0 ($first_f tokens; the one-line 'Hello there': $first_line), stdin's line turn 1"
else
  bad "chat -f: rc $rc, turns $turns: $(cat "$TMP/f.err")"
fi
printf 'hi\n' | "$BIN" chat -f - -n 16 $FAST >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ]; then ok "chat -f -: exit 2 (stdin holds the turns)"; else bad "chat -f -: rc $rc $(cat "$TMP/err")"; fi


# Pictures: /image PATH goes with the next message (its soft tokens are in
# that turn's new tokens, then in the cache); a bad path is reported and the
# session goes on; --image goes with the first message.
IMG="$SRC/tests/data/golden_v/images"
printf '/image %s\nWhat is this?\nAnd now?\n/image /nonexistent.png\nStill there?\n' "$IMG/png_up.png" |
  "$BIN" chat -n 16 --seed 5 $FAST --verbose >"$TMP/img.out" 2>"$TMP/img.err"
img0=$(sed -n 's/.*turn 0: encoded \([0-9]*\) new tokens.*/\1/p' "$TMP/img.err")
plain0=$(sed -n 's/.*turn 0: encoded \([0-9]*\) new tokens.*/\1/p' "$TMP/reset.err" | head -1)
turns=$(grep -c 'turn [0-9]*: encoded' "$TMP/img.err")
if grep -q "png_up.png (.* soft tokens) goes with the next message" "$TMP/img.err" && [ "$turns" = 3 ] &&
    [ "${img0:-0}" -gt $((${plain0:-0} + 10)) ] && grep -q "nonexistent.png" "$TMP/img.err"; then
  ok "/image: the picture's tokens join turn 0 ($img0 new tokens against $plain0 without), a bad path is reported, 3 turns"
else
  bad "/image: turns $turns, img0 '$img0', plain0 '$plain0': $(cat "$TMP/img.err")"
fi
printf 'What is this?\n' | "$BIN" chat -n 16 --seed 5 $FAST --verbose --image "$IMG/wide.jpg" >/dev/null 2>"$TMP/img2.err"
img1=$(sed -n 's/.*turn 0: encoded \([0-9]*\) new tokens.*/\1/p' "$TMP/img2.err")
if [ "${img1:-0}" -gt $((${plain0:-0} + 10)) ]; then ok "--image joins the first message ($img1 new tokens)"; else bad "--image: $(cat "$TMP/img2.err")"; fi

finish
