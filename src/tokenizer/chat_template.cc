#include "tokenizer/chat_template.h"

#include "dgemma/error.h"
#include "core/utf8.h"
#include "tokenizer/tool_markup.h"

namespace dgemma {
namespace {

// Looks a control token up by content; the template is useless without it.
void require_token(const Tokenizer& tok, std::string_view content, const char* tmpl) {
  int32_t id = tok.token_id(content);
  if (id < 0)
    throw Error(std::string("chat template ") + tmpl + ": the tokenizer (" + tok.source() + ") has no token \"" +
                std::string(content) + "\"" +
                (std::string_view(tmpl) == "gemma4"
                     ? " (the Gemma 4 / DiffusionGemma template needs the model's own tokenizer.json; "
                       "a Gemma 3 tokenizer does not have the Gemma 4 turn markers)"
                     : ""));
  if (!tok.is_added(id))
    throw Error(std::string("chat template ") + tmpl + ": \"" + std::string(content) + "\" (id " + std::to_string(id) +
                ") is not an added token in " + tok.source() + ", so encoding the prompt would split it");
}

std::string_view js_trim(std::string_view s) { return trim_if(s, is_js_whitespace); }
std::string_view py_trim(std::string_view s) { return trim_if(s, is_python_whitespace); }

// ---- Gemma 3: mirrors the jinja template of tokenizer_config.json ----
// The goldens were rendered by @huggingface/jinja, whose `trim` is JS trim.
std::vector<ChatPromptPart> render_gemma3(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt, std::span<const json::Value> tools) {
  const char* kName = "gemma3";
  if (!tools.empty()) throw Error("chat template gemma3: the Gemma 3 template has no tool format (tools need gemma4)");
  require_token(tok, "<bos>", kName);
  require_token(tok, "<start_of_turn>", kName);
  require_token(tok, "<end_of_turn>", kName);
  PromptWriter out;
  out.markup("<bos>");
  std::string first_user_prefix;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    const ChatMessage& sys = messages[0];
    if (sys.parts) {
      // messages[0]['content'][0]['text'] (untrimmed).
      if (sys.parts->empty() || sys.parts->front().type != "text")
        throw Error("chat template gemma3: a list system content must start with a text part");
      first_user_prefix = sys.parts->front().text;
    } else {
      first_user_prefix = sys.content;
    }
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    size_t index0 = i - first;
    if ((m.role == "user") != (index0 % 2 == 0))
      throw Error(
          "chat template gemma3: conversation roles must alternate user/assistant/user/assistant/... "
          "(message " +
          std::to_string(i) + " has role \"" + m.role + "\")");
    std::string role = m.role == "assistant" ? "model" : m.role;
    out.markup("<start_of_turn>").markup(role).markup("\n");
    if (index0 == 0 && first > 0) out.content(first_user_prefix).markup("\n\n");
    if (m.parts) {
      for (const auto& p : *m.parts) {
        if (p.type == "image") {
          require_token(tok, "<start_of_image>", kName);
          out.markup("<start_of_image>");
        } else if (p.type == "text") {
          out.content(js_trim(p.text));
        }
      }
    } else {
      out.content(js_trim(m.content));
    }
    out.markup("<end_of_turn>\n");
  }
  if (add_generation_prompt) out.markup("<start_of_turn>model\n");
  return out.take();
}

// ---- Gemma 4 / DiffusionGemma (docs/model.md §3.6) ----
// Upstream renders with Python jinja2, whose `trim` is str.strip().
std::string strip_thinking(std::string_view text) {
  // Drops every "<|channel>...<channel|>" span, then trims (upstream macro).
  std::string result;
  size_t pos = 0;
  while (true) {
    size_t end = text.find("<channel|>", pos);
    std::string_view part = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    size_t open = part.find("<|channel>");
    result += open == std::string_view::npos ? part : part.substr(0, open);
    if (end == std::string_view::npos) break;
    pos = end + std::string_view("<channel|>").size();
  }
  return std::string(py_trim(result));
}

// The text of a "tool" message: its content, or its text parts joined.
std::string tool_result_text(const ChatMessage& m) {
  if (!m.parts) return m.content;
  std::string text;
  for (const ChatContentPart& p : *m.parts)
    if (p.type == "text") text += p.text;
  return text;
}

std::vector<ChatPromptPart> render_gemma4(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt, bool enable_thinking,
                                          std::span<const json::Value> tools) {
  const char* kName = "gemma4";
  require_token(tok, "<bos>", kName);
  require_token(tok, "<|turn>", kName);
  require_token(tok, "<turn|>", kName);
  if (enable_thinking) require_token(tok, "<|think|>", kName);
  if (add_generation_prompt && !enable_thinking) {
    require_token(tok, "<|channel>", kName);
    require_token(tok, "<channel|>", kName);
  }
  bool any_tool_markup = !tools.empty();
  for (const ChatMessage& m : messages) any_tool_markup = any_tool_markup || !m.tool_calls.empty();
  if (any_tool_markup)
    for (const char* t :
         {"<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"})
      require_token(tok, t, kName);
  PromptWriter out;
  // What the last message rendered ended with: the generation prompt is left
  // out after a tool call or a tool result (the model goes on in its turn).
  enum class Last { kOther, kToolCall, kToolResult } last = Last::kOther;
  auto render_content = [&](PromptWriter& w, const ChatMessage& m, bool is_model) {
    if (!m.parts) {
      w.content(is_model ? strip_thinking(m.content) : std::string(py_trim(m.content)));
      return;
    }
    for (const auto& p : *m.parts) {
      if (p.type == "text") {
        w.content(py_trim(p.text));
      } else if (p.type == "image") {
        // The published Gemma 4 templates set the placeholder apart by blank
        // lines; the processor then expands it (docs/model.md §7.6).
        require_token(tok, "<|image|>", kName);
        w.markup("\n\n<|image|>\n\n");
        last = Last::kOther;
      }
    }
  };
  // Upstream trims the system turn's rendered content once more; each part is
  // trimmed already, so that outer trim never changes anything.
  out.markup("<bos>");
  size_t first = 0;
  bool has_system = !messages.empty() && (messages[0].role == "system" || messages[0].role == "developer");
  if (enable_thinking || has_system || !tools.empty()) {
    out.markup("<|turn>system\n");
    if (enable_thinking) out.markup("<|think|>\n");
    if (has_system) {
      render_content(out, messages[0], false);
      first = 1;
    }
    for (const json::Value& function : tools) write_tool_declaration(out, function);
    out.markup("<turn|>\n");
  }
  const ChatMessage* previous = nullptr;  // the last message that was not a tool result
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    // Tool results are written by the assistant message they answer.
    if (m.role == "tool") continue;
    last = Last::kOther;
    const bool is_model = m.role == "assistant" || m.role == "model";
    // A model message right after an assistant message (tool results
    // between them do not count) continues the same model turn.
    const bool continues = is_model && previous != nullptr && previous->role == "assistant";
    previous = &m;
    if (!continues) out.markup("<|turn>").markup(m.role == "assistant" ? "model" : m.role).markup("\n");
    for (const ChatToolCall& call : m.tool_calls) {
      write_tool_call(out, call.name, call.arguments);
      last = Last::kToolCall;
    }
    bool answered = false;
    if (!m.tool_calls.empty()) {
      for (size_t k = i + 1; k < messages.size() && messages[k].role == "tool"; ++k) {
        std::string name = "unknown";
        for (const ChatToolCall& call : m.tool_calls)
          if (call.id == messages[k].tool_call_id) name = call.name;
        write_tool_response(out, name, tool_result_text(messages[k]));
        answered = true;
        last = Last::kToolResult;
      }
    }
    // The content follows the calls and their results; with results and no
    // content the model turn stays open, and a call without a result leaves
    // the model at an opened result.
    PromptWriter body;
    render_content(body, m, is_model);
    const std::vector<ChatPromptPart> parts = body.take();
    bool has_content = false;
    for (const ChatPromptPart& p : parts) {
      if (!py_trim(p.text).empty()) has_content = true;
      if (p.is_content)
        out.content(p.text);
      else
        out.markup(p.text);
    }
    if (last == Last::kToolCall && !answered)
      out.markup(kToolResponseBegin);
    else if (!(answered && !has_content))
      out.markup("<turn|>\n");
  }
  if (add_generation_prompt && last != Last::kToolCall && last != Last::kToolResult) {
    out.markup("<|turn>model\n");
    // Thinking off: an empty thought channel, so the model answers directly
    // (golden of docs/model.md §3.6).
    if (!enable_thinking) out.markup("<|channel>thought\n<channel|>");
  }
  return out.take();
}

}  // namespace

