#pragma once
// One description of each storage scheme (QuantScheme): the properties code
// outside a format's own kernels asks about, one row per scheme. Adding a
// scheme means adding its row here plus its real per-format code (reader,
// quantizer, decoders); docs/extending.md §3 lists the steps.
//
// What stays a switch on QuantScheme is per-format code, not a description:
// the decode loops (dequantize_reference, the CPU and CUDA kernels), the
// quantizers and the integer levels of int8_weight_values.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "quantize/format_rows.h"
#include "quantize/quantized_weight.h"

namespace dgemma {

struct SchemeTraits {
  QuantScheme scheme;
  std::string_view name;  // quant_scheme_name; also the storage column of reports
  // Bits per stored code; 0: QuantizedWeight::bits decides (MLX affine: 4 or 8).
  int code_bits;
  // Elements per scale when the format fixes it (NVFP4: 16); 0: QuantizedWeight::block decides.
  int fixed_block;
  // The dtype of the block scales; nullopt: QuantizedWeight::scale_dtype decides (NF4: F32, or U8
  // codes with double quant; MLX: the checkpoint's).
  std::optional<DType> scale_dtype;
  bool biases;  // QuantSlice::biases holds a bias per scale block
  // Whether its values are integers the int8-dot paths multiply as stored
  // (quantize/integer_levels.h); FP8's E4M3 values are not.
  bool integer_levels;
  // 4-bit codes only: the even element sits in the high nibble of its byte.
  bool high_nibble_first;
  std::string_view doc;  // the docs/formats.md section that defines it
};

// Rows in QuantScheme order (checked below).
inline constexpr std::array<SchemeTraits, 6> kSchemeTraits = {{
    {QuantScheme::kNF4, "nf4", 4, 0, std::nullopt, false, true, true, "docs/formats.md §2"},
    {QuantScheme::kNVFP4, "nvfp4", 4, 16, DType::kF8_E4M3, false, true, false, "docs/formats.md §3"},
    {QuantScheme::kAffine, "affine", 0, 0, std::nullopt, true, true, false, "docs/formats.md §4"},
    {QuantScheme::kInt8, "int8", 8, 0, DType::kF32, false, true, false, "docs/formats.md §8.2"},
    {QuantScheme::kFP8, "fp8", 8, 0, DType::kF32, false, false, false, "docs/formats.md §8.2"},
    // Per-type facts (block, sub-block, offsets) are in core/ggml_types.h's table.
    {QuantScheme::kGgml, "ggml", 0, 0, std::nullopt, false, true, false, "docs/formats.md §5.2"},
}};

static_assert(rows_in_enum_order(kSchemeTraits, &SchemeTraits::scheme),
              "kSchemeTraits: one row per QuantScheme, in enum order");

constexpr const SchemeTraits& scheme_traits(QuantScheme s) { return kSchemeTraits[size_t(s)]; }

// Bits per code of `w` (its scheme's, or w.bits where the weight decides).
inline int code_bits(const QuantizedWeight& w) {
  const int bits = scheme_traits(w.scheme).code_bits;
  return bits ? bits : w.bits;
}

}  // namespace dgemma
