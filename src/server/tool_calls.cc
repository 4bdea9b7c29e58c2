#include "server/tool_calls.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/json.h"
#include "tokenizer/tool_call_parser.h"
#include "tokenizer/tool_markup.h"

namespace dgemma::server {

ToolCallText::ToolCallText(std::string prefill, int max_calls)
    : prefill_(std::move(prefill)), max_calls_(max_calls), in_call_(!prefill_.empty()), held_(prefill_) {}

std::string ToolCallText::push(std::string_view text) {
  if (in_call_) {
    held_ += text;
    return {};
  }
  pending_ += text;
  const size_t begin = pending_.find(kToolCallBegin);
  if (begin != std::string::npos) {
    in_call_ = true;
    held_ = pending_.substr(begin);
    std::string out = pending_.substr(0, begin);
    pending_.clear();
    return out;
  }
  // Hold back a tail that may be the start of the marker.
  size_t hold = std::min(pending_.size(), kToolCallBegin.size() - 1);
  while (hold > 0 && pending_.compare(pending_.size() - hold, hold, kToolCallBegin, 0, hold) != 0) --hold;
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string ToolCallText::finish(const std::string& id_prefix) {
  if (!in_call_) return std::move(pending_);
  std::optional<ParsedToolCalls> parsed = parse_tool_calls(held_);
  if (!parsed || parsed->calls.empty()) {
    // Not a call after all: the generated text as it is (without the prefill,
    // which the model did not write).
    return held_.substr(prefill_.size());
  }
  const size_t n = max_calls_ > 0 ? std::min(parsed->calls.size(), size_t(max_calls_)) : parsed->calls.size();
  for (size_t i = 0; i < n; ++i) {
    ParsedToolCall& c = parsed->calls[i];
    calls_.push_back(
        {n == 1 ? id_prefix : id_prefix + "_" + std::to_string(i), std::move(c.name), json::dump(c.arguments)});
  }
  return parsed->content;
}

}  // namespace dgemma::server
