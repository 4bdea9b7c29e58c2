#include "core/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>

#include "core/utf8.h"
#include "dgemma/error.h"

namespace dgemma::json {
namespace {

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& opt) : s_(text), opt_(opt) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(opt_.source + ": invalid JSON at " + describe_position(s_, pos_) + ": " + why);
  }

  void skip_ws() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  Value parse_value(int depth) {
    if (depth > opt_.max_depth) fail("nesting deeper than " + std::to_string(opt_.max_depth));
    if (pos_ >= s_.size()) fail("unexpected end of input");
    char c = s_[pos_];
    switch (c) {
      case '{': return parse_object(depth);
      case '[': return parse_array(depth);
      case '"': return Value(parse_string());
      case 't': expect_word("true"); return Value(true);
      case 'f': expect_word("false"); return Value(false);
      case 'n': expect_word("null"); return Value(nullptr);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        fail(std::string("unexpected character '") + printable(c) + "'");
    }
  }

  static std::string printable(char c) {
    if (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
    return buf;
  }

  void expect_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) fail("invalid literal");
    pos_ += w.size();
  }

  Value parse_object(int depth) {
    size_t open_pos = pos_;
    ++pos_;  // '{'
    Object obj;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Value(std::move(obj));
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':' after object key");
      ++pos_;
      skip_ws();
      Value v = parse_value(depth + 1);
      obj.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (pos_ >= s_.size()) fail("unexpected end of input in object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        break;
      }
      fail("expected ',' or '}' in object");
    }
    if (opt_.reject_duplicate_keys && obj.size() > 1) {
      // Keys are stable now: sort views and look for equal neighbours.
      std::vector<std::string_view> keys;
      keys.reserve(obj.size());
      for (const auto& kv : obj) keys.emplace_back(kv.first);
      std::sort(keys.begin(), keys.end());
      for (size_t i = 1; i < keys.size(); ++i) {
        if (keys[i] == keys[i - 1]) {
          pos_ = open_pos;
          fail("duplicate key \"" + std::string(keys[i]) + "\" in the object starting here");
        }
      }
    }
    return Value(std::move(obj));
  }

  Value parse_array(int depth) {
    ++pos_;  // '['
    Array arr;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Value(std::move(arr));
    }
    while (true) {
      skip_ws();
      arr.push_back(parse_value(depth + 1));
      skip_ws();
      if (pos_ >= s_.size()) fail("unexpected end of input in array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return Value(std::move(arr));
      }
      fail("expected ',' or ']' in array");
    }
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    size_t run = pos_;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      unsigned char c = s_[pos_];
      if (c == '"') {
        out.append(s_.data() + run, pos_ - run);
        ++pos_;
        return out;
      }
      if (c == '\\') {
        out.append(s_.data() + run, pos_ - run);
        ++pos_;
        if (const char* error = decode_escape(s_, pos_, out)) fail(error);
        run = pos_;
        continue;
      }
      if (c < 0x20) fail("control character inside string");
      if (c < 0x80) {
        ++pos_;
        continue;
      }
      size_t n = utf8_sequence_length(s_, pos_);
      if (n == 0) fail("invalid UTF-8 in string");
      pos_ += n;
    }
  }

  Value parse_number() {
    size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size()) fail("truncated number");
    if (s_[pos_] == '0') {
      ++pos_;
    } else if (s_[pos_] >= '1' && s_[pos_] <= '9') {
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    } else {
      fail("invalid number");
    }
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == d) fail("digit expected after decimal point");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == d) fail("digit expected in exponent");
    }
    std::string_view lit = s_.substr(start, pos_ - start);
    Number n;
    if (integral) {
      int64_t iv = 0;
      auto r = std::from_chars(lit.data(), lit.data() + lit.size(), iv);
      if (r.ec == std::errc() && r.ptr == lit.data() + lit.size()) {
        n.is_integer = true;
        n.integer = iv;
      }
    }
    double dv = 0;
    auto r = std::from_chars(lit.data(), lit.data() + lit.size(), dv);
    if (r.ec == std::errc::result_out_of_range) {
      // from_chars reports underflow and overflow alike; strtod tells them
      // apart (0 for 1e-400, +-HUGE_VAL for 1e400). The literal is already
      // validated JSON, so the C locale's grammar accepts it.
      dv = std::strtod(std::string(lit).c_str(), nullptr);
    } else if (r.ec != std::errc()) {
      fail("invalid number");
    }
    n.value = n.is_integer ? double(n.integer) : dv;
    return Value(n);
  }

  std::string_view s_;
  const ParseOptions& opt_;
  size_t pos_ = 0;
};

[[noreturn]] void kind_error(std::string_view what, const char* want, Value::Kind got) {
  throw Error(std::string(what) + ": expected " + want + ", got " + kind_name(got));
}

