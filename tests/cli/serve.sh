#!/usr/bin/env bash
# `dgemma serve` on the embedded default model, driven over loopback with
# curl, with the official `openai` npm client, the Vercel AI SDK and LangChain
# (tests/server/node, pinned by its package-lock.json; installed with `npm ci`
# under the build folder): health, models, chat and completions (plain and
# streamed), max_tokens and determinism, every kind of bad request (JSON
# errors with the right 4xx), 429 when the queue is full, disconnects that
# cancel work, concurrent streams, a bounded load test (concurrent streams + a
# storm of bad requests, then a correct answer) and hostile traffic (a burst,
# slow clients, huge prompts, raw HTTP framing, deadlines and caps). Under AddressSanitizer (detected from the
# binary) the load is scaled down and the server's exit must be leak-free.
#
# usage: serve.sh DGEMMA_BINARY SOURCE_DIR
# env:   DGEMMA_SERVE_STREAMS, DGEMMA_SERVE_BAD_REQUESTS override the load.
set -u
BIN=$(realpath "$1")
SRC=$2
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  jobs -p | xargs -r kill 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
export DGEMMA_CACHE="$TMP/cache"
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"

if grep -qa __asan_init "$BIN"; then
  ASAN=1 STREAMS=${DGEMMA_SERVE_STREAMS:-16} BAD=${DGEMMA_SERVE_BAD_REQUESTS:-2000} STARTUP=300
else
  ASAN=0 STREAMS=${DGEMMA_SERVE_STREAMS:-100} BAD=${DGEMMA_SERVE_BAD_REQUESTS:-10000} STARTUP=120
fi

# ---- the openai client: npm ci into the build folder, reused while the lock file is unchanged
NODE_DIR="$(dirname "$BIN")/serve-test-node"
if ! cmp -s "$SRC/tests/server/node/package-lock.json" "$NODE_DIR/package-lock.json" ||
    [ ! -d "$NODE_DIR/node_modules/openai" ]; then
  rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR"
  cp "$SRC/tests/server/node/package.json" "$SRC/tests/server/node/package-lock.json" "$NODE_DIR/"
  if ! (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >"$TMP/npm.log" 2>&1); then
    cat "$TMP/npm.log"
    rm -rf "$NODE_DIR"
    bad "npm ci of the openai client failed (is the npm registry reachable?)"
    echo "$pass passed, $fail failed"
    exit 1
  fi
