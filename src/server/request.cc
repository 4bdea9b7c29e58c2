#include "server/request.h"

#include <limits>
#include <utility>

#include "core/json.h"
#include "dgemma/error.h"
#include "generate/generation_config.h"
#include "server/api_error.h"
#include "server/request_fields.h"
#include "server/request_json.h"
#include "server/request_tools.h"

namespace dgemma::server {
namespace {

using json::Value;

// The source of an image content part: {"type": "image_url", "image_url":
// {"url": ..., "detail": ...}} or "image_url": "..." (docs/server.md §8.1).
std::string image_url_of_part(const Value& part, const std::string& pp) {
  const Value* u = field(part, "image_url");
  if (u == nullptr)
    throw invalid_request("'" + pp + ".image_url' is required", pp + ".image_url", "missing_required_parameter");
  if (u->is_string()) return u->as_string();
  if (!u->is_object()) throw wrong_type(pp + ".image_url", "an object with a url, or a string", *u);
  const Value* url = field(*u, "url");
  if (url == nullptr)
    throw invalid_request("'" + pp + ".image_url.url' is required", pp + ".image_url.url",
                          "missing_required_parameter");
  if (!url->is_string()) throw wrong_type(pp + ".image_url.url", "a string", *url);
  if (const Value* detail = field(*u, "detail"); detail != nullptr && !detail->is_string())
    throw wrong_type(pp + ".image_url.detail", "a string", *detail);  // any value: one resolution per image here
  return url->as_string();
}

// A message's content: a string, or an array of text and (in user messages)
// image_url parts. Parts are kept (msg.parts) only when an image is among
// them, so that text-only requests render exactly as before.
void parse_content(const Value& content, const std::string& param, bool allow_null, bool allow_images,
                   ChatMessage& msg) {
  if (content.is_null()) {
    if (!allow_null) throw invalid_request("'" + param + "' must not be null", param, "invalid_type");
    return;
  }
  if (content.is_string()) {
    msg.content = content.as_string();
    return;
  }
  if (!content.is_array()) throw wrong_type(param, "a string or an array of content parts", content);
  std::vector<ChatContentPart> out;
  bool images = false;
  const json::Array& parts = content.as_array();
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::string pp = param + "[" + std::to_string(k) + "]";
    const Value& part = parts[k];
    if (!part.is_object()) throw wrong_type(pp, "an object", part);
    const Value* type = field(part, "type");
    if (type == nullptr)
      throw invalid_request("'" + pp + ".type' is required", pp + ".type", "missing_required_parameter");
    if (!type->is_string()) throw wrong_type(pp + ".type", "a string", *type);
    const std::string& kind = type->as_string();
    if (kind == "image_url") {
      if (!allow_images)
        throw invalid_request("'" + pp + "': images are accepted in user messages only", pp + ".type",
                              "unsupported_value");
      out.push_back({"image", "", image_url_of_part(part, pp)});
      images = true;
      continue;
    }
    if (kind != "text")
      throw invalid_request("content part type '" + kind + "' is not supported (text and image_url are)", pp + ".type",
                            "unsupported_value");
    const Value* t = field(part, "text");
    if (t == nullptr)
      throw invalid_request("'" + pp + ".text' is required", pp + ".text", "missing_required_parameter");
    if (!t->is_string()) throw wrong_type(pp + ".text", "a string", *t);
    msg.content += t->as_string();
    out.push_back({"text", t->as_string(), ""});
  }
  if (images) msg.parts = std::move(out);
}

std::vector<ChatMessage> parse_messages(const Value& body) {
  const Value* list = field(body, "messages");
  if (list == nullptr) throw invalid_request("'messages' is required", "messages", "missing_required_parameter");
  if (!list->is_array()) throw wrong_type("messages", "an array", *list);
  const json::Array& arr = list->as_array();
  if (arr.empty()) throw invalid_request("'messages' must contain at least one message", "messages", "invalid_value");
  std::vector<ChatMessage> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string pm = "messages[" + std::to_string(i) + "]";
    const Value& m = arr[i];
    if (!m.is_object()) throw wrong_type(pm, "an object", m);
    const Value* role = field(m, "role");
    if (role == nullptr)
      throw invalid_request("'" + pm + ".role' is required", pm + ".role", "missing_required_parameter");
    if (!role->is_string()) throw wrong_type(pm + ".role", "a string", *role);
    const std::string& r = role->as_string();
    // A tool result ("tool", tools.h) is the server's own role on top of the
    // template's shared ones (chat_template_role).
    const std::optional<std::string> rendered =
        r == "tool" ? std::optional<std::string>("tool") : chat_template_role(r);
    if (!rendered)
      throw invalid_request(
          "'" + pm + ".role' must be one of " + std::string(kChatRoleNames) + ", tool; got '" + r + "'", pm + ".role",
          "invalid_value");
    const Value* content = m.find("content");
    // An assistant message that only calls tools may leave content out.
    const Value* calls = r == "assistant" ? field(m, "tool_calls") : nullptr;
    if (content == nullptr && calls == nullptr)
      throw invalid_request("'" + pm + ".content' is required", pm + ".content", "missing_required_parameter");
    ChatMessage msg;
    msg.role = *rendered;
    if (content != nullptr) parse_content(*content, pm + ".content", r == "assistant", r == "user", msg);
    if (calls != nullptr) msg.tool_calls = parse_message_tool_calls(*calls, pm + ".tool_calls");
    if (r == "tool") {
      const Value* id = field(m, "tool_call_id");
      if (id == nullptr)
        throw invalid_request("'" + pm + ".tool_call_id' is required in a tool message", pm + ".tool_call_id",
                              "missing_required_parameter");
      if (!id->is_string()) throw wrong_type(pm + ".tool_call_id", "a string", *id);
      msg.tool_call_id = id->as_string();
    }
    reject_unsupported_message_fields(m, pm);
    out.push_back(std::move(msg));
  }
  check_tool_messages(out);
  return out;
}

