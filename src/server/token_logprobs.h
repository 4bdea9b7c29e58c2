#pragma once
// Log-probabilities of committed tokens for OpenAI's `logprobs` (docs/server.md
// §5): a committed token is the argmax of its canvas's last denoising step,
// so its log-probability is taken in that step's distribution, softmax of the
// processed logits z = logits / T of the step.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dgemma::server {

struct TokenAlternative {
  int32_t id = 0;
  double logprob = 0;
};

// One position of a committed canvas.
struct PositionLogprobs {
  int32_t id = 0;                     // the committed token
  double logprob = 0;                 // log softmax(z)[id]
  std::vector<TokenAlternative> top;  // the `top` most likely tokens, most likely first (ties: lower id)
};

// log softmax of the row `z` (length V, finite) at `id`, and its `top` most
// likely tokens. The sum runs in double.
PositionLogprobs position_logprobs(std::span<const float> z, int32_t id, int64_t top);

// A token as OpenAI reports it: its text, and the UTF-8 bytes it stands for
// (a byte-fallback token <0xAB> is one byte, which need not be valid UTF-8 on
// its own; its text is then U+FFFD).
struct TokenText {
  std::string text;
  std::vector<uint8_t> bytes;
};
TokenText token_text(const Tokenizer& tokenizer, int32_t id);

// One token of an answer with its log-probability and alternatives, ready
// for the wire.
struct AnswerToken {
  TokenText token;
  double logprob = 0;
  std::vector<std::pair<TokenText, double>> top;
};
AnswerToken answer_token(const Tokenizer& tokenizer, const PositionLogprobs& position);

}  // namespace dgemma::server
