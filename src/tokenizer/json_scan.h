#pragma once
// A pull scanner over the text of tokenizer.json. The generic DOM parser
// (core/json.h) is used for the small sections; the two big ones (model.vocab,
// 262k entries, and model.merges, 515k pairs) are read straight from the text
// with this scanner so that loading stays far below the 300 ms target
// (a DOM of 1.3 M strings costs several times that). It is as strict as
// core/json.h: bad escapes, control characters, invalid UTF-8 and bad
// structure are errors naming the file, line and column.
#include <cstdint>
#include <string>
#include <string_view>

namespace dgemma::tok {

class JsonScanner {
 public:
  JsonScanner(std::string_view text, std::string source, size_t base_offset = 0)
      : s_(text), source_(std::move(source)), base_(base_offset) {}

  void skip_ws() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
      ++pos_;
    }
  }
  // After whitespace: is the next character `c`? Consumes it when it is.
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what);
  bool at_end() {
    skip_ws();
    return pos_ >= s_.size();
  }
  char peek() {
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }

  // Reads a string. The view points into the text when the string has no
  // escapes, otherwise into `scratch` (valid until scratch changes).
  std::string_view read_string(std::string& scratch);
  // Reads an integer literal (no fraction/exponent).
  int64_t read_int();
  // Skips one value (structure only, strings checked) and returns its text;
  // the caller validates it fully with json::parse when it needs the value.
  std::string_view skip_value();

  size_t pos() const { return pos_; }
  size_t base() const { return base_; }
  const std::string& source() const { return source_; }
  [[noreturn]] void fail(const std::string& why) const;

 private:
  void read_escape(std::string& out);

  std::string_view s_;
  std::string source_;
  size_t base_;  // offset of s_ within the whole file, for error positions
  size_t pos_ = 0;
};

}  // namespace dgemma::tok
