#include "quantize/integer_levels.h"

#include <algorithm>
#include <cmath>

#include "quantize/format_tables.h"
#include "quantize/scheme_traits.h"

namespace dgemma {

Int8WeightValues int8_weight_values(const QuantizedWeight& w) {
  const SchemeTraits& t = scheme_traits(w.scheme);
  Int8WeightValues v;
  // A format with a fixed block under 32 columns (NVFP4's 16) scales each of
  // its blocks; the others scale per 32-column activation block.
  v.sub = t.fixed_block ? t.fixed_block : kI8Block;
  v.bias = t.biases;
  // The integer value of each 4-bit code: per-format math.
  switch (w.scheme) {
    case QuantScheme::kNF4: {
      float cmax = 0.0f;
      for (float c : w.code_map) cmax = std::max(cmax, std::fabs(c));
      if (cmax > 0.0f)
        for (int i = 0; i < 16; ++i) v.levels[i] = int16_t(std::lround(w.code_map[i] / cmax * 32767.0f));
      v.nf4_factor = cmax / 32767.0f;
      v.values = I8Values::kS16;
      break;
    }
    case QuantScheme::kNVFP4:
      for (int i = 0; i < 16; ++i) v.levels[i] = int16_t(quant::kE2m1Values[i] * 2.0f);
      break;
    case QuantScheme::kAffine:
      for (int i = 0; i < 16; ++i) v.levels[i] = int16_t(i);
      v.values = w.bits == 8 ? I8Values::kU8 : I8Values::kS8;
      break;
    case QuantScheme::kGgml: {
      // The decoders read the levels from the blocks (backend/cpu/int8_dot_ggml.h;
      // docs/formats.md §5.2): one scale per sub-block of 16 or 32, the types
      // with an offset fold it per 32 columns like MLX's bias, and their levels
      // are unsigned (0..31); the others are signed bytes.
      const GgmlTypeTraits& g = ggml_traits(w.ggml_type);
      v.sub = g.sub_block;
      v.bias = g.has_offset;
      v.values = g.has_offset ? I8Values::kU8 : I8Values::kS8;
      break;
    }
    case QuantScheme::kInt8:
    case QuantScheme::kFP8: break;
  }
  return v;
}

bool int8_dot_supported(const QuantizedWeight& w) {
  if (w.cols % kI8Block != 0 || w.block <= 0) return false;
  if (w.scheme == QuantScheme::kGgml) {
    // Every integer-level type but Q2_K, whose offsets change every 16
    // columns and would need activation sums per 16 (docs/formats.md §5.2).
    const GgmlTypeTraits* g = ggml_type_traits(uint32_t(w.ggml_type));
    return g && g->integer_levels && w.ggml_type != GgmlType::kQ2_K && w.cols % g->block_elems == 0 &&
           w.block == g->block_elems;
  }
  const SchemeTraits& t = scheme_traits(w.scheme);
  if (!t.integer_levels) return false;  // e.g. FP8: E4M3 values are not integers, the exact path
  if (t.fixed_block) return w.block == t.fixed_block;
  // Blocks tile the 32-column activation blocks; a weight-decided width must be one the decoders know.
  return w.block % kI8Block == 0 && (t.code_bits != 0 || w.bits == 4 || w.bits == 8);
}

}  // namespace dgemma
