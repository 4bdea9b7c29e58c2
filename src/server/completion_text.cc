#include "server/completion_text.h"

#include <algorithm>

namespace dgemma::server {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kNone: break;
  }
  return "";
}

CompletionText::CompletionText(const Tokenizer& tokenizer, std::vector<int32_t> eos_token_ids, int64_t max_tokens,
                               std::vector<std::string> stop, std::vector<int32_t> kept_special)
    : tokenizer_(tokenizer),
      eos_(eos_token_ids),
      max_tokens_(max_tokens),
      stop_(std::move(stop)),
      kept_special_(std::move(kept_special)),
      tokens_(std::move(eos_token_ids), max_tokens),
      // Special tokens are dropped before they reach the text stream (push),
      // so that the kept ones decode.
      text_(tokenizer, /*skip_special=*/false) {
  for (const std::string& s : stop_) max_stop_ = std::max(max_stop_, s.size());
}

bool CompletionText::apply_stop() {
  if (stop_.empty()) return false;
  const size_t from = searched_ >= max_stop_ ? searched_ - (max_stop_ - 1) : 0;
  size_t best = std::string::npos, best_end = 0;
  for (const std::string& s : stop_) {
    const size_t p = full_.find(s, from);
    if (p != std::string::npos && p < best) {
      best = p;
      best_end = p + s.size();
    }
  }
  searched_ = full_.size();
  if (best == std::string::npos) return false;
  // Tokens up to the one that completed the stop string: the shortest prefix
  // of the visible tokens whose text reaches the end of the match.
  const std::vector<int32_t>& ids = text_.ids();
  size_t lo = 1, hi = ids.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (tokenizer_.decode(std::span<const int32_t>(ids.data(), mid), false).size() >= best_end)
      hi = mid;
    else
      lo = mid + 1;
  }
  stop_tokens_ = ids.empty() ? 0 : source_count_[std::min(lo, ids.size()) - 1];
  full_.resize(best);
  searched_ = full_.size();
  reason_ = FinishReason::kStop;
  return true;
}

size_t CompletionText::held_back() const {
  size_t hold = 0;
  for (const std::string& s : stop_) {
    for (size_t k = std::min(s.size() - 1, full_.size()); k > hold; --k) {
      if (full_.compare(full_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

std::string CompletionText::emit(size_t upto) {
  if (upto <= emitted_) return {};
  std::string out = full_.substr(emitted_, upto - emitted_);
  emitted_ = upto;
  emitted_text_ += out;
  return out;
}

std::string CompletionText::push(std::span<const int32_t> canvas) {
  if (finished()) return {};
  const std::span<const int32_t> visible = tokens_.push(canvas);
  std::vector<int32_t> shown;
  shown.reserve(visible.size());
  int64_t count = int64_t(tokens_.tokens().size() - visible.size());
  for (const int32_t t : visible) {
    ++count;
    if (tokenizer_.is_special(t) && std::find(kept_special_.begin(), kept_special_.end(), t) == kept_special_.end())
      continue;
    shown.push_back(t);
    source_count_.push_back(count);
  }
  full_ += text_.push(shown);
  if (apply_stop()) return emit(full_.size());
  if (tokens_.finished()) return finish();
  return emit(full_.size() - held_back());
}

std::string CompletionText::finish() {
  if (reason_ == FinishReason::kStop) return emit(full_.size());
  full_ += text_.flush();
  if (apply_stop()) return emit(full_.size());
  tokens_.finish();
  reason_ = tokens_.stop_reason() == StopReason::kEos ? FinishReason::kStop : FinishReason::kLength;
  return emit(full_.size());
}

int64_t CompletionText::completion_tokens() const {
  return stop_tokens_ >= 0 ? stop_tokens_ : int64_t(tokens_.tokens().size());
}

std::string CompletionText::draft(std::span<const int32_t> argmax) const {
  const int64_t budget = max_tokens_ - int64_t(tokens_.tokens().size());
  std::vector<int32_t> ids;
  for (const int32_t t : argmax) {
    if (int64_t(ids.size()) >= budget) break;
    if (std::find(eos_.begin(), eos_.end(), t) != eos_.end()) break;
    ids.push_back(t);
  }
  return tokenizer_.decode(ids, true);
}

}  // namespace dgemma::server