fi
cp "$SRC"/tests/server/node/*.mjs "$NODE_DIR/"

# ---- start a server on a free port; sets SERVER_PID and BASE
start_server() {
  local name=$1
  shift
  rm -f "$TMP/$name.port"
  "$BIN" serve --port 0 --port-file "$TMP/$name.port" "$@" 2>"$TMP/$name.err" &
  SERVER_PID=$!
  local waited=0
  while [ ! -s "$TMP/$name.port" ]; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null || [ $waited -ge $((STARTUP * 10)) ]; then
      bad "$name server did not start: $(cat "$TMP/$name.err")"
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  BASE="http://127.0.0.1:$(cat "$TMP/$name.port")"
}

# SIGTERM, then the exit status must be 0 and (under ASan) no sanitizer report.
stop_server() {
  local name=$1
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID"
  local rc=$?
  SERVER_PID=""
  if [ $rc -eq 0 ] && ! grep -q "Sanitizer" "$TMP/$name.err"; then
    ok "$name server stops cleanly on SIGTERM (exit 0, no sanitizer report)"
  else
    bad "$name server exit $rc: $(tail -30 "$TMP/$name.err")"
  fi
}

# post PATH JSON -> body in $TMP/body, status in $STATUS
post() {
  STATUS=$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$2" "$BASE$1")
}
json_get() { node -e "const v=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));console.log(String(eval('v.'+process.argv[2])))" "$TMP/body" "$1"; }
# expect_api_error NAME STATUS PARAM-or-null: the last response is that JSON error.
expect_api_error() {
  local type param
  type=$(json_get 'error.type' 2>/dev/null)
  param=$(json_get 'error.param' 2>/dev/null)
  if [ "$STATUS" = "$2" ] && [ -n "$type" ] && [ "$param" = "$3" ]; then
    ok "$1: $STATUS $(json_get 'error.message' | cut -c1-90)"
  else
    bad "$1: status $STATUS (want $2), param '$param' (want $3): $(head -c 300 "$TMP/body")"
  fi
}

FAST=(--max-denoising-steps 2 -n 16)
MAX_BODY=65536
start_server main "${FAST[@]}" --parallel 2 --max-queue 256 --max-body-size $MAX_BODY --max-prompt-tokens 256 \
  --max-tokens-limit 100000 || { echo "$pass passed, $fail failed"; exit 1; }
MODEL=dgemma-default

# ---- health, models, metrics
if [ "$(curl -s "$BASE/health")" = '{"status":"ok","slots":2,"in_flight":0,"queued":0}' ]; then ok "/health"; else bad "/health: $(curl -s "$BASE/health")"; fi
if curl -s "$BASE/v1/models" | grep -q "\"id\": \"$MODEL\""; then ok "/v1/models"; else bad "/v1/models: $(curl -s "$BASE/v1/models")"; fi
if curl -s "$BASE/metrics" | grep -q '^# TYPE dgemma_time_to_first_token_seconds histogram'; then ok "/metrics is Prometheus text"; else bad "/metrics"; fi

# ---- chat with curl: max_tokens exact, deterministic, stream = non-stream
CHAT='{"model":"'$MODEL'","messages":[{"role":"user","content":"Hello"}],"max_tokens":5,"seed":7}'
post /v1/chat/completions "$CHAT"
CONTENT=$(json_get 'choices[0].message.content')
if [ "$STATUS" = 200 ] && [ -n "$CONTENT" ] && [ "$(json_get 'usage.completion_tokens')" = 5 ] &&
    [ "$(json_get 'choices[0].finish_reason')" = length ]; then
  ok "curl chat: 5 tokens, finish_reason length: $CONTENT"
else
  bad "curl chat: $STATUS $(cat "$TMP/body")"
fi
post /v1/chat/completions "$CHAT"
if [ "$(json_get 'choices[0].message.content')" = "$CONTENT" ]; then ok "curl chat: same seed, same answer"; else bad "curl chat not deterministic"; fi
# n = 2 with seed 6: choice 1 used seed 7, so it is the answer above.
post /v1/chat/completions '{"model":"'$MODEL'","messages":[{"role":"user","content":"Hello"}],"max_tokens":5,"seed":6,"n":2}'
if [ "$STATUS" = 200 ] && [ "$(json_get 'choices[1].message.content')" = "$CONTENT" ] &&
    [ "$(json_get 'choices[1].index')" = 1 ] && [ "$(json_get 'usage.completion_tokens')" = 10 ] &&
    [ "$(json_get 'dgemma.seed')" = 6 ]; then
  ok "curl chat n=2: two choices, choice 1 is seed 7's answer, usage counts both"
else
  bad "curl chat n=2: $STATUS $(head -c 600 "$TMP/body")"
fi
# logprobs: one entry per answer token, heading its own top_logprobs; the answer is unchanged.
post /v1/chat/completions '{"model":"'$MODEL'","messages":[{"role":"user","content":"Hello"}],"max_tokens":5,"seed":7,"logprobs":true,"top_logprobs":2}'
if [ "$STATUS" = 200 ] && [ "$(json_get 'choices[0].message.content')" = "$CONTENT" ] &&
    [ "$(json_get 'choices[0].logprobs.content.length')" = 5 ] &&
    [ "$(json_get 'choices[0].logprobs.content[4].top_logprobs[0].logprob')" = "$(json_get 'choices[0].logprobs.content[4].logprob')" ]; then
  ok "curl chat logprobs: 5 tokens with 2 alternatives each, same answer"
else
  bad "curl chat logprobs: $STATUS $(head -c 600 "$TMP/body")"
fi
# seed -1: the server chooses; the reported seed is a plain integer and, sent back, gives the same answer.
post /v1/chat/completions "${CHAT/\"seed\":7/\"seed\":-1}"
CHOSEN_TEXT=$(json_get 'choices[0].message.content')
CHOSEN=$(grep -o '"seed": *[0-9.e+-]*' "$TMP/body" | grep -o '[0-9.e+-]*$')
post /v1/chat/completions "${CHAT/\"seed\":7/\"seed\":$CHOSEN}"
if [[ "$CHOSEN" =~ ^[0-9]+$ ]] && [ "$STATUS" = 200 ] && [ "$(json_get 'choices[0].message.content')" = "$CHOSEN_TEXT" ] &&
    [ "$(json_get 'dgemma.seed')" = "$CHOSEN" ]; then
  ok "curl chat: seed -1 reports seed $CHOSEN, which reproduces the answer"
else
  bad "curl chat seed -1: reported '$CHOSEN', then $STATUS $(cat "$TMP/body")"
fi
curl -sN -H 'Content-Type: application/json' -d "${CHAT%\}},\"stream\":true}" "$BASE/v1/chat/completions" >"$TMP/sse"
STREAMED=$(node -e '
  const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter((l) => l.startsWith("data: "));
  if (lines.pop() !== "data: [DONE]") throw new Error("no [DONE]");
  let text = "", finish = null;
  for (const l of lines) { const c = JSON.parse(l.slice(6)); const ch = c.choices[0]; if (ch && ch.delta.content) text += ch.delta.content; if (ch && ch.finish_reason) finish = ch.finish_reason; }
  if (finish !== "length") throw new Error("finish " + finish);
  process.stdout.write(text);' "$TMP/sse" 2>&1)
if [ "$STREAMED" = "$CONTENT" ]; then ok "curl stream: SSE chunks add up to the same text, then [DONE]"; else bad "curl stream: '$STREAMED' vs '$CONTENT': $(head -c 600 "$TMP/sse")"; fi

# ---- tool calling (docs/server.md §7): the tiny model answers noise, so only the shape is checked
TOOLS='"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}]'
# tool_shape: the body in $TMP/body is a chat.completion whose message is text or well-formed tool calls.
tool_shape() {
  node -e '
    const v = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const c = v.choices[0], m = c.message;
    if (v.object !== "chat.completion" || m.role !== "assistant") throw new Error("not a chat.completion");
    if (c.finish_reason === "tool_calls") {
      if (!m.tool_calls.length) throw new Error("tool_calls finish without calls");
      for (const t of m.tool_calls) {
        if (!t.id || t.type !== "function" || t.function.name !== "get_weather") throw new Error("bad call");
        if (typeof JSON.parse(t.function.arguments) !== "object") throw new Error("arguments not an object");
      }
    } else if (!["stop", "length"].includes(c.finish_reason) || typeof m.content !== "string" || m.tool_calls) {
      throw new Error("bad message");
    }
    process.stdout.write(c.finish_reason);' "$TMP/body" 2>&1
}
post /v1/chat/completions '{"messages":[{"role":"user","content":"Weather in Paris?"}],'"$TOOLS"',"max_tokens":8,"seed":1}'
if [ "$STATUS" = 200 ] && SHAPE=$(tool_shape); then ok "curl chat with tools: 200, $SHAPE"; else bad "curl chat with tools: $STATUS $SHAPE $(head -c 400 "$TMP/body")"; fi
post /v1/chat/completions '{"messages":[{"role":"user","content":"Weather in Paris?"},
  {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}}]},
  {"role":"tool","tool_call_id":"c1","content":"18C, sunny"}],'"$TOOLS"',"tool_choice":{"type":"function","function":{"name":"get_weather"}},"max_tokens":8}'
if [ "$STATUS" = 200 ] && SHAPE=$(tool_shape); then ok "curl chat with a call, its result and a named tool_choice: 200, $SHAPE"; else bad "curl tool history: $STATUS $SHAPE $(head -c 400 "$TMP/body")"; fi
curl -sN -H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"Weather?"}],'"$TOOLS"',"tool_choice":"required","max_tokens":8,"stream":true}' \
  "$BASE/v1/chat/completions" >"$TMP/sse"
if FINISH=$(node -e '
  const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter((l) => l.startsWith("data: "));
  if (lines.pop() !== "data: [DONE]") throw new Error("no [DONE]");
  const last = JSON.parse(lines.pop().slice(6)).choices[0];
  if (last.finish_reason === "tool_calls" && !last.delta.tool_calls[0].function.name) throw new Error("no call in the finishing chunk");
  if (!["stop", "length", "tool_calls"].includes(last.finish_reason)) throw new Error("finish " + last.finish_reason);
  process.stdout.write(last.finish_reason);' "$TMP/sse" 2>&1); then
  ok "curl stream with tool_choice required: [DONE] after a $FINISH finish"
else
  bad "curl stream with tools: $FINISH $(head -c 600 "$TMP/sse")"
fi
post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","strict":true}}]}'
expect_api_error "tools: strict true" 400 tools[0].function.strict
post /v1/chat/completions '{"messages":[{"role":"tool","tool_call_id":"c1","content":"x"}]}'
expect_api_error "a tool message that answers no call" 400 "messages[0].role"

# ---- bad requests with curl
post /v1/chat/completions '{"messages": [{"role": "user"'
expect_api_error "malformed JSON" 400 null
post /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}'
expect_api_error "wrong type" 400 max_tokens
post /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}'
expect_api_error "negative max_tokens" 400 max_tokens
post /v1/chat/completions '{"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}'
expect_api_error "unknown model" 404 model
post /v1/completions "$(printf '{"prompt": "caf\xe9"}')"
expect_api_error "invalid UTF-8" 400 null
post /v1/completions '{"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}'
expect_api_error "too many stop strings" 400 stop
post /v1/chat/completions "{\"messages\": [{\"role\": \"user\", \"content\": \"$(printf 'word %.0s' $(seq 400))\"}]}"
expect_api_error "prompt over --max-prompt-tokens" 400 messages
head -c $((MAX_BODY + 10)) /dev/zero | tr '\0' ' ' >"$TMP/big"
STATUS=$(curl -s -o "$TMP/body" -w '%{http_code}' --data-binary @"$TMP/big" "$BASE/v1/completions")
expect_api_error "body over --max-body-size" 413 null
STATUS=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE/v1/unknown")
expect_api_error "unknown route" 404 null
STATUS=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE/v1/chat/completions")
expect_api_error "GET on a POST route" 405 null
if curl -s "$BASE/health" | grep -q '"status":"ok"'; then ok "still healthy after the bad requests"; else bad "unhealthy after bad requests"; fi

# ---- utility routes (llama.cpp's /tokenize, /detokenize, /props; the context length in /v1/models)
post /tokenize '{"content": "Hello world", "add_special": true}'
IDS=$(json_get 'tokens.join(" ")')
if [ "$STATUS" = 200 ] && [ "$IDS" = "$("$BIN" tokenize --add-special "Hello world")" ]; then
  ok "/tokenize: the ids of dgemma tokenize: $IDS"
else
  bad "/tokenize: $STATUS $(cat "$TMP/body")"
fi
post /tokenize '{"content": "Hi \u0f8c", "with_pieces": true}'
if [ "$STATUS" = 200 ] && [ "$(json_get 'tokens[0].piece')" = Hi ] && [ "$(json_get 'tokens.slice(-3).map(t => t.piece[0]).join(" ")')" = "224 190 140" ]; then
  ok "/tokenize with_pieces: text pieces, and the bytes of byte-fallback tokens (U+0F8C = E0 BE 8C)"
else
  bad "/tokenize with_pieces: $STATUS $(cat "$TMP/body")"
fi
post /detokenize "{\"tokens\": [${IDS// /, }]}"
if [ "$STATUS" = 200 ] && [ "$(json_get content)" = "<bos>Hello world" ]; then ok "/detokenize: the text again"; else bad "/detokenize: $STATUS $(cat "$TMP/body")"; fi
post /detokenize '{"tokens": [2, 99999999]}'
expect_api_error "/detokenize: an id outside the vocabulary" 400 tokens
if grep -q "99999999" "$TMP/body"; then ok "/detokenize: the error names the id"; else bad "/detokenize error: $(cat "$TMP/body")"; fi
post /tokenize '{"content": 5}'
expect_api_error "/tokenize: wrong type" 400 content
post /tokenize '{"content": "x"'
expect_api_error "/tokenize: malformed JSON" 400 null
STATUS=$(curl -s -o "$TMP/body" -w '%{http_code}' --data-binary @"$TMP/big" "$BASE/tokenize")
expect_api_error "/tokenize: body over --max-body-size" 413 null
STATUS=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE/props")
if [ "$STATUS" = 200 ] && [ "$(json_get model)" = "$MODEL" ] && [ "$(json_get total_slots)" = 2 ] &&
    [ "$(json_get default_generation_settings.params.max_denoising_steps)" = 2 ] &&
    [ "$(json_get default_generation_settings.params.max_tokens)" = 16 ] && [ "$(json_get n_ctx)" -gt 0 ]; then
  ok "/props: model, slots, n_ctx $(json_get n_ctx) and the defaults of the flags (-n 16, 2 steps)"
else
  bad "/props: $STATUS $(cat "$TMP/body")"
fi
STATUS=$(curl -s -o "$TMP/body" -w '%{http_code}' "$BASE/v1/models/$MODEL")
CTX=$(json_get max_model_len)
if [ "$STATUS" = 200 ] && [ "$CTX" = "$(json_get meta.n_ctx_train)" ] && [ "$CTX" -gt 0 ] &&
    curl -s "$BASE/v1/models" | grep -q "\"max_model_len\": $CTX"; then
  ok "/v1/models: max_model_len $CTX (no -c: the model's max_position_embeddings, meta.n_ctx_train)"
else
  bad "/v1/models context length: $STATUS $(cat "$TMP/body")"
fi

# ---- a client that disconnects during a non-streamed request cancels it
cancelled() { curl -s "$BASE/metrics" | sed -n 's/^dgemma_generations_total{outcome="cancelled"} //p'; }
in_flight() { curl -s "$BASE/metrics" | sed -n 's/^dgemma_sequences_in_flight //p'; }
before=$(cancelled)
curl -s -m 2 -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":100000,"seed":3}' "$BASE/v1/chat/completions" >/dev/null
for _ in $(seq 100); do [ "$(in_flight)" = 0 ] && [ "$(cancelled)" = $((before + 1)) ] && break; sleep 0.1; done
if [ "$(in_flight)" = 0 ] && [ "$(cancelled)" = $((before + 1)) ]; then
  ok "disconnect during a non-streamed request cancels it and frees the slot"
else
  bad "disconnect: in flight $(in_flight), cancelled $(cancelled) (before $before)"
fi

# ---- the openai client: chat, stream, completions, stop, drafts, concurrency, cancellation, errors
node "$NODE_DIR/client.mjs" "$BASE" "$MODEL" "$CONTENT" "$SRC/tests/data/golden_v/images" >"$TMP/client.out" 2>&1
cat "$TMP/client.out" | grep -v ' passed, '
pass=$((pass + $(grep -c '^ok ' "$TMP/client.out")))
fail=$((fail + $(grep -c '^FAIL ' "$TMP/client.out")))
grep -q ' passed, 0 failed$' "$TMP/client.out" || bad "client.mjs did not finish cleanly: $(tail -5 "$TMP/client.out")"

# ---- the Vercel AI SDK and LangChain: the same answer as curl, plain and streamed
node "$NODE_DIR/sdk_clients.mjs" "$BASE" "$MODEL" "$CONTENT" >"$TMP/sdk.out" 2>&1
cat "$TMP/sdk.out" | grep -v ' passed, '
pass=$((pass + $(grep -c '^ok ' "$TMP/sdk.out")))
fail=$((fail + $(grep -c '^FAIL ' "$TMP/sdk.out")))
grep -q ' passed, 0 failed$' "$TMP/sdk.out" || bad "sdk_clients.mjs did not finish cleanly: $(tail -5 "$TMP/sdk.out")"

# ---- load: concurrent streams, bad-request storm, then a correct answer
node "$NODE_DIR/load.mjs" "$BASE" "$MODEL" "$STREAMS" "$BAD" "$CONTENT" "$MAX_BODY" >"$TMP/load.out" 2>&1
cat "$TMP/load.out" | grep -v ' passed, '
pass=$((pass + $(grep -c '^ok ' "$TMP/load.out")))
fail=$((fail + $(grep -c '^FAIL ' "$TMP/load.out")))
grep -q ' passed, 0 failed$' "$TMP/load.out" || bad "load.mjs did not finish cleanly: $(tail -5 "$TMP/load.out")"
curl -s "$BASE/metrics" | grep -E '^dgemma_(requests_total|generations_total|sequences_in_flight|queue_depth|canvases_total|canvases_not_converged_total|denoising_steps_total)' >"$TMP/metrics"
canvases=$(sed -n 's/^dgemma_canvases_total //p' "$TMP/metrics")
unconverged=$(sed -n 's/^dgemma_canvases_not_converged_total //p' "$TMP/metrics")
if grep -q "^dgemma_requests_total{endpoint=\"other\",code=\"404\"}" "$TMP/metrics" &&
    [ "$(sed -n 's/^dgemma_sequences_in_flight //p' "$TMP/metrics")" = 0 ] &&
    [ -n "$unconverged" ] && [ "${canvases:-0}" -gt 0 ] && [ "$unconverged" -le "$canvases" ]; then
  ok "metrics after the load: $(tr '\n' ' ' <"$TMP/metrics" | cut -c1-400)"
else
  bad "metrics after the load: $(cat "$TMP/metrics")"
fi
stop_server main

# ---- a full queue answers 429; queued and running requests are cancelled by their clients
start_server small "${FAST[@]}" --parallel 1 --max-queue 1 --max-tokens-limit 100000 || { echo "$pass passed, $fail failed"; exit 1; }
LONG='{"messages":[{"role":"user","content":"Hello"}],"max_tokens":100000,"seed":1}'
curl -s -N -H 'Content-Type: application/json' -d "$LONG" "$BASE/v1/chat/completions" >/dev/null &
running=$!
for _ in $(seq 200); do [ "$(in_flight)" = 1 ] && break; sleep 0.05; done
curl -s -N -H 'Content-Type: application/json' -d "$LONG" "$BASE/v1/chat/completions" >/dev/null &
queued=$!
for _ in $(seq 200); do [ "$(curl -s "$BASE/metrics" | sed -n 's/^dgemma_queue_depth //p')" = 1 ] && break; sleep 0.05; done
post /v1/chat/completions "$LONG"
expect_api_error "queue full" 429 null
kill "$queued" "$running" 2>/dev/null
wait "$queued" "$running" 2>/dev/null
for _ in $(seq 100); do [ "$(in_flight)" = 0 ] && [ "$(cancelled)" = 2 ] && break; sleep 0.1; done
if [ "$(in_flight)" = 0 ] && [ "$(cancelled)" = 2 ]; then
  ok "killed clients cancel their running and queued requests"
else
  bad "after killing clients: in flight $(in_flight), cancelled $(cancelled)"
fi
post /v1/chat/completions "$CHAT"
if [ "$STATUS" = 200 ] && [ "$(json_get 'choices[0].message.content')" = "$CONTENT" ]; then
  ok "the freed slot serves the next request (same answer as before)"
else
  bad "after cancellation: $STATUS $(cat "$TMP/body")"
fi
stop_server small

# ---- images: remote URLs only with --allow-remote-images, and the limits (docs/server.md §8)
python3 -u -m http.server --bind 127.0.0.1 --directory "$SRC/tests/data/golden_v/images" 0 >"$TMP/http.out" 2>&1 &
HTTP_PID=$!
for _ in $(seq 50); do grep -q "port" "$TMP/http.out" && break; sleep 0.1; done
HTTP_PORT=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$TMP/http.out" | head -1)
image_request() {  # image_request URL...: one user message with these pictures
  local parts="" u
  for u in "$@"; do parts="$parts{\"type\":\"image_url\",\"image_url\":{\"url\":\"$u\"}},"; done
  post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":[$parts{\"type\":\"text\",\"text\":\"What?\"}]}],\"max_tokens\":4}"
}
if [ -n "$HTTP_PORT" ] && start_server images "${FAST[@]}" --allow-remote-images --max-images 1 --max-image-bytes 5000; then
  image_request "http://127.0.0.1:$HTTP_PORT/png_up.png"
  if [ "$STATUS" = 200 ]; then ok "--allow-remote-images: an http URL is fetched (200)"; else bad "remote fetch: $STATUS $(head -c 300 "$TMP/body")"; fi
  image_request "http://127.0.0.1:$HTTP_PORT/missing.png"
  expect_api_error "remote picture that answers 404" 400 "messages[0].content[0].image_url"
  image_request "http://127.0.0.1:$HTTP_PORT/jpeg_exif.jpg"
  expect_api_error "remote picture over --max-image-bytes" 400 "messages[0].content[0].image_url"
  image_request "http://127.0.0.1:$HTTP_PORT/png_up.png" "http://127.0.0.1:$HTTP_PORT/png_up.png"
  expect_api_error "two pictures over --max-images 1" 400 "messages"
  image_request "file:///etc/passwd"
  expect_api_error "a file: URL" 400 "messages[0].content[0].image_url"
  stop_server images
else
  bad "no local HTTP server for the remote image test: $(cat "$TMP/http.out")"
fi
kill "$HTTP_PID" 2>/dev/null || true

# ---- hostile traffic: a burst, slow clients, huge prompts, raw HTTP framing
start_server hostile "${FAST[@]}" --parallel 1 --max-queue 8 || { echo "$pass passed, $fail failed"; exit 1; }
node "$NODE_DIR/hostile.mjs" traffic "$BASE" "$MODEL" "$SERVER_PID" >"$TMP/hostile.out" 2>&1
cat "$TMP/hostile.out" | grep -v ' passed, '
pass=$((pass + $(grep -c '^ok ' "$TMP/hostile.out")))
fail=$((fail + $(grep -c '^FAIL ' "$TMP/hostile.out")))
grep -q ' passed, 0 failed$' "$TMP/hostile.out" || bad "hostile.mjs traffic did not finish cleanly: $(tail -5 "$TMP/hostile.out")"
stop_server hostile
start_server limits "${FAST[@]}" --request-timeout 2 --max-connections-per-client 8 ||
  { echo "$pass passed, $fail failed"; exit 1; }
node "$NODE_DIR/hostile.mjs" limits "$BASE" >"$TMP/limits.out" 2>&1
cat "$TMP/limits.out" | grep -v ' passed, '
pass=$((pass + $(grep -c '^ok ' "$TMP/limits.out")))
fail=$((fail + $(grep -c '^FAIL ' "$TMP/limits.out")))
grep -q ' passed, 0 failed$' "$TMP/limits.out" || bad "hostile.mjs limits did not finish cleanly: $(tail -5 "$TMP/limits.out")"
stop_server limits

# ---- flags
if "$BIN" serve --help | grep -q "include_drafts"; then ok "--help documents the drafts extension"; else bad "--help"; fi
if "$BIN" serve --port 70000 2>"$TMP/err"; then bad "--port 70000 accepted"; elif grep -q "port" "$TMP/err"; then ok "bad --port rejected: $(cat "$TMP/err")"; else bad "bad --port: $(cat "$TMP/err")"; fi

finish
