#include "tokenizer/json_scan.h"

#include <cstdio>
#include <cstring>

#include "dgemma/error.h"
#include "core/json.h"
#include "core/utf8.h"

namespace dgemma::tok {

void JsonScanner::fail(const std::string& why) const {
  // Positions are reported relative to the scanned text; base_ is the byte
  // offset of that text inside the file.
  throw Error(source_ + ": invalid JSON at byte " + std::to_string(base_ + pos_) + " (" +
              json::describe_position(s_, pos_) + " of the section): " + why);
}

void JsonScanner::expect(char c, const char* what) {
  if (!consume(c)) fail(std::string("expected ") + what);
}

void JsonScanner::read_escape(std::string& out) {
  // pos_ is at the character after the backslash.
  if (const char* error = json::decode_escape(s_, pos_, out)) fail(error);
}

std::string_view JsonScanner::read_string(std::string& scratch) {
  skip_ws();
  if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string");
  ++pos_;
  size_t start = pos_;
  bool escaped = false;
  size_t run = pos_;
  while (true) {
    if (pos_ >= s_.size()) fail("unterminated string");
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '"') break;
    if (c == '\\') {
      if (!escaped) {
        scratch.clear();
        escaped = true;
      }
      scratch.append(s_.data() + run, pos_ - run);
      ++pos_;
      read_escape(scratch);
      run = pos_;
      continue;
    }
    if (c < 0x20) fail("control character inside string");
    if (c < 0x80) {
      ++pos_;
      continue;
    }
    // Validate one multi-byte sequence.
    const size_t n = utf8_sequence_length(s_, pos_);
    if (n == 0) fail("invalid UTF-8 in string");
    pos_ += n;
  }
  std::string_view out;
  if (escaped) {
    scratch.append(s_.data() + run, pos_ - run);
    out = scratch;
  } else {
    out = s_.substr(start, pos_ - start);
  }
  ++pos_;  // closing quote
  return out;
}

int64_t JsonScanner::read_int() {
  skip_ws();
  size_t start = pos_;
  bool neg = false;
  if (pos_ < s_.size() && s_[pos_] == '-') {
    neg = true;
    ++pos_;
  }
  if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') fail("expected an integer");
  if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
    fail("invalid number (leading zero)");
  int64_t v = 0;
  while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
    if (pos_ - start > 15) fail("integer too large");
    v = v * 10 + (s_[pos_++] - '0');
  }
  if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
    fail("expected an integer, got a fractional number");
  return neg ? -v : v;
}

std::string_view JsonScanner::skip_value() {
  skip_ws();
  size_t start = pos_;
  int depth = 0;
  do {
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    char c = s_[pos_];
    if (c == '"') {
      // Only find the closing quote: every skipped value is parsed again
      // (and validated) by whoever uses it.
      size_t p = pos_ + 1;
      while (true) {
        const void* q = std::memchr(s_.data() + p, '"', s_.size() - p);
        if (!q) fail("unterminated string");
        size_t quote = size_t(static_cast<const char*>(q) - s_.data());
        size_t backslashes = 0;
        while (quote - backslashes > pos_ + 1 && s_[quote - backslashes - 1] == '\\') ++backslashes;
        p = quote + 1;
        if (backslashes % 2 == 0) break;
      }
      pos_ = p;
    } else if (c == '{' || c == '[') {
      ++depth;
      ++pos_;
    } else if (c == '}' || c == ']') {
      if (depth == 0) fail("unexpected closing bracket");
      --depth;
      ++pos_;
    } else if (c == ',' || c == ':') {
      if (depth == 0) fail("unexpected separator");
      ++pos_;
    } else {
      // Literal or number: consume up to the next delimiter.
      size_t p = pos_;
      while (pos_ < s_.size()) {
        char d = s_[pos_];
        if (d == ',' || d == '}' || d == ']' || d == ':' || d == ' ' || d == '\n' || d == '\r' || d == '\t' ||
            d == '"' || d == '{' || d == '[')
          break;
        ++pos_;
      }
      if (pos_ == p) fail("unexpected character");
    }
  } while (depth > 0);
  return s_.substr(start, pos_ - start);
}

}  // namespace dgemma::tok
