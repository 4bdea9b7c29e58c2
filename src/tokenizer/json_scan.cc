#include "tokenizer/json_scan.h"

#include <cstdio>
#include <cstring>

#include "dgemma/error.h"
#include "core/utf8.h"

namespace dgemma::tok {

std::string describe_position(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

void JsonScanner::fail(const std::string& why) const {
  // Positions are reported relative to the scanned text; base_ is the byte
  // offset of that text inside the file.
  throw Error(source_ + ": invalid JSON at byte " + std::to_string(base_ + pos_) + " (" +
              describe_position(s_, pos_) + " of the section): " + why);
}

void JsonScanner::expect(char c, const char* what) {
  if (!consume(c)) fail(std::string("expected ") + what);
}

namespace {
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

void JsonScanner::read_escape(std::string& out) {
  // pos_ is at the character after the backslash.
  if (pos_ >= s_.size()) fail("unterminated escape");
  char e = s_[pos_++];
  switch (e) {
    case '"': out += '"'; return;
    case '\\': out += '\\'; return;
    case '/': out += '/'; return;
    case 'b': out += '\b'; return;
    case 'f': out += '\f'; return;
    case 'n': out += '\n'; return;
    case 'r': out += '\r'; return;
    case 't': out += '\t'; return;
    case 'u': break;
    default: --pos_; fail("invalid escape character");
  }
  auto hex4 = [&]() -> uint32_t {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int d = hex_digit(s_[pos_++]);
      if (d < 0) fail("invalid hex digit in \\u escape");
      v = (v << 4) | uint32_t(d);
    }
    return v;
  };
  uint32_t cp = hex4();
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') fail("lone high surrogate in \\u escape");
    pos_ += 2;
    uint32_t lo = hex4();
    if (lo < 0xDC00 || lo > 0xDFFF) fail("invalid low surrogate in \\u escape");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    fail("lone low surrogate in \\u escape");
  }
  append_utf8(out, cp);
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
    size_t n = utf8_len(c);
    if (c < 0xC2 || c > 0xF4 || pos_ + n > s_.size() ||
        find_invalid_utf8(s_.substr(pos_, n)) != std::string_view::npos)
      fail("invalid UTF-8 in string");
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
