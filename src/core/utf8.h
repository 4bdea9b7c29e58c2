#pragma once
// UTF-8 helpers shared by the tokenizer pieces. Inputs to the decode helpers
// are assumed valid (validated once at the API boundary with find_invalid_utf8).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dgemma {

// Byte length of the UTF-8 sequence introduced by `lead` (valid input only).
inline size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes the code point at s[pos] (valid input only) and advances pos.
inline uint32_t next_code_point(std::string_view s, size_t& pos) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) {
    ++pos;
    return c;
  }
  size_t n = utf8_len(c);
  uint32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  pos += n;
  return cp;
}

// Start of the code point that ends right before `end` (valid input, end > 0).
inline size_t prev_code_point_start(std::string_view s, size_t end) {
  size_t p = end - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return p;
}

void append_utf8(std::string& out, uint32_t cp);

// Length of the valid UTF-8 sequence starting at byte p of s (1 to 4), or 0
// when the bytes there are not one (no overlongs, no surrogates, <= U+10FFFF,
// not cut off by the end of s). The one UTF-8 validator of the code base.
size_t utf8_sequence_length(std::string_view s, size_t p);

// Offset of the first byte that is not part of a valid UTF-8 sequence (no
// overlongs, no surrogates, <= U+10FFFF), or npos when `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// Rust `char::is_whitespace` (Unicode White_Space). Used where the reference
// (HF tokenizers, Rust) strips whitespace: added-token lstrip/rstrip, Strip.
bool is_unicode_whitespace(uint32_t cp);
// ECMAScript String.prototype.trim whitespace (WhiteSpace + LineTerminator).
// The Gemma 3 chat goldens were rendered by @huggingface/jinja, whose `trim`
// filter is JS trim.
bool is_js_whitespace(uint32_t cp);
// Python str.isspace(); the Gemma 4 template is rendered by Python jinja2 in
// transformers, whose `trim` filter is str.strip().
bool is_python_whitespace(uint32_t cp);
// Rust `char::is_alphanumeric` (Alphabetic || Nd/Nl/No), for single_word.
bool is_unicode_alphanumeric(uint32_t cp);

// Trims code points matching `pred` from both ends.
std::string_view trim_if(std::string_view s, bool (*pred)(uint32_t));

}  // namespace dgemma
