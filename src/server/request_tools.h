#pragma once
// Parsing and validation of the tool-calling parts of a chat request
// (docs/server.md §7): `tools`, `tool_choice`,
// `parallel_tool_calls`, the `tool_calls` of assistant messages and the
// `role: "tool"` messages that answer them. Every mistake is an ApiError 400
// naming the field.
#include <string>
#include <vector>

#include "core/json.h"
#include "server/request.h"
#include "tokenizer/chat_template.h"

namespace dgemma::server {

// Reads tools, tool_choice and parallel_tool_calls of a chat body into `req`.
void parse_tool_fields(const json::Value& body, CompletionRequest& req);

// The `tool_calls` array of an assistant message; `param` names it
// ("messages[2].tool_calls").
std::vector<ChatToolCall> parse_message_tool_calls(const json::Value& list, const std::string& param);

// Each "tool" message must come right after an assistant message with
// tool_calls (or after another tool message answering it), and its
// tool_call_id must be the id of one of those calls.
void check_tool_messages(const std::vector<ChatMessage>& messages);

}  // namespace dgemma::server
