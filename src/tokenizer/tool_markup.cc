#include "tokenizer/tool_markup.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace dgemma {
namespace {

using json::Value;

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }
char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; }

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_upper(c);
  return out;
}

// The entries of an object in the reference's dictsort order: by key,
// ignoring case, ties kept in their given order.
std::vector<const std::pair<std::string, Value>*> sorted_entries(const json::Object& object) {
  std::vector<const std::pair<std::string, Value>*> out;
  out.reserve(object.size());
  for (const auto& entry : object) out.push_back(&entry);
  std::stable_sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    return std::lexicographical_compare(a->first.begin(), a->first.end(), b->first.begin(), b->first.end(),
                                        [](char x, char y) { return ascii_lower(x) < ascii_lower(y); });
  });
  return out;
}

// A double as Python's repr() writes it: the shortest digits that read back,
// positional for exponents -4..15 (with ".0" when integral), else d.ddde+XX.
std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t e = s.find('e');
  const int exp = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = std::abs(exp);
    out += exp < 0 ? "e-" : "e+";
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (exp < 0) {
    out = "0." + std::string(size_t(-exp - 1), '0') + digits;
  } else if (digits.size() <= size_t(exp) + 1) {
    out = digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
  }
  return sign + out;
}

// How the reference prints a scalar with `{{ x }}` (Python str()).
std::string python_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kNumber: return v.is_integer() ? std::to_string(v.as_int()) : python_float(v.as_double());
    case Value::Kind::kString: return v.as_string();
    default: return json::dump(v);
  }
}

// Jinja truthiness: absent, null, false, 0, "", [] and {} are false.
bool truthy(const Value* v) {
  if (v == nullptr) return false;
  switch (v->kind()) {
    case Value::Kind::kNull: return false;
    case Value::Kind::kBool: return v->as_bool();
    case Value::Kind::kNumber: return v->as_double() != 0;
    case Value::Kind::kString: return !v->as_string().empty();
    case Value::Kind::kArray: return !v->as_array().empty();
    case Value::Kind::kObject: return !v->as_object().empty();
  }
  return false;
}

void quoted(PromptWriter& out, std::string_view text) { out.markup(kToolQuote).content(text).markup(kToolQuote); }

// A schema's "type" upper-cased as the reference's `| upper` does: a string
// upper-cased, a list as Python prints it, upper-cased; absent: "".
std::string type_name(const Value* type) {
  if (type == nullptr || type->is_null()) return type == nullptr ? "" : "NONE";
  if (!type->is_array()) return upper(python_str(*type));
  std::string s = "[";
  for (size_t i = 0; i < type->as_array().size(); ++i) {
    const Value& t = type->as_array()[i];
    if (i > 0) s += ", ";
    s += t.is_string() ? "'" + t.as_string() + "'" : python_str(t);
  }
  return upper(s + "]");
}

// `[<|"|>a<|"|>,<|"|>b<|"|>]` for a "required" list.
void required_list(PromptWriter& out, const Value& list) {
  out.markup("required:[");
  if (list.is_array())
    for (size_t i = 0; i < list.as_array().size(); ++i) {
      if (i > 0) out.markup(",");
      quoted(out, python_str(list.as_array()[i]));
    }
  out.markup("]");
}

// Writes "," before every field of a `{...}` but the first.
class Fields {
 public:
  explicit Fields(PromptWriter& out) : out_(out) {}
  PromptWriter& next() {
    if (any_) out_.markup(",");
    any_ = true;
    return out_;
  }

 private:
  PromptWriter& out_;
  bool any_ = false;
};

bool is_schema_key(std::string_view key) {
  return key == "description" || key == "type" || key == "properties" || key == "required" || key == "nullable";
}

void write_properties(PromptWriter& out, const Value& properties, bool skip_schema_keys);

// The `items:{...}` of an array property.
void write_items(PromptWriter& out, const Value& items) {
  out.markup("items:{");
  Fields fields(out);
  for (const auto* entry : sorted_entries(items.as_object())) {
    const auto& [key, value] = *entry;
    if (value.is_null()) continue;
    fields.next();
    if (key == "properties") {
      out.markup("properties:{");
      if (value.is_object()) write_properties(out, value, false);
      out.markup("}");
    } else if (key == "required") {
      required_list(out, value);
    } else if (key == "type") {
      out.markup("type:");
      if (value.is_string()) {
        quoted(out, upper(value.as_string()));
      } else {
        json::Array names;
        if (value.is_array())
          for (const Value& t : value.as_array()) names.emplace_back(upper(python_str(t)));
        write_tool_value(out, Value(std::move(names)), true);
      }
    } else {
      out.content(key).markup(":");
      write_tool_value(out, value, true);
    }
  }
  out.markup("}");
}

