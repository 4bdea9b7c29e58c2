#pragma once
// ggml's block types (docs/formats.md §5.2): the reference decoder of a row
// of blocks into fp32 and the integer-level view of one block (what the
// integer product paths multiply). The quantizers are in ggml_quantize.h.
//
// Value semantics: every element of every supported type is
// scale(sub-block)·V + offset(sub-block), where V is a small integer, scale
// and offset are fp32 numbers computed exactly from the block's fp16 fields
// and small integers, and scale·V is exact in fp32 (docs/formats.md §5.2). So
// the decoded value is that sum rounded once (no rounding at all without an
// offset), whatever the evaluation order and whether or not it is contracted
// into an fma; NaN and Inf fp16 fields decode to NaN/Inf, never trap.
#include <cstdint>

#include "core/ggml_types.h"

namespace dgemma::quant {

// Largest block and sub-block counts over the supported types.
inline constexpr int kGgmlMaxBlock = 256;
inline constexpr int kGgmlMaxSubs = 16;

// The 16 levels IQ4_NL and IQ4_XS codes index (docs/formats.md §5.2),
// ascending.
inline constexpr int16_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q4_K and Q5_K: the 6-bit scale and min of sub-block s from the 12 packed
// bytes (docs/formats.md §5.2). Inline: the CPU's level decoders call it per
// sub-block.
inline void k4_scale_min(const uint8_t* sc, int s, int& scale, int& min) {
  if (s < 4) {
    scale = sc[s] & 63;
    min = sc[s + 4] & 63;
  } else {
    scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
    min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  }
}

// One block as integer levels and per-sub-block fp32 scale and offset
// (docs/formats.md §5.2's integer-level table): element e's value is
// scale[e / sub]·levels[e] (+ offset[e / sub] when the type has offsets;
// offset is 0 otherwise and must not be added, so that −0 stays −0), with
// sub = ggml_traits(type).sub_block.
struct GgmlBlockLevels {
  int16_t levels[kGgmlMaxBlock];
  float scale[kGgmlMaxSubs];
  float offset[kGgmlMaxSubs];
};
// Decodes the block at `block` (ggml_traits(type).block_bytes bytes) of a
// block type into `out`; returns the number of sub-blocks filled. Throws for
// F32/F16/BF16.
int ggml_block_levels(GgmlType type, const uint8_t* block, GgmlBlockLevels& out);

// Decodes elements [col, col + n) of a row whose bytes start at `row` (any
// type, plain types included) into fp32 `out`. Blocks are decoded whole; the
// caller guarantees the row holds them.
void ggml_decode_row(GgmlType type, const uint8_t* row, int64_t col, int64_t n, float* out);

}  // namespace dgemma::quant
