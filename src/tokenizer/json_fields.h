#pragma once
// Strict field access for the small tokenizer.json components. A field we do
// not know could change how text is tokenized, so unknown fields are errors
// rather than being ignored (never a silent mis-encode).
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/json.h"

namespace dgemma::tok {

// Throws unless every key of `obj` is in `allowed`. `what` names the component
// in messages, e.g. `tokenizer.json: normalizer "Replace"`.
void check_fields(const json::Value& obj, const std::string& what, std::initializer_list<std::string_view> allowed);
// Required field.
const json::Value& field(const json::Value& obj, const std::string& what, std::string_view key);
// Optional field: nullptr when absent or JSON null.
const json::Value* optional_field(const json::Value& obj, std::string_view key);
// The value of {"String": "..."}; a {"Regex": "..."} pattern is unsupported.
std::string string_pattern(const json::Value& pattern, const std::string& what);
// A string made of exactly one character (Rust `char` fields such as
// Metaspace.replacement).
std::string single_char(const json::Value& v, const std::string& what);

}  // namespace dgemma::tok
