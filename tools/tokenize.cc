// `dgemma tokenize`: encode text, decode ids, or render a chat prompt with a
// tokenizer.json (src/tokenizer/). Output formats:
//   encode           one line of space-separated ids
//   --decode         the text exactly as decoded (no newline added)
//   --jsonl          one JSON object per input line: {"text": ...} -> {"ids": [...]}
//                    (with --decode: {"ids": [...]} -> {"text": ...})
//   --chat           ids of the rendered prompt (--text: the prompt text)
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "cli.h"
#include "tokenizer/token_id_list.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "flags.h"
#include "model_source.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::cli {
namespace {

struct Options {
  std::string tokenizer_path;
  std::string model_dir;
  bool add_special = false;
  bool decode = false;
  bool skip_special = false;
  bool jsonl = false;
  bool chat = false;
  bool text = false;
  bool thinking = false;
  bool no_generation_prompt = false;
  std::string chat_template = "auto";
};

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

void write(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

std::string ids_line(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out + "\n";
}

json::Value ids_json(const std::vector<int32_t>& ids) {
  json::Array a;
  a.reserve(ids.size());
  for (int32_t id : ids) a.emplace_back(int64_t(id));
  return a;
}

// "1, 2 3", "[1,2,3]" -> ids.
std::vector<int32_t> parse_ids(const std::string& text) { return parse_token_id_list(text, "--decode"); }

std::vector<int32_t> ids_from_json(const json::Value& v, const std::string& what) {
  std::vector<int32_t> ids;
  for (const auto& x : v.as_array(what)) {
    int64_t id = x.as_int(what);
    if (id < INT32_MIN || id > INT32_MAX) throw Error(what + ": id " + std::to_string(id) + " is out of range");
    ids.push_back(int32_t(id));
  }
  return ids;
}

int run_jsonl(const Tokenizer& tok, const Options& o, const std::string& input) {
  std::istringstream in(input);
  std::string line;
  size_t line_no = 0;
  ChatTemplateKind kind = parse_chat_template_kind(o.chat_template);
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string where = "stdin line " + std::to_string(line_no);
    json::Value v = json::parse(line, {.source = where});
    json::Value out = json::Object{};
    if (o.decode) {
      const json::Value* ids = v.find("ids");
      if (!ids) throw Error(where + ": expected an object with \"ids\"");
      out.set("text", tok.decode(ids_from_json(*ids, where + ": ids"), o.skip_special));
    } else if (o.chat) {
      // A message list, or {"messages": [...], "add_generation_prompt": ..., "enable_thinking": ...}.
      const json::Value* list = v.is_array() ? &v : v.find("messages");
      if (!list) throw Error(where + ": expected a message list or an object with \"messages\"");
      bool gen = !o.no_generation_prompt, think = o.thinking;
      if (const auto* g = v.find("add_generation_prompt")) gen = g->as_bool(where + ": add_generation_prompt");
      if (const auto* t = v.find("enable_thinking")) think = t->as_bool(where + ": enable_thinking");
      std::string prompt = render_chat(tok, chat_messages_from_json(*list, where), gen, think, kind);
      if (o.text)
        out.set("text", prompt);
      else
        out.set("ids", ids_json(tok.encode(prompt, false)));
    } else {
      const json::Value* text = v.find("text");
      if (!text) throw Error(where + ": expected an object with \"text\"");
      out.set("ids", ids_json(tok.encode(text->as_string(where + ": text"), o.add_special)));
    }
    write(json::dump(out) + "\n");
  }
  return 0;
}

int run(const Args& args) {
  Options o;
  FlagParser flags("dgemma tokenize [options] [TEXT | IDS | MESSAGES_JSON]",
                   "Encodes text to token ids (input: the argument, or stdin when absent), decodes ids to\n"
                   "text, or renders a chat prompt. Encode prints space-separated ids; decode prints the\n"
                   "text as-is (no newline added). The ids line is what `dgemma generate --prompt-ids` takes.\n"
                   "Without --tokenizer or -m, the built-in default model's tokenizer is used (the real\n"
                   "262,144-token Gemma vocabulary with the Gemma 4 control tokens; created on first use, like\n"
                   "`dgemma run` without -m).");
  flags.add_string("--tokenizer", &o.tokenizer_path, "tokenizer.json to use", "FILE");
  flags.add_string("-m,--model", &o.model_dir, "model directory (uses DIR/tokenizer.json)", "DIR");
  flags.add_bool("--add-special", &o.add_special, "apply the post-processor (Gemma 3: leading <bos>)");
  flags.add_bool("--decode", &o.decode, "input is token ids (comma/space separated, or JSON lines with --jsonl)");
  flags.add_bool("--skip-special", &o.skip_special, "with --decode: leave special tokens out");
  flags.add_bool("--jsonl", &o.jsonl, "JSON lines: {\"text\"} -> {\"ids\"}; with --decode {\"ids\"} -> {\"text\"}");
  flags.add_bool("--chat", &o.chat, "input is a JSON message list [{\"role\",\"content\"}...]; print the prompt ids");
  flags.add_bool("--text", &o.text, "with --chat: print the rendered prompt text instead of ids");
  flags.add_bool("--thinking", &o.thinking, "with --chat: enable thinking (Gemma 4 <|think|>)");
  flags.add_bool("--no-generation-prompt", &o.no_generation_prompt, "with --chat: do not open a model turn");
  flags.add_string("--template", &o.chat_template, "with --chat: chat template: auto, gemma4 or gemma3", "NAME");
  if (!flags.parse(args)) return 0;

  if (!o.tokenizer_path.empty() && !o.model_dir.empty())
    throw UsageError("tokenize: give either --tokenizer or -m, not both");
  if (o.decode && o.chat) throw UsageError("tokenize: --decode and --chat cannot be combined");
  if (flags.positional().size() > 1)
    throw UsageError("tokenize: expected at most one input argument, got " + std::to_string(flags.positional().size()) +
                     " (quote the text)");
  // --tokenizer, -m (a folder's tokenizer.json or a GGUF file's own), or the
  // default model's tokenizer, as `run` without -m.
  const std::string model =
      o.model_dir.empty() && o.tokenizer_path.empty() ? resolve_model_dir(ModelFlags{}, true) : o.model_dir;
  Tokenizer tok = o.tokenizer_path.empty() ? load_model_tokenizer("", model) : Tokenizer::load(o.tokenizer_path);
  std::string input = flags.positional().empty() ? read_stdin() : flags.positional()[0];

  if (o.jsonl) return run_jsonl(tok, o, input);
  if (o.decode) {
    write(tok.decode(parse_ids(input), o.skip_special));
    return 0;
  }
  if (o.chat) {
    json::Value v = json::parse(input, {.source = "chat messages"});
    const json::Value* list = v.is_array() ? &v : v.find("messages");
    if (!list) throw Error("--chat: expected a JSON message list or an object with \"messages\"");
    std::string prompt = render_chat(tok, chat_messages_from_json(*list, "chat messages"), !o.no_generation_prompt,
                                     o.thinking, parse_chat_template_kind(o.chat_template));
    write(o.text ? prompt : ids_line(tok.encode(prompt, false)));
    return 0;
  }
  write(ids_line(tok.encode(input, o.add_special)));
  return 0;
}

const Subcommand kTokenize("tokenize", "encode/decode text with a tokenizer.json, render chat prompts", run);

}  // namespace
}  // namespace dgemma::cli
