#pragma once
// tokenizer.json "post_processor": what add_special_tokens adds around the
// encoded ids. Supported: TemplateProcessing (single-sequence template) and
// null. Gemma 3 prepends <bos> (docs/formats.md §6.1); the Gemma 4 / DiffusionGemma
// template writes <bos> itself (docs/formats.md §6.2), so its file may have none.
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace dgemma::tok {

class PostProcessor {
 public:
  // `token_id` resolves special-token strings so the ids can be checked.
  static PostProcessor from_json(const json::Value& v, const std::string& source, size_t id_bound);

  // Ids before and after the sequence in the single-sequence template.
  const std::vector<int32_t>& prefix() const { return prefix_; }
  const std::vector<int32_t>& suffix() const { return suffix_; }

 private:
  std::vector<int32_t> prefix_, suffix_;
};

}  // namespace dgemma::tok
