#pragma once
// The ggml block types on the integer-dot path (int8_dot.h): each block's
// integer levels V and its exact fp32 sub-block scales ws and offsets wb
// (docs/formats.md §5.2), read straight from the stored blocks, so that
//     value = ws·V (+ wb)
// for every element. Levels are bytes: signed for the types without an
// offset, unsigned (0..31) for those with one (Q4_1, Q5_1, Q4_K, Q5_K);
// Q2_K is not read here (int8_dot_supported: its offsets change every 16
// columns).
#include <cstdint>

#include "core/ggml_types.h"

namespace dgemma::cpu {

// The largest |V| of a type's levels (8 for Q4_0's −8..7, 128 for Q8_0).
int ggml_level_bound(GgmlType t);

// Columns [0, n) of a run of whole blocks starting at `blocks` (n a multiple
// of the block size): level of column k into out[k] (an int8 or uint8 byte).
void ggml_levels(GgmlType t, const uint8_t* blocks, int64_t n, uint8_t* out);

// The same columns' scales: ws[s·stride] for sub-block s (of 16 or 32
// columns, GgmlTypeTraits::sub_block) and, for the types with an offset,
// wb[b·stride] for each 32 columns b (the offset of the sub-block holding
// them). Every scale is a half times a small integer: exact in fp32.
void ggml_scales(GgmlType t, const uint8_t* blocks, int64_t n, float* ws, float* wb, int64_t stride);

// The scales of a tile of 16 rows at once, in the tile layout ws[s·16 + j],
// wb[b·16 + j] (stride 16 above): row j < nr from rows[j] (columns [0, n)),
// zero for rows nr..15. The same values as ggml_scales row by row; the
// types of the published files (Q4_K, Q5_K, Q6_K and the 32-element ones)
// are decoded across the 16 rows at once, which the compiler vectorizes.
void ggml_scales_tile(GgmlType t, const uint8_t* const* rows, int nr, int64_t n, float* ws, float* wb);

}  // namespace dgemma::cpu
