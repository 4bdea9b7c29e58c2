#pragma once
// OpenAI wire formats: chat.completion / text_completion answers, their
// streaming chunks (chat.completion.chunk; text_completion for
// /v1/completions) framed as server-sent events, the model list and error
// bodies. Every builder returns compact JSON.
//
// Extensions (extra fields stock clients ignore):
//  * "dgemma": {seed, canvases, denoising_steps, queue_ms, ttft_ms, total_ms}
//    on the final answer/chunk (with n > 1: seed of choice 0, the others
//    seed + index; canvases and steps summed over the choices);
//  * draft chunks (stream_options.include_drafts): an empty delta plus
//    "dgemma_draft": {canvas, step, max_steps, accepted, canvas_length,
//    mean_entropy, mask, text} per denoising step.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "server/request.h"
#include "server/service.h"

namespace dgemma::server {

struct ResponseContext {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string model;
  uint64_t seed = 0;      // of choice 0; choice i used seed + i
  int64_t choice = 0;     // the "index" of the choice a stream chunk belongs to
  bool logprobs = false;  // answers and chunks carry "logprobs" (else null)
};

// What one choice of a request produced.
struct ChoiceOutcome {
  std::string text;
  StreamEvent done;
  std::vector<AnswerToken> logprobs;  // with ResponseContext::logprobs
};

// Non-streaming answer: one choice, or `n` of them (index i = choices[i]).
// Usage counts the prompt once and the completion tokens of every choice.
std::string completion_body(const ResponseContext& ctx, const std::string& text, const StreamEvent& done);
std::string completion_body(const ResponseContext& ctx, std::span<const ChoiceOutcome> choices);
// The done events of a request's choices as one: the first's prompt tokens,
// the sums of completion tokens, canvases and steps, the longest queue wait
// and total time, the shortest time to first token.
StreamEvent combine_done(std::span<const StreamEvent> dones);

// Streaming chunks (JSON, without SSE framing).
std::string chunk_start(const ResponseContext& ctx);  // chat: the assistant role; completions: empty text
// With ResponseContext::logprobs, `logprobs` are the tokens this chunk
// completes; completions count their text_offset from `text_offset`.
std::string chunk_text(const ResponseContext& ctx, const std::string& text, std::span<const AnswerToken> logprobs = {},
                       int64_t text_offset = 0);
std::string chunk_draft(const ResponseContext& ctx, const StreamEvent& draft);
// The chunk with finish_reason; carries usage too (extension for chat, where
// OpenAI sends it only in the include_usage chunk).
std::string chunk_finish(const ResponseContext& ctx, const StreamEvent& done);
// stream_options.include_usage: "choices": [] and the usage.
std::string chunk_usage(const ResponseContext& ctx, const StreamEvent& done);

// "data: JSON\n\n"
std::string sse_event(const std::string& json);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

std::string models_body(const std::string& model, int64_t created);
std::string model_body(const std::string& model, int64_t created);

}  // namespace dgemma::server
