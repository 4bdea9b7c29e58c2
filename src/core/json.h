#pragma once
// A small strict JSON reader/writer (RFC 8259). Used for safetensors headers,
// config files, tokenizer.json and CLI output. Strictness matters more than
// convenience here: invalid UTF-8, lone surrogates, duplicate object keys
// (optionally), trailing garbage and absurd nesting are all rejected with an
// error that names the source and the line/column.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace dgemma::json {

class Value;
using Array = std::vector<Value>;
// Objects keep insertion order (configs are printed back in file order).
using Object = std::vector<std::pair<std::string, Value>>;

struct Number {
  double value = 0.0;
  bool is_integer = false;  // literal had no fraction/exponent and fits int64
  int64_t integer = 0;
};

class Value {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int v) : v_(Number{double(v), true, v}) {}
  Value(int64_t v) : v_(Number{double(v), true, v}) {}
  Value(uint64_t v) : v_(Number{double(v), v <= uint64_t(INT64_MAX), int64_t(v)}) {}
  Value(double v) : v_(Number{v, false, 0}) {}
  Value(Number n) : v_(n) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  Kind kind() const { return Kind(v_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_number() const { return kind() == Kind::kNumber; }
  bool is_integer() const { return is_number() && std::get<Number>(v_).is_integer; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_object() const { return kind() == Kind::kObject; }

  // Typed accessors; they throw dgemma::Error on a kind mismatch. `what` names
  // the value in the message (e.g. "config.json: text_config.hidden_size").
  bool as_bool(std::string_view what = "value") const;
  double as_double(std::string_view what = "value") const;
  int64_t as_int(std::string_view what = "value") const;
  const std::string& as_string(std::string_view what = "value") const;
  const Array& as_array(std::string_view what = "value") const;
  const Object& as_object(std::string_view what = "value") const;
  Array& as_array_mut() { return std::get<Array>(v_); }
  Object& as_object_mut() { return std::get<Object>(v_); }

  // Object lookup (linear; objects read by key are small). nullptr if absent
  // or if this is not an object.
  const Value* find(std::string_view key) const;
  // Insert or replace (for building output objects).
  Value& set(std::string key, Value v);

 private:
  std::variant<std::monostate, bool, Number, std::string, Array, Object> v_;
};

struct ParseOptions {
  std::string source = "<json>";  // named in every error message
  bool reject_duplicate_keys = true;
  int max_depth = 256;
};

// Parses a complete document; leading/trailing JSON whitespace is allowed,
// anything else after the value is an error.
Value parse(std::string_view text, const ParseOptions& options = {});

// Human-readable name of a kind ("object", "string", ...).
const char* kind_name(Value::Kind kind);

// Serialization. indent < 0: compact one line; otherwise pretty with that
// many spaces. Doubles are written with the shortest round-trip form.
std::string dump(const Value& v, int indent = -1);
// Appends a quoted, escaped JSON string (valid UTF-8 input assumed; invalid
// bytes are replaced with U+FFFD so the output is always valid JSON).
void append_quoted(std::string& out, std::string_view s);
std::string quoted(std::string_view s);

// UTF-8 validity (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// "line L, column C" (1-based; columns count bytes) of byte `offset` of
// `text`: where the JSON readers say an error is.
std::string describe_position(std::string_view text, size_t offset);

// Decodes the escape sequence of a JSON string that starts at s[pos], the
// character after the backslash (\" \\ \/ \b \f \n \r \t \uXXXX, a
// surrogate pair as two \u escapes), appends it to `out` as UTF-8 and moves
// pos past it. Returns null, or on malformed input the reason ("invalid
// escape character", "truncated \u escape", ...) with pos where the reader
// should report it. The one escape decoder of every JSON reader here (this
// parser and the tokenizer's streaming scanner).
const char* decode_escape(std::string_view s, size_t& pos, std::string& out);

}  // namespace dgemma::json
