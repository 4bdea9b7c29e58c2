#pragma once
// The JSON of the server's utility routes, which follow llama.cpp's server
// (README "Endpoints"): tokenizing and detokenizing with the served model's
// tokenizer, the server's properties, and the model card of /v1/models with
// the context length. Parsers throw ApiError (400 naming the field, as the
// completion routes do); builders return compact JSON. The HTTP binding is
// utility_routes.h.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/service.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::server {

// POST /tokenize {"content": str, "add_special": bool, "parse_special": bool,
// "with_pieces": bool}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;   // the tokenizer's BOS in front
  bool parse_special = true;  // special-token text ("<bos>") becomes its id; false: plain text
  bool with_pieces = false;   // answer {"id", "piece"} objects instead of bare ids
};
TokenizeRequest parse_tokenize_request(std::string_view body);
// {"tokens": [ids]} or, with_pieces, {"tokens": [{"id": N, "piece": P}]}: P
// is the token's text, or the list of its bytes when they are not valid
// UTF-8 on their own (a byte-fallback token such as <0xC3>).
std::string tokenize_body(const Tokenizer& tokenizer, const TokenizeRequest& request);

// POST /detokenize {"tokens": [ids]}: the ids, each checked against
// `vocab_size` (400 naming the first one outside [0, vocab_size)).
std::vector<int32_t> parse_detokenize_request(std::string_view body, int64_t vocab_size);
// {"content": text}. An id inside the range that names no token is a 400
// naming it too.
std::string detokenize_body(const Tokenizer& tokenizer, std::span<const int32_t> ids);

// What /v1/models and /props say about the served model.
struct ServedModel {
  std::string id;                      // -a/--alias, else the folder name
  int64_t created = 0;                 // unix seconds
  int64_t context_size = 0;            // -c/--ctx-size in force (0: no limit)
  int64_t trained_context_length = 0;  // the model's max_position_embeddings (0: unknown)
  int64_t vocab_size = 0;
  int64_t canvas_length = 0;
  std::string chat_template;  // the template chat requests use: gemma4, gemma3 (or none)
  bool vision = false;        // the model has a vision tower: chat requests may hold images
};
ServedModel served_model(CompletionService& service, int64_t created);

// One model object of /v1/models: the OpenAI fields plus "max_model_len"
// (the longest prompt + reply a request may use, as vLLM reports it) and
// "meta" {"n_ctx_train", "n_ctx", "n_vocab", "canvas_length"} (llama.cpp's
// names), and "input_modalities": ["text"] or ["text", "image"].
std::string model_card_body(const ServedModel& model);
// {"object": "list", "data": [model card]}.
std::string model_list_body(const ServedModel& model);

// GET /props: the model, its context lengths, the slots and queue, the chat
// template, and "default_generation_settings" {"n_ctx", "params": the
// defaults a request without the field gets}.
std::string props_body(const ServedModel& model, const ServiceOptions& options);

}  // namespace dgemma::server
