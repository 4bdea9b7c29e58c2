#include "core/ggml_types.h"

#include <cctype>
#include <string>

#include "dgemma/error.h"

namespace dgemma {
namespace {

// ggml's names of the ids it defines but dgemma does not read, so a refusal
// can say which type a file holds ("iq2_xxs", not "type 16").
constexpr std::pair<uint32_t, std::string_view> kOtherNames[] = {
    {9, "q8_1"},   {15, "q8_K"},  {16, "iq2_xxs"}, {17, "iq2_xs"}, {18, "iq3_xxs"}, {19, "iq1_s"},
    {21, "iq3_s"}, {22, "iq2_s"}, {24, "i8"},      {25, "i16"},    {26, "i32"},     {27, "i64"},
    {28, "f64"},   {29, "iq1_m"}, {34, "tq1_0"},   {35, "tq2_0"},  {39, "mxfp4"},
};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t id) {
  for (const GgmlTypeTraits& t : kGgmlTypes)
    if (uint32_t(t.type) == id) return &t;
  return nullptr;
}

const GgmlTypeTraits& ggml_traits(GgmlType t) {
  const GgmlTypeTraits* tr = ggml_type_traits(uint32_t(t));
  if (!tr) throw Error("ggml type id " + std::to_string(uint32_t(t)) + " is not supported");
  return *tr;
}

std::string_view ggml_type_name(GgmlType t) { return ggml_traits(t).name; }

std::string ggml_type_id_name(uint32_t id) {
  if (const GgmlTypeTraits* t = ggml_type_traits(id)) return std::string(t->name);
  for (const auto& [other, name] : kOtherNames)
    if (other == id) return std::string(name);
  return "type " + std::to_string(id);
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const GgmlTypeTraits& t : kGgmlTypes) {
    if (t.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(name[i])) == std::tolower(static_cast<unsigned char>(t.name[i]));
    if (same) return t.type;
  }
  return std::nullopt;
}

}  // namespace dgemma
