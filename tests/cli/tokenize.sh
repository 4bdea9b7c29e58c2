#!/usr/bin/env bash
# CLI test of `dgemma tokenize` against the tokenizer goldens.
# usage: bash tokenize.sh <dgemma-binary> <source-dir>
set -euo pipefail
BIN=$1
SRC=$2
DATA=$SRC/tests/data/tokenizer
TOK=$DATA/tokenizer.json
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_eq() { [[ "$1" == "$2" ]] || fail "$3: got '$1', want '$2'"; }

# Plain encode / decode, argument and stdin.
expect_eq "$("$BIN" tokenize --tokenizer "$TOK" "Hello world")" "9259 1902" "encode argument"
expect_eq "$("$BIN" tokenize --tokenizer "$TOK" --add-special "Hello world")" "2 9259 1902" "encode --add-special"
expect_eq "$(printf 'Hello world' | "$BIN" tokenize --tokenizer "$TOK")" "9259 1902" "encode stdin"
expect_eq "$("$BIN" tokenize --tokenizer "$TOK" --decode "9259, 1902")" "Hello world" "decode comma list"
expect_eq "$(echo "[2 9259 1902]" | "$BIN" tokenize --tokenizer "$TOK" --decode --skip-special)" "Hello world" "decode stdin"
mkdir "$WORK/model" && ln -s "$(cd "$DATA" && pwd)/tokenizer.json" "$WORK/model/tokenizer.json"
expect_eq "$("$BIN" tokenize -m "$WORK/model" "Hello")" "9259" "-m DIR"

# Every golden case through --jsonl, both directions, and the chat cases.
python3 - "$DATA/golden-visible.jsonl" "$WORK" <<'PY'
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
w = sys.argv[2]
with open(w + "/enc.jsonl", "w") as f, open(w + "/dec.jsonl", "w") as g, open(w + "/chat.jsonl", "w") as h:
    for c in cases:
        if c["category"] == "chat_template":
            h.write(json.dumps({"messages": c["messages"], "add_generation_prompt": c["add_generation_prompt"]}) + "\n")
        else:
            f.write(json.dumps({"text": c["text"]}) + "\n")
            g.write(json.dumps({"ids": c["ids_with_special"]}) + "\n")
PY
"$BIN" tokenize --tokenizer "$TOK" --jsonl < "$WORK/enc.jsonl" > "$WORK/enc.out"
"$BIN" tokenize --tokenizer "$TOK" --jsonl --add-special < "$WORK/enc.jsonl" > "$WORK/enc_special.out"
"$BIN" tokenize --tokenizer "$TOK" --jsonl --decode < "$WORK/dec.jsonl" > "$WORK/dec.out"
"$BIN" tokenize --tokenizer "$TOK" --jsonl --chat < "$WORK/chat.jsonl" > "$WORK/chat.out"
"$BIN" tokenize --tokenizer "$TOK" --jsonl --chat --text < "$WORK/chat.jsonl" > "$WORK/chat_text.out"
python3 - "$DATA/golden-visible.jsonl" "$WORK" <<'PY'
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
w = sys.argv[2]
read = lambda n: [json.loads(l) for l in open(w + "/" + n, encoding="utf-8")]
plain = [c for c in cases if c["category"] != "chat_template"]
chat = [c for c in cases if c["category"] == "chat_template"]
enc, encs, dec, ch, cht = read("enc.out"), read("enc_special.out"), read("dec.out"), read("chat.out"), read("chat_text.out")
assert len(enc) == len(encs) == len(dec) == len(plain), (len(enc), len(plain))
bad = [c["id"] for c, e, s, d in zip(plain, enc, encs, dec)
       if e["ids"] != c["ids"] or s["ids"] != c["ids_with_special"] or d["text"] != c["decoded_with_special"]]
bad += [c["id"] for c, i, t in zip(chat, ch, cht) if i["ids"] != c["ids"] or t["text"] != c["text"]]
if bad:
    sys.exit("golden mismatches: " + ", ".join(bad))
print(f"cli: {len(plain)} text cases and {len(chat)} chat cases match")
PY

# Chat, plain mode: ids and --text.
MSG='[{"role":"user","content":"Hello, how are you?"}]'
expect_eq "$("$BIN" tokenize --tokenizer "$TOK" --chat "$MSG")" "2 105 2364 107 9259 236764 1217 659 611 236881 106 107 105 4368 107" "chat ids"
expect_eq "$(echo "$MSG" | "$BIN" tokenize --tokenizer "$TOK" --chat --text --no-generation-prompt | od -c | head -1)" \
  "$(printf '<bos><start_of_turn>user\nHello, how are you?<end_of_turn>\n' | od -c | head -1)" "chat --text"

# Errors: exit status 1 and a message naming the problem.
expect_error() {  # <needle> <args...>
  local needle=$1; shift
  if "$BIN" tokenize "$@" > /dev/null 2> "$WORK/err" < /dev/null; then fail "expected failure: $*"; fi
  grep -qF -- "$needle" "$WORK/err" || fail "error for '$*' lacks '$needle': $(cat "$WORK/err")"
}
expect_error '"<|turn>"' --tokenizer "$TOK" --chat --template gemma4 "$MSG"
# The roles of the server (one rule): a role it refuses is refused here too,
# in a message list and in --jsonl lines; developer is the system role.
expect_error 'messages[0].role: expected one of system, developer, user, assistant, got "tool"' \
  --tokenizer "$TOK" --chat '[{"role":"tool","content":"x"}]'
if printf '%s\n' '{"messages":[{"role":"narrator","content":"x"}]}' |
    "$BIN" tokenize --tokenizer "$TOK" --jsonl --chat > /dev/null 2> "$WORK/err"; then fail "--jsonl --chat took role narrator"; fi
grep -qF '"narrator"' "$WORK/err" || fail "--jsonl role message: $(cat "$WORK/err")"
expect_eq "$("$BIN" tokenize --tokenizer "$TOK" --chat '[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]')" \
  "$("$BIN" tokenize --tokenizer "$TOK" --chat '[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]')" \
  "developer = system"
expect_error 'out of range' --tokenizer "$TOK" --decode "5 999999"
expect_error 'not a token id' --tokenizer "$TOK" --decode "5 x"
# No --tokenizer or -m: the built-in default model's tokenizer (created on
# first use in $DGEMMA_CACHE, as `run` does), which keeps the Gemma ids.
expect_eq "$(DGEMMA_CACHE="$WORK/cache" "$BIN" tokenize --add-special "Hello world")" "2 9259 1902" \
  "no tokenizer given: the default model's"
expect_error 'not both' --tokenizer "$TOK" -m "$WORK/model" "hello"
expect_error 'cannot open' --tokenizer "$WORK/none.json" "hello"
if printf 'ab\xff' | "$BIN" tokenize --tokenizer "$TOK" > /dev/null 2> "$WORK/err"; then fail "invalid UTF-8 accepted"; fi
grep -qF "not valid UTF-8" "$WORK/err" || fail "invalid UTF-8 message: $(cat "$WORK/err")"
echo "cli tokenize: all checks passed"