ChatTemplateKind detect_chat_template(const Tokenizer& tokenizer) {
  if (tokenizer.token_id("<|turn>") >= 0) return ChatTemplateKind::kGemma4;
  if (tokenizer.token_id("<start_of_turn>") >= 0) return ChatTemplateKind::kGemma3;
  throw Error("chat template: " + tokenizer.source() +
              " has neither \"<|turn>\" (Gemma 4) nor \"<start_of_turn>\" (Gemma 3); no known chat template fits");
}

const char* chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kAuto: return "auto";
    case ChatTemplateKind::kGemma4: return "gemma4";
    case ChatTemplateKind::kGemma3: return "gemma3";
  }
  return "?";
}

ChatTemplateKind parse_chat_template_kind(std::string_view name) {
  if (name == "auto") return ChatTemplateKind::kAuto;
  if (name == "gemma4") return ChatTemplateKind::kGemma4;
  if (name == "gemma3") return ChatTemplateKind::kGemma3;
  throw Error("unknown chat template \"" + std::string(name) + "\" (expected auto, gemma4 or gemma3)");
}

std::vector<ChatPromptPart> render_chat_parts(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt, bool enable_thinking, ChatTemplateKind kind,
                                              std::span<const json::Value> tools) {
  if (kind == ChatTemplateKind::kAuto) kind = detect_chat_template(tokenizer);
  if (kind == ChatTemplateKind::kGemma4)
    return render_gemma4(tokenizer, messages, add_generation_prompt, enable_thinking, tools);
  return render_gemma3(tokenizer, messages, add_generation_prompt, tools);
}

