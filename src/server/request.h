#pragma once
// Parsing and validation of the JSON bodies of POST /v1/chat/completions and
// POST /v1/completions (OpenAI API). Everything a client can get wrong is
// rejected here with an ApiError naming the field: malformed JSON or invalid
// UTF-8, wrong types, out-of-range numbers, unknown model. A field that is not
// honoured is refused (400 unsupported_parameter) unless its value changes
// nothing (n = 1, user, ...): request_fields.h has the list.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace dgemma::server {

enum class Endpoint { kChat, kCompletion };

// OpenAI tool_choice (docs/server.md §7.3 says what each does here).
enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

// What the server accepts; the rest of the validation needs no model.
struct RequestLimits {
  std::string model_name;           // the one model id served ("" = accept any)
  int64_t max_tokens_limit = 4096;  // upper bound of max_tokens
  int64_t max_stop_strings = 4;     // OpenAI's limit
  int64_t max_stop_bytes = 256;     // per stop string
  int64_t max_choices = 16;         // upper bound of n
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;                  // as given (empty when absent)
  std::vector<ChatMessage> messages;  // chat
  // Chat tool calling: the function objects of `tools` ({name, description?,
  // parameters?}), tool_choice (kFunction: tool_choice_function names it)
  // and parallel_tool_calls.
  std::vector<json::Value> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_function;
  bool parallel_tool_calls = true;
  std::string prompt;                              // completion, text form
  std::optional<std::vector<int32_t>> prompt_ids;  // completion, token-id form
  std::optional<int64_t> max_tokens;               // absent: the server default
  // Temperature schedule (docs/model.md §3.1): `temperature` scales the model's
  // t_max..t_min schedule so that its first step runs at `temperature`;
  // t_min/t_max (extension) set it directly. Absent: the model's defaults.
  std::optional<double> temperature;
  std::optional<double> t_min, t_max;
  std::optional<int64_t> max_denoising_steps;  // extension
  // Sampling controls (docs/model.md §3.7): filters of the per-position draw
  // and penalties on tokens this completion committed in earlier canvases.
  std::optional<int64_t> top_k;  // llama.cpp / vLLM extension
  std::optional<double> top_p, min_p;
  std::optional<double> presence_penalty, frequency_penalty;
  std::optional<double> repeat_penalty;  // llama.cpp extension
  // `seed`: a non-negative integer is used as given; a negative one (-1, as
  // llama.cpp's server takes it) asks for a seed the server chooses, as
  // leaving it out does for a sampled request, and for a greedy one too.
  std::optional<uint64_t> seed;
  bool random_seed = false;
  // Choices (`n`): generated side by side from one prompt, choice i with
  // seed + i, so that a request for choice i alone (n = 1, seed + i) gets the
  // same text.
  int64_t n = 1;
  // Log-probabilities of the answer's tokens (docs/server.md §5): chat
  // `logprobs: true` + `top_logprobs` (0-20); completions `logprobs: k` (1-5)
  // turns them on with k alternatives.
  bool logprobs = false;
  int64_t top_logprobs = 0;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool include_drafts = false;  // stream_options.include_drafts (extension): a chunk per denoising step
};

// Parses a request body for `endpoint`. Throws ApiError (400, or 404 for an
// unknown model).
CompletionRequest parse_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits);

}  // namespace dgemma::server
