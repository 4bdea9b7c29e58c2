#include "server/request_json.h"

#include <cmath>

#include "dgemma/error.h"

namespace dgemma::server {

using json::Value;

json::Value parse_json_body(std::string_view body_text) {
  // json::parse rejects invalid UTF-8, lone surrogates, trailing garbage and
  // deep nesting; its message names the line and column.
  Value body;
  try {
    json::ParseOptions opt;
    opt.source = "request body";
    opt.max_depth = 64;
    body = json::parse(body_text, opt);
  } catch (const Error& e) {
    throw invalid_request(std::string("the request body is not valid JSON: ") + e.what(), {}, "invalid_json");
  }
  if (!body.is_object())
    throw invalid_request(std::string("the request body must be a JSON object, got ") + json::kind_name(body.kind()),
                          {}, "invalid_json");
  return body;
}

const Value* field(const Value& obj, std::string_view key) {
  const Value* v = obj.find(key);
  return v != nullptr && !v->is_null() ? v : nullptr;
}

ApiError wrong_type(const std::string& param, const char* expected, const Value& got) {
  return invalid_request("'" + param + "' must be " + expected + ", got " + json::kind_name(got.kind()), param,
                         "invalid_type");
}

std::optional<int64_t> get_int(const Value& obj, const std::string& key) {
  const Value* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) {
    if (v->is_number()) throw invalid_request("'" + key + "' must be an integer", key, "invalid_type");
    throw wrong_type(key, "an integer", *v);
  }
  return v->as_int();
}

std::optional<double> get_number(const Value& obj, const std::string& key) {
  const Value* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw wrong_type(key, "a number", *v);
  const double d = v->as_double();
  if (!std::isfinite(d)) throw invalid_request("'" + key + "' must be finite", key, "invalid_value");
  return d;
}

std::optional<bool> get_bool(const Value& obj, const std::string& key, const std::string& param) {
  const Value* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_bool()) throw wrong_type(param, "a boolean", *v);
  return v->as_bool();
}

}  // namespace dgemma::server
