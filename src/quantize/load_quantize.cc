#include "quantize/load_quantize.h"

#include <string>

#include "dgemma/error.h"
#include "quantize/load_formats.h"
#include "quantize/format_rows.h"
#include "quantize/page_release.h"
#include "quantize/quantizers.h"

namespace dgemma {

bool load_quantization_covers(Component c, LoadQuantization mode) {
  return (load_format(mode).covers & component_bit(c)) != 0;
}

std::optional<LoadQuantization> parse_load_quantization(std::string_view name) {
  if (name.empty()) return LoadQuantization::kNone;
  for (const LoadFormat& f : kLoadFormats)
    if (f.name == name) return f.mode;
  return std::nullopt;
}

const char* load_quantization_names() {
  static const std::string names = name_list(kLoadFormats);
  return names.c_str();
}

std::string load_quantization_help() {
  std::string s;
  for (const LoadFormat& f : kLoadFormats) {
    if (!s.empty()) s += "; ";
    s += f.name;
    if (!f.help.empty()) s += " (" + std::string(f.help) + ")";
  }
  return s;
}

std::optional<WeightRef> quantize_at_load(const WeightRef& plain, const ExpectedTensor& ex, LoadQuantization mode,
                                          bool release_source, int threads) {
  if (plain.quant || !load_quantization_covers(ex.component, mode) || plain.shape.size() < 2) return std::nullopt;
  if (plain.dtype != DType::kF32 && plain.dtype != DType::kBF16 && plain.dtype != DType::kF16) return std::nullopt;
  const LoadFormat& f = load_format(mode);
  const quant::FloatSource src{plain.dtype, plain.data, plain.numel()};
  quant::QuantizeParams p;
  p.threads = threads;
  p.block = load_block(f, plain.shape);
  if (p.block == 0) return std::nullopt;
  if (f.block_rule == LoadBlockRule::kExpertSlices) {
    p.slice_rows = plain.shape[1] / expert_slices(ex.name);
    p.scale_rows = plain.shape[1];
  }
  std::shared_ptr<QuantizedWeight> q = quant::quantize_weight(f.scheme, src, plain.shape, plain.dtype, p);
  q->stored_names = {plain.name};
  q->found_as = {ex.name};
  q->describe += " (quantized at load)";
  if (release_source) release_mapped_pages(plain.data, uint64_t(plain.numel()) * uint64_t(dtype_bits(plain.dtype) / 8));
  WeightRef r = plain;
  r.data = q->slices.front().codes;
  r.quant = std::move(q);
  return r;
}

}  // namespace dgemma