void dump_into(std::string& out, const Value& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent >= 0) {
      out += '\n';
      out.append(size_t(indent) * size_t(lvl), ' ');
    }
  };
  switch (v.kind()) {
    case Value::Kind::kNull: out += "null"; break;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; break;
    case Value::Kind::kNumber: {
      if (v.is_integer()) {
        out += std::to_string(v.as_int());
      } else {
        double d = v.as_double();
        if (!std::isfinite(d)) {
          out += "null";  // JSON has no NaN/Inf
        } else {
          char buf[64];
          auto r = std::to_chars(buf, buf + sizeof buf, d);
          std::string_view s(buf, size_t(r.ptr - buf));
          out += s;
          if (s.find_first_of(".eEn") == std::string_view::npos) out += ".0";
        }
      }
      break;
    }
    case Value::Kind::kString: append_quoted(out, v.as_string()); break;
    case Value::Kind::kArray: {
      const auto& a = v.as_array();
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(level + 1);
        dump_into(out, a[i], indent, level + 1);
      }
      if (!a.empty() && indent >= 0) newline(level);
      out += ']';
      break;
    }
    case Value::Kind::kObject: {
      const auto& o = v.as_object();
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(level + 1);
        append_quoted(out, o[i].first);
        out += ": ";
        dump_into(out, o[i].second, indent, level + 1);
      }
      if (!o.empty() && indent >= 0) newline(level);
      out += '}';
      break;
    }
  }
}

}  // namespace

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNull: return "null";
    case Value::Kind::kBool: return "boolean";
    case Value::Kind::kNumber: return "number";
    case Value::Kind::kString: return "string";
    case Value::Kind::kArray: return "array";
    case Value::Kind::kObject: return "object";
  }
  return "?";
}

bool Value::as_bool(std::string_view what) const {
  if (!is_bool()) kind_error(what, "a boolean", kind());
  return std::get<bool>(v_);
}
double Value::as_double(std::string_view what) const {
  if (!is_number()) kind_error(what, "a number", kind());
  return std::get<Number>(v_).value;
}
int64_t Value::as_int(std::string_view what) const {
  if (!is_number()) kind_error(what, "an integer", kind());
  const Number& n = std::get<Number>(v_);
  if (!n.is_integer) {
    // Accept 2.0-style integers written by some tools, reject fractions.
    if (std::isfinite(n.value) && n.value == std::floor(n.value) && std::fabs(n.value) < 9.0e15)
      return int64_t(n.value);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", n.value);
    throw Error(std::string(what) + ": expected an integer, got " + buf);
  }
  return n.integer;
}
const std::string& Value::as_string(std::string_view what) const {
  if (!is_string()) kind_error(what, "a string", kind());
  return std::get<std::string>(v_);
}
const Array& Value::as_array(std::string_view what) const {
  if (!is_array()) kind_error(what, "an array", kind());
  return std::get<Array>(v_);
}
const Object& Value::as_object(std::string_view what) const {
  if (!is_object()) kind_error(what, "an object", kind());
  return std::get<Object>(v_);
}
const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& kv : std::get<Object>(v_))
    if (kv.first == key) return &kv.second;
  return nullptr;
}
Value& Value::set(std::string key, Value v) {
  if (!is_object()) v_ = Object{};
  auto& o = std::get<Object>(v_);
  for (auto& kv : o)
    if (kv.first == key) return kv.second = std::move(v);
  o.emplace_back(std::move(key), std::move(v));
  return o.back().second;
}

Value parse(std::string_view text, const ParseOptions& options) {
  Parser p(text, options);
  return p.parse_document();
}

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

bool is_valid_utf8(std::string_view s) { return find_invalid_utf8(s) == std::string_view::npos; }

const char* decode_escape(std::string_view s, size_t& pos, std::string& out) {
  if (pos >= s.size()) return "unterminated escape";
  const char e = s[pos++];
  switch (e) {
    case '"': out += '"'; return nullptr;
    case '\\': out += '\\'; return nullptr;
    case '/': out += '/'; return nullptr;
    case 'b': out += '\b'; return nullptr;
    case 'f': out += '\f'; return nullptr;
    case 'n': out += '\n'; return nullptr;
    case 'r': out += '\r'; return nullptr;
    case 't': out += '\t'; return nullptr;
    case 'u': break;
    default: --pos; return "invalid escape character";
  }
  // Four hex digits; on a bad digit pos is past it (where readers report it).
  auto hex4 = [&](uint32_t& v) -> const char* {
    if (pos + 4 > s.size()) return "truncated \\u escape";
    v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s[pos++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= uint32_t(c - 'A' + 10);
      else
        return "invalid hex digit in \\u escape";
    }
    return nullptr;
  };
  uint32_t cp = 0;
  if (const char* error = hex4(cp)) return error;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (pos + 2 > s.size() || s[pos] != '\\' || s[pos + 1] != 'u') return "lone high surrogate in \\u escape";
    pos += 2;
    uint32_t lo = 0;
    if (const char* error = hex4(lo)) return error;
    if (lo < 0xDC00 || lo > 0xDFFF) return "invalid low surrogate in \\u escape";
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    return "lone low surrogate in \\u escape";
  }
  append_utf8(out, cp);
  return nullptr;
}

void append_quoted(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c == '"') {
      out += "\\\"";
      ++i;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    if (c < 0x20) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
      }
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += char(c);
      ++i;
      continue;
    }
    // Copy one valid UTF-8 sequence, or emit U+FFFD for an invalid byte.
    const size_t n = utf8_sequence_length(s, i);
    if (n != 0) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out += '"';
}

std::string quoted(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

std::string dump(const Value& v, int indent) {
  std::string out;
  dump_into(out, v, indent, 0);
  return out;
}

}  // namespace dgemma::json
