#include "server/utility_api.h"

#include <string>
#include <utility>

#include "core/json.h"
#include "core/utf8.h"
#include "dgemma/error.h"
#include "server/api_error.h"
#include "server/openai_format.h"
#include "server/request_json.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/decoder.h"

namespace dgemma::server {
namespace {

using json::Array;
using json::Object;
using json::Value;

// The routes take only their own fields: anything else is refused, as on the
// completion routes (request_fields.h), rather than silently ignored.
void reject_other_fields(const Value& body, std::initializer_list<std::string_view> known) {
  std::string names;
  for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
  for (const auto& [key, value] : body.as_object()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok)
      throw invalid_request("unknown field '" + key + "' (this route takes " + names + ")", key,
                            "unsupported_parameter");
  }
}

// A token's piece: its text, or its bytes when they are not valid UTF-8 on
// their own (a byte-fallback token, or a token whose text is a partial
// UTF-8 sequence).
Value piece_of(const Tokenizer& tokenizer, int32_t id) {
  std::string bytes;
  if (const int b = tok::byte_token_value(tokenizer.id_to_piece(id)); b >= 0)
    bytes.push_back(char(b));
  else
    bytes = tokenizer.decode(std::span<const int32_t>(&id, 1));
  if (find_invalid_utf8(bytes) == std::string::npos) return Value(std::move(bytes));
  Array list;
  for (unsigned char c : bytes) list.emplace_back(int64_t(c));
  return Value(std::move(list));
}

}  // namespace

TokenizeRequest parse_tokenize_request(std::string_view body_text) {
  const Value body = parse_json_body(body_text);
  reject_other_fields(body, {"content", "add_special", "parse_special", "with_pieces"});
  TokenizeRequest r;
  const Value* content = field(body, "content");
  if (content == nullptr) throw invalid_request("'content' is required", "content", "missing_required_parameter");
  if (!content->is_string()) throw wrong_type("content", "a string", *content);
  r.content = content->as_string();
  r.add_special = get_bool(body, "add_special", "add_special").value_or(r.add_special);
  r.parse_special = get_bool(body, "parse_special", "parse_special").value_or(r.parse_special);
  r.with_pieces = get_bool(body, "with_pieces", "with_pieces").value_or(r.with_pieces);
  return r;
}

std::string tokenize_body(const Tokenizer& tokenizer, const TokenizeRequest& request) {
  const std::vector<int32_t> ids = request.parse_special ? tokenizer.encode(request.content, request.add_special)
                                                         : tokenizer.encode_plain(request.content, request.add_special);
  Array tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (!request.with_pieces) {
      tokens.emplace_back(int64_t(id));
      continue;
    }
    Object t;
    t.emplace_back("id", Value(int64_t(id)));
    t.emplace_back("piece", piece_of(tokenizer, id));
    tokens.emplace_back(std::move(t));
  }
  Object o;
  o.emplace_back("tokens", Value(std::move(tokens)));
  return json::dump(Value(std::move(o)));
}

