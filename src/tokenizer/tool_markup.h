#pragma once
// Writing the Gemma 4 tool format (docs/server.md §7.1 describes
// it): function declarations for the system turn, the model's earlier calls
// and the tools' results, as the reference chat template renders them.
// Structure (control tokens, keys of the declaration syntax, braces) is
// written as markup, everything the caller supplied (names, descriptions,
// argument values) as content.
#include <string>
#include <string_view>

#include "core/json.h"
#include "tokenizer/prompt_writer.h"

namespace dgemma {

// The string delimiter of the tool format (token 52).
inline constexpr std::string_view kToolQuote = "<|\"|>";
inline constexpr std::string_view kToolCallBegin = "<|tool_call>";
inline constexpr std::string_view kToolCallEnd = "<tool_call|>";
inline constexpr std::string_view kToolResponseBegin = "<|tool_response>";
inline constexpr std::string_view kToolResponseEnd = "<tool_response|>";

// `<|tool>declaration:NAME{description:...,parameters:{...}}<tool|>` for one
// OpenAI function object ({name, description?, parameters?}).
void write_tool_declaration(PromptWriter& out, const json::Value& function);

// `<|tool_call>call:NAME{key:value,...}<tool_call|>`; `arguments` is a JSON
// object (keys sorted as the reference's dictsort sorts them).
void write_tool_call(PromptWriter& out, std::string_view name, const json::Value& arguments);

// `<|tool_response>response:NAME{value:<|"|>TEXT<|"|>}<tool_response|>`.
void write_tool_response(PromptWriter& out, std::string_view name, std::string_view text);

// One value in the tool format: strings between <|"|> delimiters, objects
// `{key:value,...}` with sorted keys (delimited keys when `quote_keys`),
// arrays `[a,b]`, true/false, numbers as Python prints them, null as None.
void write_tool_value(PromptWriter& out, const json::Value& value, bool quote_keys);

}  // namespace dgemma