void parse_prompt(const Value& body, CompletionRequest& req) {
  const Value* p = field(body, "prompt");
  if (p == nullptr) throw invalid_request("'prompt' is required", "prompt", "missing_required_parameter");
  if (p->is_string()) {
    req.prompt = p->as_string();
    return;
  }
  if (!p->is_array()) throw wrong_type("prompt", "a string, an array of one string or an array of token ids", *p);
  const json::Array& arr = p->as_array();
  const Value* ids = p;
  if (arr.size() == 1 && arr[0].is_string()) {
    req.prompt = arr[0].as_string();
    return;
  }
  if (arr.size() == 1 && arr[0].is_array()) ids = &arr[0];  // [[ids]]: one prompt of token ids
  if (!arr.empty() && (arr[0].is_string() || (arr[0].is_array() && arr.size() > 1)))
    throw invalid_request("'prompt' holds " + std::to_string(arr.size()) + " prompts; this server answers one (n = 1)",
                          "prompt", "unsupported_value");
  const json::Array& list = ids->as_array();
  if (list.empty()) throw invalid_request("'prompt' must not be an empty array", "prompt", "invalid_value");
  std::vector<int32_t> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const Value& t = list[i];
    if (!t.is_integer() || t.as_int() < 0 || t.as_int() > std::numeric_limits<int32_t>::max())
      throw invalid_request("'prompt[" + std::to_string(i) + "]' must be a token id (a non-negative integer)", "prompt",
                            "invalid_value");
    out.push_back(int32_t(t.as_int()));
  }
  req.prompt_ids = std::move(out);
}

std::vector<std::string> parse_stop(const Value& body, const RequestLimits& limits) {
  const Value* s = field(body, "stop");
  if (s == nullptr) return {};
  std::vector<std::string> out;
  if (s->is_string()) {
    out.push_back(s->as_string());
  } else if (s->is_array()) {
    for (size_t i = 0; i < s->as_array().size(); ++i) {
      const Value& v = s->as_array()[i];
      if (!v.is_string()) throw wrong_type("stop[" + std::to_string(i) + "]", "a string", v);
      out.push_back(v.as_string());
    }
  } else {
    throw wrong_type("stop", "a string or an array of strings", *s);
  }
  if (int64_t(out.size()) > limits.max_stop_strings)
    throw invalid_request("'stop' holds " + std::to_string(out.size()) + " strings; at most " +
                              std::to_string(limits.max_stop_strings) + " are allowed",
                          "stop", "invalid_value");
  for (const std::string& x : out) {
    if (x.empty()) throw invalid_request("'stop' strings must not be empty", "stop", "invalid_value");
    if (int64_t(x.size()) > limits.max_stop_bytes)
      throw invalid_request("'stop' strings must be at most " + std::to_string(limits.max_stop_bytes) + " bytes",
                            "stop", "invalid_value");
  }
  return out;
}

// top_k, top_p, min_p and the penalties (docs/model.md §3.7), each checked
// against the rule the CLI flags share (sampling_control_rule).
void parse_sampling_controls(const Value& body, CompletionRequest& req) {
  auto checked = [&](const char* key, double value) {
    if (const std::string rule = sampling_control_rule(key, value); !rule.empty())
      throw invalid_request(std::string("'") + key + "' " + rule + ", got " + json::dump(*field(body, key)), key,
                            "invalid_value");
  };
  if (std::optional<int64_t> k = get_int(body, "top_k")) {
    checked("top_k", double(*k));
    req.top_k = *k;
  }
  const std::pair<const char*, std::optional<double>*> numbers[] = {
      {"top_p", &req.top_p},
      {"min_p", &req.min_p},
      {"presence_penalty", &req.presence_penalty},
      {"frequency_penalty", &req.frequency_penalty},
      {"repeat_penalty", &req.repeat_penalty},
  };
  for (const auto& [key, out] : numbers)
    if (std::optional<double> v = get_number(body, key)) {
      checked(key, *v);
      *out = *v;
    }
}

}  // namespace

