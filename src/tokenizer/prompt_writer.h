#pragma once
// The rendered chat prompt as it is built: template markup (control tokens,
// role names, the syntax of the tool format) and caller text (message
// content, tool names, descriptions, argument values), kept apart so that
// encode_chat can encode caller text as plain text (ChatContent::kPlainText).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dgemma {

// One part of a rendered prompt: template markup or caller text.
struct ChatPromptPart {
  std::string text;
  bool is_content = false;
};

class PromptWriter {
 public:
  PromptWriter& markup(std::string_view s) { return add(s, false); }
  PromptWriter& content(std::string_view s) { return add(s, true); }
  std::vector<ChatPromptPart> take() { return std::move(parts_); }

 private:
  PromptWriter& add(std::string_view s, bool is_content) {
    if (s.empty()) return *this;
    if (!parts_.empty() && parts_.back().is_content == is_content)
      parts_.back().text += s;
    else
      parts_.push_back({std::string(s), is_content});
    return *this;
  }
  std::vector<ChatPromptPart> parts_;
};

}  // namespace dgemma