std::string render_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, bool enable_thinking, ChatTemplateKind kind,
                        std::span<const json::Value> tools) {
  std::string out;
  for (const ChatPromptPart& p :
       render_chat_parts(tokenizer, messages, add_generation_prompt, enable_thinking, kind, tools))
    out += p.text;
  return out;
}

std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, bool enable_thinking, ChatTemplateKind kind,
                                 ChatContent content, std::span<const json::Value> tools) {
  const std::vector<ChatPromptPart> parts =
      render_chat_parts(tokenizer, messages, add_generation_prompt, enable_thinking, kind, tools);
  std::vector<Tokenizer::TextPiece> pieces;
  pieces.reserve(parts.size());
  for (const ChatPromptPart& p : parts)
    pieces.push_back({p.text, !p.is_content || content == ChatContent::kSpecialTokens});
  return tokenizer.encode_pieces(pieces, false);
}

std::optional<std::string> chat_template_role(std::string_view role) {
  if (role == "system" || role == "developer") return std::string("system");
  if (role == "user" || role == "assistant") return std::string(role);
  return std::nullopt;
}

std::vector<ChatMessage> chat_messages_from_json(const json::Value& list, const std::string& source) {
  std::vector<ChatMessage> out;
  const auto& arr = list.as_array(source + ": message list");
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string what = source + "[" + std::to_string(i) + "]";
    const json::Value& m = arr[i];
    m.as_object(what);
    ChatMessage msg;
    const json::Value* role = m.find("role");
    if (!role) throw Error(what + ": missing \"role\"");
    const std::string& given = role->as_string(what + ".role");
    const std::optional<std::string> rendered = chat_template_role(given);
    if (!rendered)
      throw Error(what + ".role: expected one of " + std::string(kChatRoleNames) + ", got \"" + given + "\"");
    msg.role = *rendered;
    const json::Value* content = m.find("content");
    if (!content) throw Error(what + ": missing \"content\"");
    if (content->is_string()) {
      msg.content = content->as_string();
    } else if (content->is_array()) {
      std::vector<ChatContentPart> parts;
      for (size_t k = 0; k < content->as_array().size(); ++k) {
        const json::Value& p = content->as_array()[k];
        std::string pw = what + ".content[" + std::to_string(k) + "]";
        const json::Value* type = p.find("type");
        if (!type) throw Error(pw + ": missing \"type\"");
        ChatContentPart part{type->as_string(pw + ".type"), "", ""};
        if (part.type == "text") {
          const json::Value* text = p.find("text");
          if (!text) throw Error(pw + ": a text part needs \"text\"");
          part.text = text->as_string(pw + ".text");
        } else if (part.type == "image") {
          // Where the picture is, under the key Transformers' chat messages use
          // ("image", "url" or "path"); absent: the caller supplies the image.
          for (const char* key : {"image", "url", "path"})
            if (const json::Value* src = p.find(key); src != nullptr && part.source.empty())
              part.source = src->as_string(pw + "." + key);
        }
        parts.push_back(std::move(part));
      }
      msg.parts = std::move(parts);
    } else {
      throw Error(what + ".content: expected a string or a list of parts, got " + json::kind_name(content->kind()));
    }
    out.push_back(std::move(msg));
  }
  return out;
}

std::vector<ChatMessage> parse_chat_messages(std::string_view json_text, const std::string& source) {
  json::ParseOptions opt;
  opt.source = source;
  return chat_messages_from_json(json::parse(json_text, opt), source);
}

}  // namespace dgemma
