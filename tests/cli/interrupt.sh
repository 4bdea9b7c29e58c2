#!/usr/bin/env bash
# Ctrl-C: SIGINT stops `run` with its text and summary and
# exit status 130; in `chat` it stops the current reply and the session goes
# on, and a second Ctrl-C at the prompt exits (130); on a terminal (a pty
# here) chat's input line is editable, with a history.
#
# usage: interrupt.sh DGEMMA_BINARY SOURCE_DIR
set -u
BIN=$1
TMP=$(mktemp -d)
export DGEMMA_CACHE="$TMP/cache"
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
"$BIN" run -p hi -n 1 --max-denoising-steps 1 -q >/dev/null 2>&1  # creates the default model
# A background dgemma that misses its SIGINT must not hang the test: killed
# after 120 s (and then its check fails).
watchdog() { (sleep 120 && kill -KILL "$1" 2>/dev/null) >/dev/null 2>&1 & pids+=("$!"); }

# wait_for FILE PATTERN [COUNT]: until FILE has COUNT lines matching (30 s).
wait_for() {
  local i
  for ((i = 0; i < 300; i++)); do
    [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "${3:-1}" ] && return 0
    sleep 0.1
  done
  return 1
}

# run: a long generation, interrupted once its first canvas is out.
"$BIN" run -p hi -n 100000 --seed 1 >"$TMP/run.out" 2>"$TMP/run.err" &
pid=$!
pids+=("$pid")
watchdog "$pid"
wait_for "$TMP/run.out" . 1
sleep 0.5
kill -INT "$pid"
wait "$pid"
rc=$?
if [ $rc -eq 130 ] && grep -q "stop: cancelled" "$TMP/run.err" && grep -q "interrupted (Ctrl-C)" "$TMP/run.err" &&
    grep -q "^seed " "$TMP/run.err" && [ -s "$TMP/run.out" ]; then
  ok "run: SIGINT stops generation, prints the text and the summary, exit 130"
else
  bad "run SIGINT: rc $rc, $(tail -c 400 "$TMP/run.err")"
fi
# --json: the done event says cancelled.
"$BIN" run -p hi -n 100000 --seed 1 --json >"$TMP/run.jsonl" 2>/dev/null &
pid=$!
pids+=("$pid")
watchdog "$pid"
wait_for "$TMP/run.jsonl" '"event": *"canvas"'
kill -INT "$pid"
wait "$pid"
rc=$?
if [ $rc -eq 130 ] && tail -1 "$TMP/run.jsonl" | grep -q '"stop_reason": *"cancelled"'; then
  ok "run --json: SIGINT ends with a done event, stop_reason cancelled"
else
  bad "run --json SIGINT: rc $rc, $(tail -c 300 "$TMP/run.jsonl")"
fi
# Two SIGINTs at once: out immediately. (Wait for the first canvas: until
# the handler is installed, a background job of a script ignores SIGINT.)
"$BIN" run -p hi -n 100000 --seed 1 >"$TMP/twice.out" 2>"$TMP/twice.err" &
pid=$!
pids+=("$pid")
watchdog "$pid"
wait_for "$TMP/twice.out" . 1
kill -INT "$pid"
kill -INT "$pid"
wait "$pid"
rc=$?
[ $rc -eq 130 ] && ok "run: two SIGINTs in a row exit 130" || bad "run two SIGINTs: rc $rc $(cat "$TMP/twice.err")"

# chat on a pipe: SIGINT during a reply stops it; the next line is answered
# in the same session (the cache holds the first turn); two SIGINTs at the
# prompt exit with 130.
mkfifo "$TMP/in"
"$BIN" chat -n 100000 --seed 1 -v <"$TMP/in" >"$TMP/chat.out" 2>"$TMP/chat.err" &
pid=$!
pids+=("$pid")
watchdog "$pid"
exec 7>"$TMP/in"
echo hello >&7
wait_for "$TMP/chat.err" "turn 0: encoded"
sleep 1.5
kill -INT "$pid"
wait_for "$TMP/chat.err" "reply interrupted"
echo again >&7
wait_for "$TMP/chat.err" "turn 1: encoded"
sleep 1.5
kill -INT "$pid"
wait_for "$TMP/chat.err" "reply interrupted" 2
alive=no
kill -0 "$pid" 2>/dev/null && alive=yes
kill -INT "$pid"
wait_for "$TMP/chat.err" "Ctrl-C again to exit"
kill -INT "$pid"
wait "$pid"
rc=$?
exec 7>&-
if [ "$alive" = yes ] && [ $rc -eq 130 ] && grep -q "turn 1: encoded [0-9]* new tokens, reused [1-9]" "$TMP/chat.err" &&
    grep -q "interrupted twice at the prompt" "$TMP/chat.err"; then
  ok "chat: SIGINT stops a reply and keeps the session; two at the prompt exit 130"
else
  bad "chat SIGINT: alive=$alive rc $rc $(grep -v '^[a-z ]*  ' "$TMP/chat.err")"
fi

