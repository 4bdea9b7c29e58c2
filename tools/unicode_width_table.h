#pragma once
// Generated Unicode display-width ranges (tools/unicode_width_table.cc,
// written by tools/gen_unicode_width.py).
#include <span>

namespace dgemma::cli {

struct WidthRange {
  char32_t lo, hi;
};
// Sorted, disjoint ranges of zero-width and of double-width code points.
std::span<const WidthRange> zero_width_ranges();
std::span<const WidthRange> double_width_ranges();

}  // namespace dgemma::cli
