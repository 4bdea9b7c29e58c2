#pragma once
// Random ggml blocks for the tests (docs/formats.md §5.2 for the layouts):
// every code and scale byte random, the fp16 fields 0.004 to 0.012 in
// magnitude with either sign (finite, so that values compare; a Q4_K dmin < 0
// makes a positive offset).
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "support/test_rng.h"

namespace dgemma {

// Where each block of type t keeps its fp16 fields (byte offsets).
inline std::vector<int> ggml_half_offsets(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: return {0, 2};
    case GgmlType::kQ6_K: return {208};
    case GgmlType::kQ3_K: return {108};
    case GgmlType::kQ2_K: return {80, 82};
    default: return {0};
  }
}

// rows × cols values of type t as random blocks.
inline std::vector<uint8_t> random_ggml_blocks(GgmlType t, int64_t rows, int64_t cols, Rng& rng) {
  const GgmlTypeTraits& g = ggml_traits(t);
  std::vector<uint8_t> b(size_t(rows) * ggml_row_bytes(t, cols));
  for (auto& c : b) c = uint8_t(rng());
  for (size_t o = 0; o < b.size(); o += size_t(g.block_bytes))
    for (int h : ggml_half_offsets(t)) {
      const float v = (0.004f + 0.008f * float(rng() % 1000) / 1000.0f) * (rng() % 2 ? 1.0f : -1.0f);
      const uint16_t bits = f32_to_f16(v);
      std::memcpy(b.data() + o + size_t(h), &bits, 2);
    }
  return b;
}

}  // namespace dgemma
