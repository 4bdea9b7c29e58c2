#pragma once
// Chat prompt rendering for Gemma models, written natively (no Jinja engine):
//
// * Gemma 4 / DiffusionGemma (docs/model.md §3.6, docs/formats.md §6.2):
//   `<bos>[<|turn>system\n[<|think|>\n]{system}<turn|>\n]` then
//   `<|turn>{user|model}\n{text}<turn|>\n` per message, and the generation
//   prompt `<|turn>model\n`, followed by the empty thought channel
//   `<|channel>thought\n<channel|>` when thinking is off. Distilled from the
//   upstream chat_template.jinja; previous model turns have their thought
//   channels stripped as upstream does. Tools (declarations in the system
//   turn, earlier calls and their results inside the model turn) follow the
//   reference's tool format, docs/server.md §7.
// * Gemma 3 (the jinja template of tokenizer_config.json, rendered exactly):
//   no system turn (system text + "\n\n" prefixes the first user turn), roles
//   must alternate user/assistant, `<start_of_turn>{user|model}\n...`
//   `<end_of_turn>\n`, image parts become `<start_of_image>`.
//
// The template writes `<bos>` itself: encode the result with
// add_special = false (docs/formats.md §6.2: never add a second BOS). Control
// tokens are looked up by content in the tokenizer; a missing one is a
// dgemma::Error naming it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "tokenizer/prompt_writer.h"
#include "tokenizer/tokenizer.h"

namespace dgemma {

struct ChatContentPart {
  std::string type;  // "text" or "image" (other types render nothing)
  std::string text;  // for "text"
  // For "image": where the picture comes from (a data: URL, an http(s) URL or
  // a file path), as the caller gave it. Rendering writes only the image's
  // placeholder; the caller decodes the picture (docs/image.md).
  std::string source;
};

// A call the model made in an earlier assistant turn.
struct ChatToolCall {
  std::string id;         // matched by the tool_call_id of the "tool" messages that answer it
  std::string name;       // the function
  json::Value arguments;  // a JSON object
};

struct ChatMessage {
  ChatMessage() = default;
  // {role, content[, parts]}: the common case, without tool calls.
  ChatMessage(std::string r, std::string c, std::optional<std::vector<ChatContentPart>> p = std::nullopt)
      : role(std::move(r)), content(std::move(c)), parts(std::move(p)) {}

  std::string role;     // "system", "user", "assistant" (written "model"), "tool", ...
  std::string content;  // plain-text content
  // List content ([{type:text|image}]); when set it is used instead of `content`.
  std::optional<std::vector<ChatContentPart>> parts;
  std::vector<ChatToolCall> tool_calls;  // assistant: the calls it made
  std::string tool_call_id;              // tool: the call this message answers
};

enum class ChatTemplateKind {
  kAuto,    // Gemma 4 when the vocabulary has "<|turn>", else Gemma 3 when it has "<start_of_turn>"
  kGemma4,  // DiffusionGemma
  kGemma3,
};

// Which template kAuto picks for this tokenizer (throws when neither fits).
ChatTemplateKind detect_chat_template(const Tokenizer& tokenizer);
const char* chat_template_name(ChatTemplateKind kind);
// Parses "auto", "gemma4", "gemma3" (for CLI flags).
ChatTemplateKind parse_chat_template_kind(std::string_view name);

// Renders the prompt text. `enable_thinking` only exists in Gemma 4.
// `tools`: the functions the model may call, each an OpenAI function object
// ({name, description?, parameters?}); Gemma 4 only (gemma3 has no tool
// format and throws when given any). A "tool" message is rendered inside the
// model turn of the assistant message whose call it answers (the
// tool_call_id); one that follows no such message is dropped, as upstream.
std::string render_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, bool enable_thinking,
                        ChatTemplateKind kind = ChatTemplateKind::kAuto, std::span<const json::Value> tools = {});

// The prompt as parts (tokenizer/prompt_writer.h: template markup or caller
// text); their concatenation is render_chat's text.
std::vector<ChatPromptPart> render_chat_parts(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt, bool enable_thinking,
                                              ChatTemplateKind kind = ChatTemplateKind::kAuto,
                                              std::span<const json::Value> tools = {});

// How special-token text inside message content is encoded.
enum class ChatContent {
  // As the reference (render, then encode the whole text): "<turn|>" typed in
  // a message becomes the control token, so content can forge turns.
  kSpecialTokens,
  // Content is plain text (Tokenizer::encode_plain): only the template's own
  // markup produces control tokens. Identical ids whenever the content holds
  // no special-token text.
  kPlainText,
};

// The rendered prompt encoded with add_special = false; markup always with
// special tokens, content as `content` says.
std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, bool enable_thinking,
                                 ChatTemplateKind kind = ChatTemplateKind::kAuto,
                                 ChatContent content = ChatContent::kSpecialTokens,
                                 std::span<const json::Value> tools = {});

// The roles a chat message may have, for every reader of messages (the
// server's requests, `dgemma tokenize --chat`): system, developer (OpenAI's
// newer name of system), user, assistant. Returns the role the templates
// render ("developer" -> "system"), or nullopt for any other role (a tool
// turn, a made-up name): refused rather than rendered as a turn the model
// was never trained on.
std::optional<std::string> chat_template_role(std::string_view role);
// "system, developer, user, assistant", for messages.
inline constexpr const char* kChatRoleNames = "system, developer, user, assistant";

// Parses an OpenAI-style JSON message list (roles: chat_template_role):
// [{"role": "user", "content": "text" | [{"type": "text", "text": "..."}, {"type": "image"}]}, ...]
// `source` names the input in errors.
std::vector<ChatMessage> parse_chat_messages(std::string_view json_text, const std::string& source = "messages");
std::vector<ChatMessage> chat_messages_from_json(const json::Value& list, const std::string& source = "messages");

}  // namespace dgemma
