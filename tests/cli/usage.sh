#!/usr/bin/env bash
# Command-line conventions: --version/-V; usage errors
# (unknown option or command, missing or malformed value) exit 2 with a
# "did you mean" hint where one is close, runtime errors exit 1; tokenize
# falls back to the default model's tokenizer and its output feeds
# generate --prompt-ids; an empty prompt warns; doctor knows cuda.
#
# usage: usage.sh DGEMMA_BINARY SOURCE_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
cli_test_setup "$@"

# expect_exit DESCRIPTION CODE STDERR_SUBSTRING COMMAND...
expect_exit() {
  local what=$1 code=$2 want=$3 rc
  shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ $rc -eq "$code" ] && grep -qF -- "$want" "$TMP/err"; then
    ok "$what: exit $rc: $(grep -F -- "$want" "$TMP/err" | head -1 | head -c 140)"
  else
    bad "$what: exit $rc (want $code), stderr: $(head -c 400 "$TMP/err")"
  fi
}

version=$("$BIN" --version)
if [[ "$version" =~ ^dgemma\ [0-9]+\.[0-9]+\.[0-9]+ ]] && [ "$("$BIN" -V)" = "$version" ]; then
  ok "--version and -V print '$version'"
else
  bad "--version printed '$version'"
fi

expect_exit "unknown option" 2 "did you mean --seed?" "$BIN" run -p hi --sed 1
expect_exit "unknown option, nothing close" 2 "unknown option '--zzzzzz'" "$BIN" run -p hi --zzzzzz
expect_exit "missing value" 2 "option -p needs a value" "$BIN" run -p
expect_exit "malformed integer" 2 "expected an integer, got 'x'" "$BIN" run -p hi -n x
expect_exit "malformed number" 2 "expected a number, got 'warm'" "$BIN" run -p hi --temp warm
expect_exit "negative temperature" 2 "--temp" "$BIN" run -p hi --temp -1
expect_exit "no prompt" 2 "-p" "$BIN" run
# Sampling controls (docs/model.md §3.7): out of range is a usage error naming the flag.
expect_exit "top-p 0" 2 "option --top-p: must be in (0, 1]" "$BIN" run -p hi --top-p 0
expect_exit "top-k negative" 2 "option --top-k: must be an integer >= 0" "$BIN" run -p hi --top-k -1
expect_exit "top-k fractional" 2 "option --top-k: expected" "$BIN" chat --top-k 2.5
expect_exit "min-p above 1" 2 "option --min-p: must be in [0, 1]" "$BIN" run -p hi --min-p 1.5
expect_exit "presence penalty out of range" 2 "option --presence-penalty: must be in [-2, 2]" \
  "$BIN" run -p hi --presence-penalty 3
expect_exit "frequency penalty malformed" 2 "option --frequency-penalty: expected a number" \
  "$BIN" run -p hi --frequency-penalty lots
expect_exit "repeat penalty 0" 2 "option --repeat-penalty: must be a finite number > 0" \
  "$BIN" run -p hi --repeat-penalty 0
expect_exit "unknown command" 2 "did you mean chat?" "$BIN" chta
expect_exit "unknown top-level option" 2 "did you mean --version?" "$BIN" --verison
expect_exit "no command" 2 "usage:" "$BIN"
# A value out of range or not among a flag's choices is a usage error too,
# whether the flag parser, the generation config or a lower layer's parser
# (placement strategies, sizes) finds it; it is reported before any model loads.
expect_exit "-n 0" 2 "option -n/--max-new-tokens: expected an integer >= 1, got 0" "$BIN" run -p hi -n 0
expect_exit "--max-denoising-steps 0" 2 "option --max-denoising-steps: expected an integer >= 1, got 0" \
  "$BIN" run -p hi --max-denoising-steps 0
expect_exit "--threads -1" 2 "option --threads: expected an integer >= 0, got -1" "$BIN" run -p hi --threads -1
expect_exit "t_max below t_min" 2 "must be greater than t_min" "$BIN" run -p hi --t-min 0.5 --t-max 0.1
expect_exit "--precision typo" 2 "got 'bf17' (did you mean bf16?)" "$BIN" run -p hi --precision bf17
expect_exit "plan --strategy nope" 2 "option --strategy: unknown placement strategy 'nope'" \
  "$BIN" plan -m "$SRC/tests/data/golden_a" --devices cpu0=1GiB --strategy nope
expect_exit "plan --margin" 2 "option --margin" "$BIN" plan -m "$SRC/tests/data/golden_a" --devices cpu0=1GiB --margin lots
expect_exit "plan --kv-dtype" 2 "option --kv-dtype: expected bf16 or fp32, got 'fp16'" \
  "$BIN" plan -m "$SRC/tests/data/golden_a" --devices cpu0=1GiB --kv-dtype fp16
