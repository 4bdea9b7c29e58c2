#pragma once
// The JSON reading every POST route shares: the body parsed into an object
// (400 invalid_json naming the line and column otherwise) and typed field
// getters whose errors are 400 invalid_type naming the field. JSON null
// counts as "not given" everywhere (OpenAI clients send null for unset
// optional fields).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "server/api_error.h"

namespace dgemma::server {

// The request body as a JSON object; malformed JSON, invalid UTF-8, deep
// nesting or a non-object is a 400 invalid_json.
json::Value parse_json_body(std::string_view body);

// The field `key` of `obj`, or nullptr when it is absent or null.
const json::Value* field(const json::Value& obj, std::string_view key);

// 400 invalid_type: "'param' must be EXPECTED, got KIND".
ApiError wrong_type(const std::string& param, const char* expected, const json::Value& got);

// Typed optional fields (absent or null: nullopt); a value of the wrong type
// is 400 invalid_type naming the field (`param` when it differs from `key`,
// e.g. "stream_options.include_usage").
std::optional<int64_t> get_int(const json::Value& obj, const std::string& key);
std::optional<double> get_number(const json::Value& obj, const std::string& key);  // finite only
std::optional<bool> get_bool(const json::Value& obj, const std::string& key, const std::string& param);

}  // namespace dgemma::server