CompletionRequest parse_request(Endpoint endpoint, std::string_view body_text, const RequestLimits& limits) {
  const Value body = parse_json_body(body_text);
  CompletionRequest req;
  req.endpoint = endpoint;

  if (const Value* m = field(body, "model")) {
    if (!m->is_string()) throw wrong_type("model", "a string", *m);
    req.model = m->as_string();
    if (!limits.model_name.empty() && req.model != limits.model_name)
      throw ApiError(404,
                     "the model '" + req.model + "' does not exist; this server serves '" + limits.model_name + "'",
                     "invalid_request_error", "model", "model_not_found");
  }

  if (endpoint == Endpoint::kChat) {
    req.messages = parse_messages(body);
    parse_tool_fields(body, req);
  } else {
    parse_prompt(body, req);
  }

  // max_completion_tokens is the newer chat spelling; it wins over max_tokens.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (std::optional<int64_t> v = get_int(body, key)) {
      if (*v < 1)
        throw invalid_request(std::string("'") + key + "' must be at least 1, got " + std::to_string(*v), key,
                              "invalid_value");
      if (*v > limits.max_tokens_limit)
        throw invalid_request(std::string("'") + key + "' must be at most " + std::to_string(limits.max_tokens_limit) +
                                  ", got " + std::to_string(*v),
                              key, "invalid_value");
      req.max_tokens = *v;
    }
  }

  req.temperature = get_number(body, "temperature");
  if (req.temperature && (*req.temperature < 0 || *req.temperature > 2))
    throw invalid_request("'temperature' must be in [0, 2]", "temperature", "invalid_value");
  req.t_min = get_number(body, "t_min");
  req.t_max = get_number(body, "t_max");
  if (req.temperature && (req.t_min || req.t_max))
    throw invalid_request("give either 'temperature' or 't_min'/'t_max', not both", "temperature", "invalid_value");
  if (req.t_min && *req.t_min < 0) throw invalid_request("'t_min' must be >= 0", "t_min", "invalid_value");
  if (req.t_max && *req.t_max <= 0) throw invalid_request("'t_max' must be > 0", "t_max", "invalid_value");
  if (req.t_min && req.t_max && *req.t_max <= *req.t_min)
    throw invalid_request("'t_max' must be greater than 't_min'", "t_max", "invalid_value");

  if (std::optional<int64_t> v = get_int(body, "max_denoising_steps")) {
    if (*v < 1 || *v > 4096)
      throw invalid_request("'max_denoising_steps' must be in [1, 4096]", "max_denoising_steps", "invalid_value");
    req.max_denoising_steps = *v;
  }
  parse_sampling_controls(body, req);
  if (std::optional<int64_t> v = get_int(body, "seed")) {
    if (*v < 0)
      req.random_seed = true;
    else
      req.seed = uint64_t(*v);
  }

  if (std::optional<int64_t> v = get_int(body, "n")) {
    if (*v < 1 || *v > limits.max_choices)
      throw invalid_request("'n' must be in [1, " + std::to_string(limits.max_choices) + "] on this server, got " +
                                std::to_string(*v) + " (each choice takes a sequence slot or a queue place)",
                            "n", "invalid_value");
    req.n = *v;
  }

  if (endpoint == Endpoint::kChat) {
    req.logprobs = get_bool(body, "logprobs", "logprobs").value_or(false);
    if (std::optional<int64_t> v = get_int(body, "top_logprobs")) {
      if (*v < 0 || *v > 20)
        throw invalid_request("'top_logprobs' must be in [0, 20], got " + std::to_string(*v), "top_logprobs",
                              "invalid_value");
      if (*v > 0 && !req.logprobs)
        throw invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
      req.top_logprobs = *v;
    }
  } else if (std::optional<int64_t> v = get_int(body, "logprobs")) {
    if (*v < 0 || *v > 5)
      throw invalid_request("'logprobs' must be in [0, 5] (alternatives per token), got " + std::to_string(*v),
                            "logprobs", "invalid_value");
    req.logprobs = *v > 0;
    req.top_logprobs = *v;
  }

  req.stop = parse_stop(body, limits);
  req.stream = get_bool(body, "stream", "stream").value_or(false);
  if (const Value* so = field(body, "stream_options")) {
    if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
    req.include_usage = get_bool(*so, "include_usage", "stream_options.include_usage").value_or(false);
    req.include_drafts = get_bool(*so, "include_drafts", "stream_options.include_drafts").value_or(false);
  }

  // Everything else is refused unless its value changes nothing
  // (request_fields.h lists the fields).
  reject_unsupported_fields(body, endpoint);
  return req;
}

}  // namespace dgemma::server
