#pragma once
// Reading the model's tool calls out of generated text (the Gemma 4 tool
// format, docs/server.md §7.2): `<|tool_call>call:NAME{key:value,
// ...}<tool_call|>`, values as tokenizer/tool_markup.h writes them. The text
// must have been decoded with the tool-format control tokens kept
// (<|tool_call>, <tool_call|>, <|"|>), not skipped as special tokens.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace dgemma {

struct ParsedToolCall {
  std::string name;
  json::Value arguments;  // always a JSON object
};

struct ParsedToolCalls {
  std::string content;  // the text outside the calls, trimmed
  std::vector<ParsedToolCall> calls;
};

// Splits `text` into calls and the text around them. Text without
// `<|tool_call>` is all content. Returns nullopt when a `<|tool_call>` does not
// open a well-formed call (no `call:`, an empty name, unbalanced braces, an
// unterminated string, no `<tool_call|>`) or the text is not valid UTF-8: the
// caller shows such text as it is.
std::optional<ParsedToolCalls> parse_tool_calls(std::string_view text);

}  // namespace dgemma