// One `name:{description:...,type:<|"|>STRING<|"|>}` per property, sorted.
void write_properties(PromptWriter& out, const Value& properties, bool skip_schema_keys) {
  bool first = true;
  for (const auto* entry : sorted_entries(properties.as_object())) {
    const auto& [key, schema] = *entry;
    if (skip_schema_keys && is_schema_key(key)) continue;
    if (!first) out.markup(",");
    first = false;
    out.content(key).markup(":{");
    Fields fields(out);
    const Value* description = schema.find("description");
    if (truthy(description)) {
      fields.next().markup("description:");
      quoted(out, python_str(*description));
    }
    const std::string type = type_name(schema.find("type"));
    if (type == "STRING") {
      if (const Value* e = schema.find("enum"); truthy(e)) {
        fields.next().markup("enum:");
        write_tool_value(out, *e, true);
      }
    } else if (type == "ARRAY") {
      if (const Value* items = schema.find("items"); items != nullptr && truthy(items) && items->is_object()) {
        fields.next();
        write_items(out, *items);
      }
    }
    if (truthy(schema.find("nullable"))) fields.next().markup("nullable:true");
    if (type == "OBJECT") {
      const Value* nested = schema.find("properties");
      fields.next().markup("properties:{");
      if (nested != nullptr && nested->is_object())
        write_properties(out, *nested, false);
      else if (schema.is_object())
        write_properties(out, schema, true);
      out.markup("}");
      if (const Value* req = schema.find("required"); truthy(req)) {
        fields.next();
        required_list(out, *req);
      }
    }
    fields.next().markup("type:");
    quoted(out, type);
    out.markup("}");
  }
}

}  // namespace

void write_tool_value(PromptWriter& out, const Value& value, bool quote_keys) {
  switch (value.kind()) {
    case Value::Kind::kString: quoted(out, value.as_string()); return;
    case Value::Kind::kBool: out.content(value.as_bool() ? "true" : "false"); return;
    case Value::Kind::kObject: {
      out.markup("{");
      bool first = true;
      for (const auto* entry : sorted_entries(value.as_object())) {
        if (!first) out.markup(",");
        first = false;
        if (quote_keys)
          quoted(out, entry->first);
        else
          out.content(entry->first);
        out.markup(":");
        write_tool_value(out, entry->second, quote_keys);
      }
      out.markup("}");
      return;
    }
    case Value::Kind::kArray: {
      out.markup("[");
      for (size_t i = 0; i < value.as_array().size(); ++i) {
        if (i > 0) out.markup(",");
        write_tool_value(out, value.as_array()[i], quote_keys);
      }
      out.markup("]");
      return;
    }
    case Value::Kind::kNull:
    case Value::Kind::kNumber: out.content(python_str(value)); return;
  }
}

void write_tool_declaration(PromptWriter& out, const Value& function) {
  const Value* name = function.find("name");
  const Value* description = function.find("description");
  out.markup("<|tool>declaration:").content(name != nullptr ? python_str(*name) : "");
  out.markup("{description:");
  quoted(out, description != nullptr && !description->is_null() ? python_str(*description) : "");
  const Value* params = function.find("parameters");
  if (truthy(params) && params->is_object()) {
    out.markup(",parameters:{");
    if (const Value* props = params->find("properties"); truthy(props) && props->is_object()) {
      out.markup("properties:{");
      write_properties(out, *props, false);
      out.markup("},");
    }
    if (const Value* req = params->find("required"); truthy(req)) {
      required_list(out, *req);
      out.markup(",");
    }
    // The reference closes the parameters' brace only together with a type.
    if (const Value* type = params->find("type"); truthy(type)) {
      out.markup("type:");
      quoted(out, type_name(type));
      out.markup("}");
    }
  }
  out.markup("}<tool|>");
}

void write_tool_call(PromptWriter& out, std::string_view name, const Value& arguments) {
  out.markup(kToolCallBegin).markup("call:").content(name).markup("{");
  if (arguments.is_object()) {
    bool first = true;
    for (const auto* entry : sorted_entries(arguments.as_object())) {
      if (!first) out.markup(",");
      first = false;
      out.content(entry->first).markup(":");
      write_tool_value(out, entry->second, false);
    }
  }
  out.markup("}").markup(kToolCallEnd);
}

void write_tool_response(PromptWriter& out, std::string_view name, std::string_view text) {
  out.markup(kToolResponseBegin).markup("response:").content(name).markup("{value:");
  quoted(out, text);
  out.markup("}").markup(kToolResponseEnd);
}

}  // namespace dgemma