std::vector<int32_t> parse_detokenize_request(std::string_view body_text, int64_t vocab_size) {
  const Value body = parse_json_body(body_text);
  reject_other_fields(body, {"tokens"});
  const Value* tokens = field(body, "tokens");
  if (tokens == nullptr) throw invalid_request("'tokens' is required", "tokens", "missing_required_parameter");
  if (!tokens->is_array()) throw wrong_type("tokens", "an array of token ids", *tokens);
  std::vector<int32_t> ids;
  ids.reserve(tokens->as_array().size());
  for (size_t i = 0; i < tokens->as_array().size(); ++i) {
    const Value& t = tokens->as_array()[i];
    const std::string param = "tokens[" + std::to_string(i) + "]";
    if (!t.is_integer()) throw wrong_type(param, "a token id (an integer)", t);
    const int64_t id = t.as_int();
    if (id < 0 || id >= vocab_size)
      throw invalid_request("'" + param + "': token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(vocab_size) + ")",
                            "tokens", "invalid_value");
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::string detokenize_body(const Tokenizer& tokenizer, std::span<const int32_t> ids) {
  std::string text;
  try {
    text = tokenizer.decode(ids);
  } catch (const Error& e) {  // an id in range that no token has
    throw invalid_request(e.what(), "tokens", "invalid_value");
  }
  Object o;
  o.emplace_back("content", Value(std::move(text)));
  return json::dump(Value(std::move(o)));
}

ServedModel served_model(CompletionService& service, int64_t created) {
  const ServiceOptions& o = service.options();
  ServedModel m;
  m.id = o.model_name;
  m.created = created;
  m.context_size = o.defaults.context_size;
  m.trained_context_length = o.trained_context_length;
  m.vocab_size = service.vocab_size();
  m.canvas_length = service.canvas_length();
  m.vision = o.vision;
  ChatTemplateKind kind = o.template_kind;
  if (kind == ChatTemplateKind::kAuto) {
    try {
      kind = detect_chat_template(service.tokenizer());
    } catch (const Error&) {  // a vocabulary without either template's markers: chat requests fail alike
      m.chat_template = "none";
      return m;
    }
  }
  m.chat_template = chat_template_name(kind);
  return m;
}

namespace {

// The longest prompt + reply a request may use: -c/--ctx-size, else (no
// limit) the model's trained length; 0 when neither is known.
int64_t max_model_len(const ServedModel& m) { return m.context_size > 0 ? m.context_size : m.trained_context_length; }

Value model_card(const ServedModel& m) {
  Value card = json::parse(model_body(m.id, m.created));
  if (const int64_t len = max_model_len(m); len > 0) card.set("max_model_len", len);
  Object meta;
  meta.emplace_back("n_ctx_train", m.trained_context_length > 0 ? Value(m.trained_context_length) : Value());
  meta.emplace_back("n_ctx", Value(m.context_size));
  meta.emplace_back("n_vocab", Value(m.vocab_size));
  meta.emplace_back("canvas_length", Value(m.canvas_length));
  card.set("meta", Value(std::move(meta)));
  Array modalities{Value("text")};
  if (m.vision) modalities.emplace_back("image");
  card.set("input_modalities", Value(std::move(modalities)));
  return card;
}

}  // namespace

std::string model_card_body(const ServedModel& model) { return json::dump(model_card(model)); }

std::string model_list_body(const ServedModel& model) {
  Object list;
  list.emplace_back("object", Value("list"));
  list.emplace_back("data", Value(Array{model_card(model)}));
  return json::dump(Value(std::move(list)));
}

std::string props_body(const ServedModel& model, const ServiceOptions& options) {
  const GenerationConfig& g = options.defaults;
  Array eos;
  for (int32_t id : g.eos_token_ids) eos.emplace_back(int64_t(id));
  Value params = Object{};
  params.set("max_tokens", Value(options.default_max_tokens));
  params.set("n_predict", Value(options.default_max_tokens));  // llama.cpp's name
  params.set("max_tokens_limit", Value(options.max_tokens_limit));
  params.set("max_prompt_tokens", Value(options.max_prompt_tokens));
  // The request field `temperature` sets the first step's temperature, t_max
  // (docs/model.md §3.1); greedy defaults report 0.
  params.set("temperature", Value(g.greedy ? 0.0 : g.t_max));
  params.set("t_min", Value(g.t_min));
  params.set("t_max", Value(g.t_max));
  params.set("greedy", Value(g.greedy));
  params.set("max_denoising_steps", Value(g.max_denoising_steps));
  params.set("entropy_bound", Value(g.entropy_bound));
  params.set("confidence_threshold", Value(g.confidence_threshold));
  params.set("stability_threshold", Value(g.stability_threshold));
  params.set("eos_token_id", Value(std::move(eos)));
  params.set("seed", Value(int64_t(-1)));  // none: the server chooses one per request
  params.set("stop", Value(Array{}));
  Value settings = Object{};
  settings.set("n_ctx", Value(model.context_size));
  settings.set("params", std::move(params));

  Value o = Object{};
  o.set("model", Value(model.id));
  o.set("n_ctx", Value(model.context_size));
  o.set("n_ctx_train", model.trained_context_length > 0 ? Value(model.trained_context_length) : Value());
  if (const int64_t len = max_model_len(model); len > 0) o.set("max_model_len", Value(len));
  o.set("n_vocab", Value(model.vocab_size));
  o.set("canvas_length", Value(model.canvas_length));
  o.set("total_slots", Value(int64_t(options.slots)));
  o.set("max_queue", Value(options.max_queue));
  o.set("chat_template", Value(model.chat_template));
  o.set("thinking", Value(options.thinking));
  Value modalities = Object{};
  modalities.set("vision", Value(model.vision));
  o.set("modalities", Value(std::move(modalities)));
  o.set("default_generation_settings", Value(std::move(settings)));
  return json::dump(o);
}

}  // namespace dgemma::server
