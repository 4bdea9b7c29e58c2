#include "tokenizer/tool_call_parser.h"

#include <cstdint>

#include "core/utf8.h"
#include "dgemma/error.h"
#include "tokenizer/tool_markup.h"

namespace dgemma {
namespace {

using json::Value;

// Nesting deeper than this is not a call the model meant.
constexpr int kMaxDepth = 32;

bool is_space(uint32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A recursive-descent reader of one call's argument object. Every method
// returns false on malformed input; nothing throws.
class ArgumentReader {
 public:
  explicit ArgumentReader(std::string_view s) : s_(s) {}
  size_t pos() const { return pos_; }

  // `{key:value,...}` starting at pos (which holds '{').
  bool object(Value& out, int depth) {
    if (depth > kMaxDepth || !eat('{')) return false;
    json::Object fields;
    skip_space();
    if (eat('}')) {
      out = Value(std::move(fields));
      return true;
    }
    while (true) {
      std::string key;
      Value value;
      if (!read_key(key)) return false;
      skip_space();
      if (!eat(':')) return false;
      if (!read_value(value, depth)) return false;
      bool replaced = false;  // a repeated key: the last one wins, as JSON readers do
      for (auto& [k, v] : fields)
        if (k == key) {
          v = std::move(value);
          replaced = true;
        }
      if (!replaced) fields.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (eat('}')) break;
      if (!eat(',')) return false;
      skip_space();
    }
    out = Value(std::move(fields));
    return true;
  }

 private:
  bool at(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  // <|"|>text<|"|>: the text is taken as it is (the format has no escapes).
  bool delimited(std::string& out) {
    pos_ += kToolQuote.size();
    const size_t end = s_.find(kToolQuote, pos_);
    if (end == std::string_view::npos) return false;
    out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + kToolQuote.size();
    return true;
  }

  // A bare key runs to the ':'; a delimited one is a string.
  bool read_key(std::string& key) {
    if (at(kToolQuote)) return delimited(key);
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ':' && s_[pos_] != ',' && s_[pos_] != '{' && s_[pos_] != '}' &&
           s_[pos_] != '[' && s_[pos_] != ']' && !at(kToolQuote))
      ++pos_;
    key = std::string(trim_if(s_.substr(start, pos_ - start), is_space));
    return !key.empty();
  }

  bool read_value(Value& out, int depth) {
    skip_space();
    if (pos_ >= s_.size()) return false;
    if (at(kToolQuote)) {
      std::string text;
      if (!delimited(text)) return false;
      out = Value(std::move(text));
      return true;
    }
    if (s_[pos_] == '{') return object(out, depth + 1);
    if (s_[pos_] == '[') return array(out, depth + 1);
    if (s_[pos_] == '"') return json_string(out);
    return bare(out);
  }

  bool array(Value& out, int depth) {
    if (depth > kMaxDepth || !eat('[')) return false;
    json::Array items;
    skip_space();
    if (!eat(']')) {
      while (true) {
        Value item;
        if (!read_value(item, depth)) return false;
        items.push_back(std::move(item));
        skip_space();
        if (eat(']')) break;
        if (!eat(',')) return false;
      }
    }
    out = Value(std::move(items));
    return true;
  }

  // A JSON-quoted string, which the model may write instead of <|"|>.
  bool json_string(Value& out) {
    const size_t start = pos_++;
    while (pos_ < s_.size() && s_[pos_] != '"') pos_ += s_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= s_.size()) return false;
    ++pos_;
    try {
      out = json::parse(s_.substr(start, pos_ - start));
    } catch (const Error&) {
      return false;
    }
    return true;
  }

  // A number, true, false, null (or None, as the reference prints null), or
  // else an unquoted word taken as a string. A ':' ends it: a value does not
  // hold one, so it is a key after a missing comma.
  bool bare(Value& out) {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '}' && s_[pos_] != ']' && s_[pos_] != '{' &&
           s_[pos_] != '[' && s_[pos_] != ':' && !at(kToolQuote))
      ++pos_;
    const std::string_view word = trim_if(s_.substr(start, pos_ - start), is_space);
    if (word.empty()) return false;
    if (word == "None") {
      out = Value();
      return true;
    }
    if (word == "True" || word == "False") {
      out = Value(word == "True");
      return true;
    }
    try {
      out = json::parse(word);
    } catch (const Error&) {
      out = Value(std::string(word));
    }
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// One call starting right after `<|tool_call>`; `used` gets the bytes read
// up to and including `<tool_call|>`.
std::optional<ParsedToolCall> parse_call(std::string_view s, size_t& used) {
  constexpr std::string_view kCall = "call:";
  size_t p = 0;
  while (p < s.size() && is_space(s[p])) ++p;
  if (s.substr(p, kCall.size()) != kCall) return std::nullopt;
  p += kCall.size();
  const size_t brace = s.find('{', p);
  if (brace == std::string_view::npos) return std::nullopt;
  ParsedToolCall call;
  call.name = std::string(s.substr(p, brace - p));
  if (call.name.empty()) return std::nullopt;
  for (char c : call.name)
    if (is_space(c) || c == '<' || c == '>' || c == '}' || c == ',' || c == ':') return std::nullopt;
  ArgumentReader reader(s.substr(brace));
  if (!reader.object(call.arguments, 0)) return std::nullopt;
  p = brace + reader.pos();
  while (p < s.size() && is_space(s[p])) ++p;
  if (s.substr(p, kToolCallEnd.size()) != kToolCallEnd) return std::nullopt;
  used = p + kToolCallEnd.size();
  return call;
}

}  // namespace

std::optional<ParsedToolCalls> parse_tool_calls(std::string_view text) {
  // The reader decodes code points (names, bare values, trimming); text that
  // is not valid UTF-8 (never the server's, which settles UTF-8 first) holds
  // no call it could read.
  if (find_invalid_utf8(text) != std::string_view::npos) return std::nullopt;
  ParsedToolCalls out;
  std::string content;
  size_t pos = 0;
  while (true) {
    const size_t begin = text.find(kToolCallBegin, pos);
    content += text.substr(pos, begin == std::string_view::npos ? std::string_view::npos : begin - pos);
    if (begin == std::string_view::npos) break;
    size_t used = 0;
    std::optional<ParsedToolCall> call = parse_call(text.substr(begin + kToolCallBegin.size()), used);
    if (!call) return std::nullopt;
    out.calls.push_back(std::move(*call));
    pos = begin + kToolCallBegin.size() + used;
  }
  // The text around the calls is trimmed of whitespace; trim_if reads code
  // points, so text that is not valid UTF-8 (never the server's, which
  // settles UTF-8 first) is returned as it is.
  out.content =
      find_invalid_utf8(content) == std::string_view::npos ? std::string(trim_if(content, is_space)) : content;
  return out;
}

}  // namespace dgemma
