#include "server/openai_format.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/json.h"

namespace dgemma::server {
namespace {

using json::Object;
using json::Value;

bool is_chat(const ResponseContext& ctx) { return ctx.endpoint == Endpoint::kChat; }

Object envelope(const ResponseContext& ctx, bool chunk) {
  Object o;
  o.emplace_back("id", Value(ctx.id));
  o.emplace_back("object",
                 Value(is_chat(ctx) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"));
  o.emplace_back("created", Value(ctx.created));
  o.emplace_back("model", Value(ctx.model));
  o.emplace_back("system_fingerprint", Value("dgemma"));
  return o;
}

Value finish_value(FinishReason reason) {
  return reason == FinishReason::kNone ? Value() : Value(finish_reason_name(reason));
}

Value usage(const StreamEvent& done) {
  return Value(Object{{"prompt_tokens", Value(done.prompt_tokens)},
                      {"completion_tokens", Value(done.completion_tokens)},
                      {"total_tokens", Value(done.prompt_tokens + done.completion_tokens)}});
}

// OpenAI tool_calls: [{id, type: "function", function: {name, arguments}}];
// stream deltas number them with "index" as well.
Value tool_calls_value(const std::vector<ToolCall>& calls, bool with_index) {
  json::Array list;
  for (size_t i = 0; i < calls.size(); ++i) {
    Object function;
    function.emplace_back("name", Value(calls[i].name));
    function.emplace_back("arguments", Value(calls[i].arguments));
    Object call;
    if (with_index) call.emplace_back("index", Value(int64_t(i)));
    call.emplace_back("id", Value(calls[i].id));
    call.emplace_back("type", Value("function"));
    call.emplace_back("function", Value(std::move(function)));
    list.emplace_back(std::move(call));
  }
  return Value(std::move(list));
}

double ms(double seconds) { return std::round(seconds * 1e6) / 1e3; }

Value extension(const ResponseContext& ctx, const StreamEvent& done) {
  Object x;
  x.emplace_back("seed", Value(ctx.seed));
  x.emplace_back("canvases", Value(done.canvases));
  x.emplace_back("denoising_steps", Value(done.steps));
  x.emplace_back("queue_ms", Value(ms(done.queue_seconds)));
  x.emplace_back("ttft_ms", Value(ms(done.ttft_seconds)));
  x.emplace_back("total_ms", Value(ms(done.total_seconds)));
  return Value(std::move(x));
}

// One streamed choice: chat {"index","delta","logprobs","finish_reason"},
// completions {"index","text","logprobs","finish_reason"}.
Value stream_choice(const ResponseContext& ctx, Object delta, const std::string& text, FinishReason finish,
                    Value logprobs = Value()) {
  Object c;
  c.emplace_back("index", Value(ctx.choice));
  if (is_chat(ctx))
    c.emplace_back("delta", Value(std::move(delta)));
  else
    c.emplace_back("text", Value(text));
  c.emplace_back("logprobs", std::move(logprobs));
  c.emplace_back("finish_reason", finish_value(finish));
  return Value(Object(std::move(c)));
}

std::string with_choice(const ResponseContext& ctx, Value choice) {
  Object o = envelope(ctx, true);
  o.emplace_back("choices", Value(json::Array{std::move(choice)}));
  return json::dump(Value(std::move(o)));
}

// JSON has no -infinity; a token with no probability at all reads -9999, as
// OpenAI writes it.
Value logprob_value(double x) { return Value(std::isfinite(x) ? x : -9999.0); }

Value bytes_value(const TokenText& t) {
  json::Array bytes;
  for (const uint8_t b : t.bytes) bytes.push_back(Value(int64_t(b)));
  return Value(std::move(bytes));
}

// The "logprobs" of a choice or chunk (docs/server.md §5). Chat:
// {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}],
// "refusal": null}; completions: {tokens, token_logprobs, top_logprobs: [{text:
// logprob}], text_offset}, offsets counted from `offset` bytes of the answer.
Value logprobs_value(const ResponseContext& ctx, std::span<const AnswerToken> tokens, int64_t offset) {
  if (!ctx.logprobs) return Value();
  Object o;
  if (is_chat(ctx)) {
    json::Array content;
    for (const AnswerToken& t : tokens) {
      Object entry;
      entry.emplace_back("token", Value(t.token.text));
      entry.emplace_back("logprob", logprob_value(t.logprob));
      entry.emplace_back("bytes", bytes_value(t.token));
      json::Array top;
      for (const auto& [alt, lp] : t.top) {
        Object a;
        a.emplace_back("token", Value(alt.text));
        a.emplace_back("logprob", logprob_value(lp));
        a.emplace_back("bytes", bytes_value(alt));
        top.push_back(Value(std::move(a)));
      }
      entry.emplace_back("top_logprobs", Value(std::move(top)));
      content.push_back(Value(std::move(entry)));
    }
    o.emplace_back("content", Value(std::move(content)));
    o.emplace_back("refusal", Value());
    return Value(std::move(o));
  }
  json::Array text, lps, tops, offsets;
  for (const AnswerToken& t : tokens) {
    text.push_back(Value(t.token.text));
    lps.push_back(logprob_value(t.logprob));
    Object top;  // keyed by text: the first of two alternatives with the same text is kept
    for (const auto& [alt, lp] : t.top) {
      bool seen = false;
      for (const auto& [key, value] : top) seen = seen || key == alt.text;
      if (!seen) top.emplace_back(alt.text, logprob_value(lp));
    }
    tops.push_back(Value(std::move(top)));
    offsets.push_back(Value(offset));
    offset += int64_t(t.token.text.size());
  }
  o.emplace_back("tokens", Value(std::move(text)));
  o.emplace_back("token_logprobs", Value(std::move(lps)));
  o.emplace_back("top_logprobs", Value(std::move(tops)));
  o.emplace_back("text_offset", Value(std::move(offsets)));
  return Value(std::move(o));
}

// One choice of a non-streamed answer: chat {"index","message","logprobs",
// "finish_reason"}, completions {"index","text","logprobs","finish_reason"}.
Value answer_choice(const ResponseContext& ctx, int64_t index, const ChoiceOutcome& outcome) {
  Object choice;
  choice.emplace_back("index", Value(index));
  if (is_chat(ctx)) {
    Object message;
    message.emplace_back("role", Value("assistant"));
    // With tool calls and no text around them, content is null (OpenAI).
    const bool only_calls = !outcome.done.tool_calls.empty() && outcome.text.empty();
    message.emplace_back("content", only_calls ? Value() : Value(outcome.text));
    if (!outcome.done.tool_calls.empty())
      message.emplace_back("tool_calls", tool_calls_value(outcome.done.tool_calls, false));
    choice.emplace_back("message", Value(std::move(message)));
  } else {
    choice.emplace_back("text", Value(outcome.text));
  }
  choice.emplace_back("logprobs", logprobs_value(ctx, outcome.logprobs, 0));
  choice.emplace_back("finish_reason", finish_value(outcome.done.finish));
  return Value(std::move(choice));
}

}  // namespace

std::string completion_body(const ResponseContext& ctx, const std::string& text, const StreamEvent& done) {
  return completion_body(ctx, std::vector<ChoiceOutcome>{ChoiceOutcome{text, done, {}}});
}

std::string completion_body(const ResponseContext& ctx, std::span<const ChoiceOutcome> choices) {
  json::Array list;
  list.reserve(choices.size());
  for (size_t i = 0; i < choices.size(); ++i) list.push_back(answer_choice(ctx, int64_t(i), choices[i]));
  std::vector<StreamEvent> dones;
  for (const ChoiceOutcome& c : choices) dones.push_back(c.done);
  const StreamEvent total = combine_done(dones);
  Object o = envelope(ctx, false);
  o.emplace_back("choices", Value(std::move(list)));
  o.emplace_back("usage", usage(total));
  o.emplace_back("dgemma", extension(ctx, total));
  return json::dump(Value(std::move(o)));
}

StreamEvent combine_done(std::span<const StreamEvent> dones) {
  StreamEvent total;
  total.kind = StreamEvent::Kind::kDone;
  for (size_t i = 0; i < dones.size(); ++i) {
    const StreamEvent& d = dones[i];
    if (i == 0) {
      total = d;
      continue;
    }
    total.completion_tokens += d.completion_tokens;
    total.canvases += d.canvases;
    total.steps += d.steps;
    total.queue_seconds = std::max(total.queue_seconds, d.queue_seconds);
    total.ttft_seconds = std::min(total.ttft_seconds, d.ttft_seconds);
    total.total_seconds = std::max(total.total_seconds, d.total_seconds);
  }
  return total;
}

std::string chunk_start(const ResponseContext& ctx) {
  Object delta;
  delta.emplace_back("role", Value("assistant"));
  delta.emplace_back("content", Value(""));
  return with_choice(ctx, stream_choice(ctx, std::move(delta), "", FinishReason::kNone));
}

std::string chunk_text(const ResponseContext& ctx, const std::string& text, std::span<const AnswerToken> logprobs,
                       int64_t text_offset) {
  Object delta;
  delta.emplace_back("content", Value(text));
  return with_choice(
      ctx, stream_choice(ctx, std::move(delta), text, FinishReason::kNone, logprobs_value(ctx, logprobs, text_offset)));
}

std::string chunk_draft(const ResponseContext& ctx, const StreamEvent& d) {
  Object o = envelope(ctx, true);
  o.emplace_back("choices", Value(json::Array{stream_choice(ctx, Object{}, "", FinishReason::kNone)}));
  Object x;
  x.emplace_back("canvas", Value(d.canvas));
  x.emplace_back("step", Value(d.step));
  x.emplace_back("max_steps", Value(d.max_steps));
  x.emplace_back("accepted", Value(d.accepted));
  x.emplace_back("canvas_length", Value(d.canvas_length));
  x.emplace_back("mean_entropy", Value(double(d.mean_entropy)));
  x.emplace_back("mask", Value(d.mask));
  x.emplace_back("text", Value(d.text));
  o.emplace_back("dgemma_draft", Value(std::move(x)));
  return json::dump(Value(std::move(o)));
}

std::string chunk_finish(const ResponseContext& ctx, const StreamEvent& done) {
  Object o = envelope(ctx, true);
  // The calls arrive whole, in the finishing chunk: the answer is read for
  // them only once it is complete (docs/server.md §7).
  Object delta;
  if (is_chat(ctx) && !done.tool_calls.empty())
    delta.emplace_back("tool_calls", tool_calls_value(done.tool_calls, true));
  o.emplace_back("choices", Value(json::Array{stream_choice(ctx, std::move(delta), "", done.finish)}));
  o.emplace_back("usage", usage(done));
  o.emplace_back("dgemma", extension(ctx, done));
  return json::dump(Value(std::move(o)));
}

std::string chunk_usage(const ResponseContext& ctx, const StreamEvent& done) {
  Object o = envelope(ctx, true);
  o.emplace_back("choices", Value(json::Array{}));
  o.emplace_back("usage", usage(done));
  return json::dump(Value(std::move(o)));
}

std::string sse_event(const std::string& json_text) { return "data: " + json_text + "\n\n"; }

std::string model_body(const std::string& model, int64_t created) {
  Object m;
  m.emplace_back("id", Value(model));
  m.emplace_back("object", Value("model"));
  m.emplace_back("created", Value(created));
  m.emplace_back("owned_by", Value("dgemma"));
  return json::dump(Value(std::move(m)));
}

std::string models_body(const std::string& model, int64_t created) {
  Object list;
  list.emplace_back("object", Value("list"));
  list.emplace_back("data", Value(json::Array{json::parse(model_body(model, created))}));
  return json::dump(Value(std::move(list)));
}

}  // namespace dgemma::server
