#include "server/openai_format.h"

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
  Object u;
  u.emplace_back("prompt_tokens", Value(done.prompt_tokens));
  u.emplace_back("completion_tokens", Value(done.completion_tokens));
  u.emplace_back("total_tokens", Value(done.prompt_tokens + done.completion_tokens));
  return Value(std::move(u));
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
Value stream_choice(const ResponseContext& ctx, Object delta, const std::string& text, FinishReason finish) {
  Object c;
  c.emplace_back("index", Value(0));
  if (is_chat(ctx))
    c.emplace_back("delta", Value(std::move(delta)));
  else
    c.emplace_back("text", Value(text));
  c.emplace_back("logprobs", Value());
  c.emplace_back("finish_reason", finish_value(finish));
  return Value(Object(std::move(c)));
}

std::string with_choice(const ResponseContext& ctx, Value choice) {
  Object o = envelope(ctx, true);
  o.emplace_back("choices", Value(json::Array{std::move(choice)}));
  return json::dump(Value(std::move(o)));
}

}  // namespace

std::string completion_body(const ResponseContext& ctx, const std::string& text, const StreamEvent& done) {
  Object choice;
  choice.emplace_back("index", Value(0));
  if (is_chat(ctx)) {
    Object message;
    message.emplace_back("role", Value("assistant"));
    // With tool calls and no text around them, content is null (OpenAI).
    const bool only_calls = !done.tool_calls.empty() && text.empty();
    message.emplace_back("content", only_calls ? Value() : Value(text));
    if (!done.tool_calls.empty()) message.emplace_back("tool_calls", tool_calls_value(done.tool_calls, false));
    choice.emplace_back("message", Value(std::move(message)));
  } else {
    choice.emplace_back("text", Value(text));
  }
  choice.emplace_back("logprobs", Value());
  choice.emplace_back("finish_reason", finish_value(done.finish));
  Object o = envelope(ctx, false);
  o.emplace_back("choices", Value(json::Array{Value(std::move(choice))}));
  o.emplace_back("usage", usage(done));
  o.emplace_back("dgemma", extension(ctx, done));
  return json::dump(Value(std::move(o)));
}

std::string chunk_start(const ResponseContext& ctx) {
  Object delta;
  delta.emplace_back("role", Value("assistant"));
  delta.emplace_back("content", Value(""));
  return with_choice(ctx, stream_choice(ctx, std::move(delta), "", FinishReason::kNone));
}

std::string chunk_text(const ResponseContext& ctx, const std::string& text) {
  Object delta;
  delta.emplace_back("content", Value(text));
  return with_choice(ctx, stream_choice(ctx, std::move(delta), text, FinishReason::kNone));
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
  // them only once it is complete (docs/server.md §4).
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