# chat on a terminal: line editing and history. Keys: "/resett" Enter (an
# unknown command), Up (recalls it), Backspace, Enter ("/reset"); a turn
# typed with a Backspace and arrows; "/quiz" Ctrl-U (clears it) "/quit" Enter.
if python3 - "$BIN" "$TMP/pty.log" <<'EOF'
import os, pty, sys, time, select, signal
signal.alarm(120)
binary, log = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(binary, [binary, "chat", "-n", "4", "--max-denoising-steps", "1", "--seed", "1"])
out = b""
def read_until(token, timeout=30, since=0):
    """Until `token` appears in the output after offset `since`."""
    global out
    end = time.time() + timeout
    while time.time() < end:
        if token in out[since:]:
            return True
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return False
    return token in out[since:]
ok = read_until(b"> ")
os.write(fd, b"/resett\r")
ok = ok and read_until(b"unknown command /resett")
ok = ok and read_until(b"> ", since=out.index(b"unknown command /resett"))  # the next prompt: raw mode again
os.write(fd, b"\x1b[A")        # Up: recalls /resett
time.sleep(0.2)
os.write(fd, b"\x7f\r")        # Backspace, Enter: /reset
ok = ok and read_until(b"conversation reset")
ok = ok and read_until(b"> ", since=out.index(b"conversation reset"))
os.write(fd, b"hellx\x7fo\x1b[D\x1b[C\r")  # edit, arrows, Enter: a turn
time.sleep(0.5)
os.write(fd, b"/quiz\x15/quit\r")  # Ctrl-U clears the line
_, status = os.waitpid(pid, 0)
try:
    while True:
        r, _, _ = select.select([fd], [], [], 0.2)
        if not r:
            break
        out += os.read(fd, 4096)
except OSError:
    pass
open(log, "wb").write(out)
sys.exit(0 if ok and os.waitstatus_to_exitcode(status) == 0 and b"unknown command /quiz" not in out else 1)
EOF
then
  ok "chat on a pty: arrows, Backspace, Ctrl-U and Up-arrow history edit the line"
else
  bad "chat line editing: $(tr -d '\033' <"$TMP/pty.log" | tail -c 600)"
fi
# Ctrl-C twice at a terminal prompt exits 130.
if python3 - "$BIN" <<'EOF'
import os, pty, sys, time, select, signal
signal.alarm(120)
binary = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execv(binary, [binary, "chat", "-n", "4", "--max-denoising-steps", "1"])
out = b""
end = time.time() + 30
while b"> " not in out and time.time() < end:
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        out += os.read(fd, 4096)
os.write(fd, b"abc\x03")
time.sleep(0.3)
os.write(fd, b"\x03")
_, status = os.waitpid(pid, 0)
sys.exit(0 if os.waitstatus_to_exitcode(status) == 130 else 1)
EOF
then ok "chat on a pty: Ctrl-C twice at the prompt exits 130"; else bad "chat pty Ctrl-C twice"; fi

# chat on a terminal: keys typed while a reply streams are not echoed into
# the reply; they wait, and the next prompt shows them as the line being
# typed (Enter then sends them as the next turn).
if python3 - "$BIN" "$TMP/typeahead.log" <<'EOF'
import os, pty, sys, time, select, signal
signal.alarm(120)
binary, log = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(binary, [binary, "chat", "-n", "128", "--max-denoising-steps", "4", "--seed", "1", "--verbose"])
out = b""
def read_until(token, timeout=60, since=0):
    global out
    end = time.time() + timeout
    while time.time() < end:
        if token in out[since:]:
            return True
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return False
    return token in out[since:]
ok = read_until(b"> ")
os.write(fd, b"Hello\r")
PROMPT = b"\r> \x1b[K"  # the line editor's prompt (reply text holds no ESC)
ok = ok and read_until(b"turn 0: encoded") and read_until(b"\n", since=out.index(b"turn 0: encoded"))
reply_start = out.index(b"\n", out.index(b"turn 0: encoded")) + 1 if ok else len(out)
end = time.time() + 60
while ok and len(out) == reply_start and time.time() < end:  # the first committed canvas: the reply streams
    read_until(b"\x00", timeout=0.1)
ok = ok and len(out) > reply_start
os.write(fd, b"QQtypedQQ")
ok = ok and read_until(PROMPT, since=reply_start)  # the reply ended: the next prompt
prompt_at = out.index(PROMPT, reply_start) if ok else len(out)
during = out[reply_start:prompt_at]
ok = ok and read_until(b"QQtypedQQ", timeout=10, since=prompt_at)
os.write(fd, b"\r")
ok = ok and read_until(b"turn 1: encoded", since=prompt_at)
os.write(fd, b"/quit\r")
_, status = os.waitpid(pid, 0)
open(log, "wb").write(out)
sys.exit(0 if ok and b"QQtypedQQ" not in during and os.waitstatus_to_exitcode(status) == 0 else 1)
EOF
then
  ok "chat on a pty: keys typed during a reply are not echoed into it; the next prompt holds them"
else
  bad "chat type-ahead: $(tr -d '\033' <"$TMP/typeahead.log" | tail -c 800)"
fi

finish
