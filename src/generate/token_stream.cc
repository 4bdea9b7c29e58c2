#include "generate/token_stream.h"

#include <algorithm>

namespace dgemma {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kNone: return "none";
    case StopReason::kEos: return "eos";
    case StopReason::kLength: return "length";
  }
  return "?";
}

TokenStream::TokenStream(std::vector<int32_t> eos_token_ids, int64_t max_tokens)
    : eos_(std::move(eos_token_ids)), max_tokens_(max_tokens) {
  if (max_tokens_ == 0) reason_ = StopReason::kLength;
}

std::span<const int32_t> TokenStream::push(std::span<const int32_t> canvas) {
  if (finished()) return {};
  const size_t first = tokens_.size();
  for (const int32_t t : canvas) {
    if (std::find(eos_.begin(), eos_.end(), t) != eos_.end()) {
      reason_ = StopReason::kEos;
      break;
    }
    tokens_.push_back(t);
    if (max_tokens_ >= 0 && int64_t(tokens_.size()) >= max_tokens_) {
      reason_ = StopReason::kLength;
      break;
    }
  }
  return std::span<const int32_t>(tokens_).subspan(first);
}

void TokenStream::finish() {
  if (reason_ == StopReason::kNone) reason_ = StopReason::kLength;
}

namespace {
// Length of `text` without its trailing U+FFFD characters (EF BF BD).
size_t settled_length(const std::string& text) {
  size_t n = text.size();
  while (n >= 3 && static_cast<unsigned char>(text[n - 3]) == 0xEF && static_cast<unsigned char>(text[n - 2]) == 0xBF &&
         static_cast<unsigned char>(text[n - 1]) == 0xBD)
    n -= 3;
  return n;
}
}  // namespace

std::string TextStream::text() const { return tokenizer_->decode(ids_, skip_special_); }

std::string TextStream::push(std::span<const int32_t> ids) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  const std::string full = text();
  const size_t settled = settled_length(full);
  // Decoding is prefix-stable except for the held-back tail, so the text
  // already returned is a prefix of `full`.
  if (settled <= emitted_) return {};
  std::string out = full.substr(emitted_, settled - emitted_);
  emitted_ = settled;
  return out;
}

std::string TextStream::flush() {
  const std::string full = text();
  if (full.size() <= emitted_) return {};
  std::string out = full.substr(emitted_);
  emitted_ = full.size();
  return out;
}

}  // namespace dgemma
