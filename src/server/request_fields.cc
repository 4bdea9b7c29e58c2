#include "server/request_fields.h"

#include <cmath>
#include <string_view>

#include "server/api_error.h"

namespace dgemma::server {
namespace {

using json::Value;

enum Where : unsigned { kChatOnly = 1, kCompletionOnly = 2, kBoth = 3 };

unsigned bit(Endpoint e) { return e == Endpoint::kChat ? kChatOnly : kCompletionOnly; }

struct HonouredField {
  const char* name;
  unsigned where;
};

// Parsed by parse_request (request.cc).
constexpr HonouredField kHonoured[] = {
    {"model", kBoth},
    {"messages", kChatOnly},
    {"prompt", kCompletionOnly},
    {"max_tokens", kBoth},
    {"max_completion_tokens", kBoth},
    {"temperature", kBoth},
    {"t_min", kBoth},
    {"t_max", kBoth},
    {"max_denoising_steps", kBoth},
    {"top_k", kBoth},
    {"top_p", kBoth},
    {"min_p", kBoth},
    {"presence_penalty", kBoth},
    {"frequency_penalty", kBoth},
    {"repeat_penalty", kBoth},
    {"seed", kBoth},
    {"n", kBoth},
    {"logprobs", kBoth},
    {"top_logprobs", kChatOnly},
    {"stop", kBoth},
    {"stream", kBoth},
    {"stream_options", kBoth},
    // Tool calling (request_tools.cc).
    {"tools", kChatOnly},
    {"tool_choice", kChatOnly},
    {"parallel_tool_calls", kChatOnly},
};

bool is_number_equal(const Value& v, double x) { return v.is_number() && v.as_double() == x; }
bool is_string_in(const Value& v, std::initializer_list<std::string_view> allowed) {
  if (!v.is_string()) return false;
  for (std::string_view a : allowed)
    if (v.as_string() == a) return true;
  return false;
}
bool is_empty_array(const Value& v) { return v.is_array() && v.as_array().empty(); }
bool is_empty_object(const Value& v) { return v.is_object() && v.as_object().empty(); }

bool is_text_response_format(const Value& v) {
  if (!v.is_object()) return false;
  for (const auto& [key, value] : v.as_object())
    if (key != "type" || !value.is_string() || value.as_string() != "text") return false;
  return !v.as_object().empty();
}

bool is_text_modalities(const Value& v) {
  if (!v.is_array() || v.as_array().size() != 1) return false;
  return is_string_in(v.as_array()[0], {"text"});
}

struct NoOpField {
  const char* name;
  unsigned where;
  bool (*accepts)(const Value&);
  const char* accepted;  // the no-op value(s), for the message
  const char* reason;    // why nothing else is supported
};

constexpr NoOpField kNoOp[] = {
    {"best_of", kCompletionOnly, [](const Value& v) { return is_number_equal(v, 1); }, "1", "one candidate"},
    {"echo", kCompletionOnly, [](const Value& v) { return v.is_bool() && !v.as_bool(); }, "false",
     "the prompt is not echoed"},
    {"suffix", kCompletionOnly, [](const Value& v) { return v.is_string() && v.as_string().empty(); }, "\"\"",
     "no insertion mode"},
    {"tools", kCompletionOnly, is_empty_array, "[]", "tool calling is for /v1/chat/completions"},
    {"functions", kBoth, is_empty_array, "[]", "the legacy functions API; send 'tools'"},
    {"tool_choice", kCompletionOnly,
     [](const Value& v) {
       return is_string_in(v, {"none", "auto"});
     },
     "\"none\" or \"auto\"", "tool calling is for /v1/chat/completions"},
    {"function_call", kBoth,
     [](const Value& v) {
       return is_string_in(v, {"none", "auto"});
     },
     "\"none\" or \"auto\"", "the legacy functions API; send 'tool_choice'"},
    {"parallel_tool_calls", kCompletionOnly, [](const Value& v) { return v.is_bool(); }, "a boolean",
     "tool calling is for /v1/chat/completions"},
    {"logit_bias", kBoth, is_empty_object, "{}", "no logit bias"},
    {"response_format", kBoth, is_text_response_format, "{\"type\": \"text\"}", "no JSON mode or structured output"},
    {"modalities", kBoth, is_text_modalities, "[\"text\"]", "text-only model"},
    {"store", kBoth, [](const Value& v) { return v.is_bool() && !v.as_bool(); }, "false", "completions are not stored"},
    {"service_tier", kBoth,
     [](const Value& v) {
       return is_string_in(v, {"auto", "default"});
     },
     "\"auto\" or \"default\"", "one service tier"},
    {"user", kBoth, [](const Value& v) { return v.is_string(); }, "a string", "it is an end-user id"},
    {"metadata", kBoth, [](const Value& v) { return v.is_object(); }, "an object", "it is bookkeeping"},
};

[[noreturn]] void unsupported(const std::string& param, const std::string& message) {
  throw invalid_request(message, param, "unsupported_parameter");
}

std::string shown(const Value& v) {
  std::string s = json::dump(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace

void reject_unsupported_fields(const Value& body, Endpoint endpoint) {
  for (const auto& [key, value] : body.as_object()) {
    bool known = false;
    for (const HonouredField& h : kHonoured)
      if (key == h.name && (h.where & bit(endpoint)) != 0) known = true;
    if (known) continue;
    for (const NoOpField& f : kNoOp) {
      if (key != f.name || (f.where & bit(endpoint)) == 0) continue;
      known = true;
      if (!value.is_null() && !f.accepts(value))
        unsupported(key, "'" + key + "' = " + shown(value) + " is not supported by this server (" + f.reason +
                             "); it accepts only " + f.accepted);
    }
    if (!known)
      unsupported(key, "'" + key + "' is not a parameter this server supports" +
                           (endpoint == Endpoint::kChat ? " on /v1/chat/completions" : " on /v1/completions") +
                           " (unknown fields are refused, not ignored)");
  }
  if (const Value* so = body.find("stream_options"); so != nullptr && so->is_object())
    for (const auto& [key, value] : so->as_object())
      if (key != "include_usage" && key != "include_drafts")
        unsupported("stream_options." + key, "'stream_options." + key +
                                                 "' is not supported (this server knows include_usage and "
                                                 "include_drafts)");
}

void reject_unsupported_message_fields(const Value& message, const std::string& param) {
  const Value* role = message.find("role");
  const std::string r = role != nullptr && role->is_string() ? role->as_string() : "";
  for (const auto& [key, value] : message.as_object()) {
    if (key == "role" || key == "content") continue;
    // Tool calling (request_tools.cc): an assistant's calls, a tool's answer.
    if ((key == "tool_calls" && r == "assistant") || (key == "tool_call_id" && r == "tool")) continue;
    const std::string p = param + "." + key;
    if (key == "refusal" || key == "audio" || key == "function_call") {
      if (!value.is_null()) unsupported(p, "'" + p + "' is not supported (it must be null)");
    } else if (key == "tool_calls" || key == "annotations") {
      if (!value.is_null() && !is_empty_array(value))
        unsupported(p, "'" + p + "' is not supported" +
                           (key == "tool_calls" ? std::string(" (only assistant messages carry tool calls)") : ""));
    } else if (key == "name") {
      if (!value.is_null()) unsupported(p, "'" + p + "' is not supported: the chat template has no participant names");
    } else {
      unsupported(p, "'" + p +
                         "' is not a message field this server supports (role, content; tool_calls on assistant "
                         "messages, tool_call_id on tool messages)");
    }
  }
}

}  // namespace dgemma::server
