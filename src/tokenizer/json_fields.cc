#include "tokenizer/json_fields.h"

#include "dgemma/error.h"
#include "core/utf8.h"

namespace dgemma::tok {

void check_fields(const json::Value& obj, const std::string& what, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : obj.as_object(what)) {
    bool known = false;
    for (auto a : allowed) known = known || a == key;
    if (!known) throw Error(what + ": field \"" + key + "\" is not supported");
  }
}

const json::Value& field(const json::Value& obj, const std::string& what, std::string_view key) {
  const json::Value* v = obj.find(key);
  if (!v) throw Error(what + ": missing field \"" + std::string(key) + "\"");
  return *v;
}

const json::Value* optional_field(const json::Value& obj, std::string_view key) {
  const json::Value* v = obj.find(key);
  return v && !v->is_null() ? v : nullptr;
}

std::string string_pattern(const json::Value& pattern, const std::string& what) {
  const auto& o = pattern.as_object(what + " pattern");
  if (o.size() == 1 && o[0].first == "String") return o[0].second.as_string(what + " pattern.String");
  if (o.size() == 1 && o[0].first == "Regex")
    throw Error(what + ": Regex patterns are not supported (pattern " + json::dump(o[0].second) + ")");
  throw Error(what + ": pattern must be {\"String\": ...}, got " + json::dump(pattern));
}

std::string single_char(const json::Value& v, const std::string& what) {
  const std::string& s = v.as_string(what);
  size_t p = 0;
  if (!s.empty()) next_code_point(s, p);
  if (s.empty() || p != s.size()) throw Error(what + ": expected a single character, got " + json::quoted(s));
  return s;
}

}  // namespace dgemma::tok
