#!/usr/bin/env bash
# Progress bars: with stderr on a terminal (a pty here)
# `quantize` draws its bar in place and ends its line before the summary;
# -q draws none; a load that takes no noticeable time (the golden tiny
# checkpoint) draws none either; with stderr not a terminal the output is the
# plain lines of before.
#
# usage: progress.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"
GOLDEN="$SRC/tests/data/golden_a"

# on_pty LOG COMMAND...: runs COMMAND with stderr on a pty (stdout to
# $TMP/stdout), writes what the pty received to LOG; fails with the command.
on_pty() {
  local log=$1
  shift
  python3 - "$log" "$TMP/stdout" "$@" <<'EOF'
import os, pty, select, signal, subprocess, sys
signal.alarm(60)
log, stdout, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
master, slave = pty.openpty()
with open(stdout, "wb") as out:
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=slave)
os.close(slave)
data = b""
while True:
    r, _, _ = select.select([master], [], [], 0.1)
    if r:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the command closed its side
            break
        if not chunk:
            break
        data += chunk
    elif p.poll() is not None:
        break
open(log, "wb").write(data)
sys.exit(p.wait())
EOF
}

if on_pty "$TMP/q.log" "$BIN" quantize "$GOLDEN" "$TMP/nf4" --format nf4 &&
    python3 - "$TMP/q.log" <<'EOF'
import sys
s = open(sys.argv[1], "rb").read().replace(b"\r\n", b"\n")  # the pty maps \n to \r\n
# The bar is redrawn with \r; its last state (100%) ends with a newline, and
# the summary follows on its own line. No per-10% log lines on a terminal.
bar = s.split(b"\n")[0]
last = bar.split(b"\r")[-1]
ok = (b"\rquantize [" in bar and b"100.0%" in last and b"MiB" in last and
      b"\nquantize: " in s and b"tensors quantized" in s and b"quantize: 100.0% (" not in s)
sys.exit(0 if ok else 1)
EOF
then
  ok "quantize on a terminal: bar redrawn in place, final line kept, summary on its own line"
else
  bad "quantize on a terminal: $(od -c "$TMP/q.log" | head -20)"
fi

if on_pty "$TMP/qq.log" "$BIN" quantize "$GOLDEN" "$TMP/nf4q" --format nf4 -q && ! grep -q "quantize \[" "$TMP/qq.log"; then
  ok "quantize -q on a terminal: no bar"
else
  bad "quantize -q on a terminal: $(head -c 400 "$TMP/qq.log")"
fi

if "$BIN" quantize "$GOLDEN" "$TMP/nf4p" --format nf4 2>"$TMP/p.err" >/dev/null &&
    ! grep -q $'\r' "$TMP/p.err" && grep -q "^quantize: 100.0% (" "$TMP/p.err"; then
  ok "quantize to a pipe: plain lines, no carriage returns"
else
  bad "quantize to a pipe: $(head -c 400 "$TMP/p.err")"
fi

# A fast load (milliseconds) shows no bar, with or without --quantize (the
# summary on stderr is plain lines).
G=(generate -m "$GOLDEN" --prompt-ids 2,3 -n 1 --max-denoising-steps 1 --seed 1)
for extra in "" "--quantize nf4"; do
  # shellcheck disable=SC2086
  if on_pty "$TMP/r.log" "$BIN" "${G[@]}" $extra &&
      ! grep -q "loading" "$TMP/r.log" && ! grep -q $'\r.' "$TMP/r.log" && grep -q "prompt tokens" "$TMP/r.log" &&
      [ -s "$TMP/stdout" ]; then
    ok "generate ${extra:-(plain)} on a terminal: a fast load draws no bar"
  else
    bad "generate ${extra:-(plain)} on a terminal: $(head -c 400 "$TMP/r.log")"
  fi
done

if "$BIN" run --help | grep -q -- "--no-progress"; then ok "run --help lists --no-progress"; else bad "run --help lacks --no-progress"; fi
if "$BIN" "${G[@]}" --no-progress >/dev/null 2>&1; then
  ok "generate accepts --no-progress"
else
  bad "generate --no-progress failed"
fi

finish