expect_exit "bench foo" 2 "unknown benchmark 'foo'" "$BIN" bench foo
expect_exit "bench typo" 2 "(did you mean step?)" "$BIN" bench stpe
expect_exit "quantize without --format" 2 "quantize: give --format" "$BIN" quantize "$TMP/in" "$TMP/out"
expect_exit "quantize --format typo" 2 "option --format: expected" "$BIN" quantize "$TMP/in" "$TMP/out" --format nf5
expect_exit "doctor --steps 0" 2 "option --steps: expected an integer in [1, 1000], got 0" \
  "$BIN" doctor -m "$SRC/tests/data/golden_a" --steps 0
expect_exit "inspect --context -1" 2 "option --context: expected an integer >= 0" \
  "$BIN" inspect "$SRC/tests/data/golden_a" --context -1
expect_exit "runtime error: missing model folder" 1 "no such checkpoint folder" "$BIN" run -m "$TMP/nope" -p hi
expect_exit "malformed --prompt-ids" 2 "'x' is not a token id" \
  "$BIN" generate -m "$TMP/nope" --prompt-ids "2 x"

# tokenize without -m uses the default model's tokenizer; its output (space-
# separated ids, a newline) is what generate --prompt-ids takes, as is JSON.
ids=$("$BIN" tokenize --add-special "Hello world" 2>"$TMP/tok.err")
if [ $? -eq 0 ] && [[ "$ids" =~ ^2\ [0-9]+\ [0-9]+$ ]]; then
  ok "tokenize without -m: default model tokenizer: '$ids'"
else
  bad "tokenize without -m: '$ids' $(cat "$TMP/tok.err")"
fi
M="$DGEMMA_CACHE/default-model-v2"
G="-m $M -n 4 --max-denoising-steps 1 --seed 3 -q"
comma=$("$BIN" generate $G --prompt-ids "$(tr ' ' ',' <<<"$ids")")
spaced=$("$BIN" generate $G --prompt-ids "$("$BIN" tokenize --add-special "Hello world")")
json=$("$BIN" generate $G --prompt-ids "[$(sed 's/ /, /g' <<<"$ids")]")
stdin=$("$BIN" tokenize --add-special "Hello world" | "$BIN" generate $G --prompt-ids -)
if [ -n "$comma" ] && [ "$comma" = "$spaced" ] && [ "$comma" = "$json" ] && [ "$comma" = "$stdin" ]; then
  ok "generate --prompt-ids takes tokenize's output, commas, a JSON list and '-' (stdin) alike"
else
  bad "prompt-ids formats differ: '$comma' / '$spaced' / '$json' / '$stdin'"
fi

# An empty prompt warns (it still runs).
if "$BIN" run -p "" -n 2 --max-denoising-steps 1 --seed 1 >/dev/null 2>"$TMP/empty.err" &&
    grep -q "warning: the prompt is empty" "$TMP/empty.err"; then
  ok "run -p '': warning on stderr"
else
  bad "empty prompt: $(cat "$TMP/empty.err")"
fi

# The help says what the code does: the sampler runs on the --backend (the
# sample op, docs/cuda.md §1.1), and serve batches the decoder passes of
# concurrent requests (README "Concurrency and limits").
if "$BIN" run --help | tr -s ' \n' ' ' | grep -q "sampler (temperature, entropy, argmax, draw) runs there too" &&
    ! "$BIN" run --help | grep -q "always runs on the CPU"; then
  ok "run --help: the sampler runs on the --backend"
else
  bad "run --help about the sampler: $("$BIN" run --help | grep -A2 -- --backend)"
fi
if ! "$BIN" serve --help >/dev/null 2>&1; then
  echo "skip serve --help: this build has no server"
elif "$BIN" serve --help | grep -q "denoising steps" &&
    "$BIN" serve --help | grep -q "are batched" && ! "$BIN" serve --help | grep -q "pass by pass"; then
  ok "serve --help: denoising steps of concurrent requests are batched"
else
  bad "serve --help about concurrency: $("$BIN" serve --help | grep -B1 -A3 -- --parallel | head -8)"
fi

# doctor: cuda is a listed backend; without a GPU the error says so plainly.
if "$BIN" doctor --help | grep -q "cuda"; then ok "doctor --help lists cuda"; else bad "doctor --help lacks cuda"; fi
# (A DGEMMA_CUDA=EMULATE build, the sanitizer build, has a CUDA device without
# a GPU: there the check does not apply and is reported as skipped.)
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then
  if "$BIN" doctor -m "$SRC/tests/data/golden_a" --backend cuda --steps 1 >"$TMP/out" 2>"$TMP/err" &&
      grep -q "emulated device" "$TMP/err"; then
    echo "skip doctor --backend cuda without a GPU: this build emulates a CUDA device (DGEMMA_CUDA=EMULATE)"
  else
    expect_exit "doctor --backend cuda without a GPU" 1 "no CUDA device" \
      "$BIN" doctor -m "$SRC/tests/data/golden_a" --backend cuda
    if grep -qi "driver version" "$TMP/err"; then bad "the no-GPU message talks about driver versions"; fi
  fi
fi

finish
