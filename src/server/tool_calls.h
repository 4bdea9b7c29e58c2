#pragma once
// Tool calls in a streamed answer (docs/server.md §7). The
// answer's text arrives canvas by canvas with the tool-format markers kept
// (CompletionText's kept_special); ToolCallText passes the text before the
// first `<|tool_call>` on as content and holds everything from there on. When
// the answer is complete, the held text is parsed: well-formed calls become
// OpenAI tool_calls, anything else is returned as content after all.
#include <string>
#include <string_view>
#include <vector>

namespace dgemma::server {

// One call as the OpenAI answer carries it.
struct ToolCall {
  std::string id;         // "call_..."
  std::string name;       // the function
  std::string arguments;  // a JSON object, as text
};

class ToolCallText {
 public:
  // `prefill`: tool-call text the prompt already ends with (tool_choice
  // "required" or a named function: "<|tool_call>call:" or
  // "<|tool_call>call:NAME{"); the answer continues it. `max_calls` <= 0: no limit.
  explicit ToolCallText(std::string prefill = {}, int max_calls = 0);

  // Newly generated text; returns the content that can be shown now.
  std::string push(std::string_view text);
  // The answer is complete: returns the content still to show. calls() then
  // holds the calls, when the held text parsed; `id_prefix` + index names them.
  std::string finish(const std::string& id_prefix);

  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  std::string prefill_;
  int max_calls_;
  bool in_call_ = false;
  std::string pending_;  // content held back: it may be the start of "<|tool_call>"
  std::string held_;     // from the first "<|tool_call>" on
  std::vector<ToolCall> calls_;
};

}  // namespace dgemma::server
