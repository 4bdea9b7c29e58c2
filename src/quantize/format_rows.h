#pragma once
// Helpers for the tables that describe formats one row per enum value
// (scheme_traits.h, load_formats.h, export.h, quant_context.h).
#include <cstddef>
#include <iterator>
#include <string>

namespace dgemma {

// Whether row i of `rows` is the row of enum value i (its `key` member), so
// that a table indexed by its enum stays in step with it.
template <class Rows, class Row, class Enum>
constexpr bool rows_in_enum_order(const Rows& rows, Enum Row::*key) {
  size_t i = 0;
  for (const Row& row : rows)
    if (size_t(row.*key) != i++) return false;
  return true;
}

// The names of the rows as a message lists them: "a, b or c".
template <class Rows>
std::string name_list(const Rows& rows) {
  std::string s;
  size_t i = 0;
  for (const auto& row : rows) {
    if (i > 0) s += i + 1 == std::size(rows) ? " or " : ", ";
    s += row.name;
    ++i;
  }
  return s;
}

}  // namespace dgemma
