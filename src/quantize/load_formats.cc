#include "quantize/load_formats.h"

#include "quantize/format_rows.h"
#include "quantize/quantizers.h"
#include "quantize/scheme_traits.h"

namespace dgemma {
namespace {

static_assert(rows_in_enum_order(kLoadFormats, &LoadFormat::mode),
              "kLoadFormats: one row per LoadQuantization, in enum order");

// The estimate takes the code width from the scheme (a mode storing MLX
// affine would need its bits in the row).
constexpr bool schemes_fix_code_bits() {
  for (const LoadFormat& f : kLoadFormats)
    if (f.block_rule != LoadBlockRule::kNothing && scheme_traits(f.scheme).code_bits == 0) return false;
  return true;
}
static_assert(schemes_fix_code_bits(), "kLoadFormats: every mode's scheme has a fixed code width");

}  // namespace

const LoadFormat& load_format(LoadQuantization mode) { return kLoadFormats[size_t(mode)]; }

int load_block(const LoadFormat& f, const std::vector<int64_t>& shape) {
  const int64_t cols = shape.back();
  switch (f.block_rule) {
    case LoadBlockRule::kNothing: return 0;
    case LoadBlockRule::kFlat: return f.block;
    case LoadBlockRule::kExpertSlices: {
      const int block = scheme_traits(f.scheme).fixed_block;
      return shape.size() == 3 && cols % block == 0 ? block : 0;
    }
    case LoadBlockRule::kRowBlock: return quant::row_block_for(cols, f.block);
    case LoadBlockRule::kRowBlockOrRow: {
      const int block = quant::row_block_for(cols, f.block);
      return block ? block : int(cols);
    }
    case LoadBlockRule::kRow: return int(cols);
  }
  return 0;
}

int expert_slices(std::string_view tensor_name) { return tensor_name.ends_with("gate_up_proj") ? 2 : 1; }

std::optional<uint64_t> load_quantized_bytes(LoadQuantization mode, const std::vector<int64_t>& shape,
                                             std::string_view tensor_name) {
  const LoadFormat& f = load_format(mode);
  const int block = load_block(f, shape);
  if (block == 0) return std::nullopt;
  uint64_t n = 1;
  for (const int64_t d : shape) n *= uint64_t(d);
  const uint64_t blocks = (n + uint64_t(block) - 1) / uint64_t(block);
  uint64_t bytes =
      n * uint64_t(scheme_traits(f.scheme).code_bits) / 8 + blocks * uint64_t(dtype_bits(f.scale_dtype) / 8);
  if (f.nested_block) bytes += 4 * ((blocks + uint64_t(f.nested_block) - 1) / uint64_t(f.nested_block)) + 4;
  if (f.global_scale_per_slice) bytes += 4 * uint64_t(shape.front()) * uint64_t(expert_slices(tensor_name));
  return bytes;
}

}  // namespace dgemma
