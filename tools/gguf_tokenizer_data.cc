#include "gguf_tokenizer_data.h"

#include <filesystem>
#include <string_view>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"

namespace dgemma::cli {
namespace {

namespace fs = std::filesystem;

// The chat format's markers that must always be rendered as text, so a chat
// parser can read them: typed user-defined even where tokenizer.json calls
// them special (docs/formats.md §5.4).
constexpr std::string_view kVisibleMarkers[] = {"<|channel>",       "<channel|>",       "<|tool_call>", "<tool_call|>",
                                                "<|tool_response>", "<tool_response|>", "<|\"|>"};

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

bool is_byte_piece(const std::string& s) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && hex(s[3]) && hex(s[4]) && s[5] == '>';
}

json::Value parse_file(const std::string& path) {
  json::ParseOptions po;
  po.source = path;
  return json::parse(read_text_file(path), po);
}

std::string chat_template_of(const std::string& dir) {
  const fs::path jinja = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja)) return read_text_file(jinja.string());
  const fs::path cfg = fs::path(dir) / "tokenizer_config.json";
  if (!fs::exists(cfg)) return "";
  const json::Value v = parse_file(cfg.string());
  const json::Value* t = v.is_object() ? v.find("chat_template") : nullptr;
  return t && t->is_string() ? t->as_string() : "";
}

}  // namespace

GgufTokenizerData gguf_tokenizer_data(const std::string& dir, const ModelConfig& config) {
  const std::string path = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(path)) throw Error(dir + ": no tokenizer.json; a GGUF file carries the tokenizer, so it is needed");
  const json::Value root = parse_file(path);
  const json::Value* model = root.is_object() ? root.find("model") : nullptr;
  if (!model || !model->is_object()) throw Error(path + ": no \"model\" object");
  const json::Value* type = model->find("type");
  if (!type || !type->is_string() || type->as_string() != "BPE")
    throw Error(path + ": model.type must be \"BPE\" for a GGUF tokenizer");
  const json::Value* vocab = model->find("vocab");
  if (!vocab || !vocab->is_object()) throw Error(path + ": no model.vocab object");

  GgufTokenizerData t;
  t.tokens.assign(size_t(config.vocab_size), std::string());
  std::vector<bool> seen(t.tokens.size(), false);
  auto place = [&](const std::string& piece, int64_t id, const char* where) {
    if (id < 0 || id >= config.vocab_size)
      throw Error(path + ": " + where + " token '" + piece + "' has id " + std::to_string(id) +
                  " outside the vocabulary of " + std::to_string(config.vocab_size));
    t.tokens[size_t(id)] = piece;
    seen[size_t(id)] = true;
  };
  for (const auto& [piece, id] : vocab->as_object()) place(piece, id.as_int("model.vocab id"), "model.vocab");
  t.token_types.assign(t.tokens.size(), kNormal);
  for (size_t i = 0; i < t.tokens.size(); ++i)
    if (is_byte_piece(t.tokens[i])) t.token_types[i] = kByte;
  if (const json::Value* unk = model->find("unk_token"); unk && unk->is_string())
    for (size_t i = 0; i < t.tokens.size(); ++i)
      if (seen[i] && t.tokens[i] == unk->as_string()) {
        t.token_types[i] = kUnknown;
        t.unknown_id = int32_t(i);
      }
  if (const json::Value* added = root.find("added_tokens"); added && added->is_array())
    for (const json::Value& a : added->as_array()) {
      const json::Value* id = a.is_object() ? a.find("id") : nullptr;
      const json::Value* content = a.is_object() ? a.find("content") : nullptr;
      if (!id || !content) throw Error(path + ": an added_tokens entry lacks id or content");
      const std::string& piece = content->as_string("added_tokens content");
      // Added tokens past the text vocabulary (a vision model's soft tokens)
      // are not text tokens: a GGUF's vocabulary is the model's.
      if (id->as_int("added_tokens id") >= config.vocab_size) continue;
      place(piece, id->as_int(), "added");
      const json::Value* special = a.find("special");
      int32_t& ty = t.token_types[size_t(id->as_int())];
      if (ty != kUnknown) ty = special && special->is_bool() && special->as_bool() ? kControl : kUserDefined;
    }
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    if (!seen[i]) throw Error(path + ": no token has id " + std::to_string(i));
    for (std::string_view m : kVisibleMarkers)
      if (t.tokens[i] == m) t.token_types[i] = kUserDefined;
    if (t.tokens[i] == "<mask>") t.mask_id = int32_t(i);
  }
  if (const json::Value* merges = model->find("merges"); merges && merges->is_array()) {
    t.merges.reserve(merges->as_array().size());
    for (const json::Value& m : merges->as_array()) {
      if (m.is_string()) {
        t.merges.push_back(m.as_string());
      } else if (m.is_array() && m.as_array().size() == 2) {
        t.merges.push_back(m.as_array()[0].as_string("merge") + " " + m.as_array()[1].as_string("merge"));
      } else {
        throw Error(path + ": merge " + std::to_string(t.merges.size()) + " is neither \"a b\" nor [a, b]");
      }
    }
  }
  t.bos_id = int32_t(config.bos_token_id);
  t.eos_id = config.eos_token_ids.empty() ? -1 : int32_t(config.eos_token_ids.front());
  t.padding_id = int32_t(config.pad_token_id);
  t.chat_template = chat_template_of(dir);
  return t;
}

}  // namespace dgemma::cli
