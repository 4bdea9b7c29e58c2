#include "quantize/load_quantize.h"

#include "dgemma/error.h"
#include "quantize/page_release.h"
#include "quantize/quantizers.h"

namespace dgemma {

bool load_quantization_covers(Component c, LoadQuantization mode) {
  switch (mode) {
    case LoadQuantization::kNone: return false;
    case LoadQuantization::kNvfp4Experts: return c == Component::kExperts;
    case LoadQuantization::kNf4:
    case LoadQuantization::kQ8:
    case LoadQuantization::kFp8:
    case LoadQuantization::kFp8Block:
      return c == Component::kAttention || c == Component::kDenseMlp || c == Component::kSelfConditioning ||
             c == Component::kExperts;
  }
  return false;
}

std::optional<LoadQuantization> parse_load_quantization(std::string_view name) {
  if (name == "none" || name.empty()) return LoadQuantization::kNone;
  if (name == "nf4") return LoadQuantization::kNf4;
  if (name == "nvfp4-experts") return LoadQuantization::kNvfp4Experts;
  if (name == "q8") return LoadQuantization::kQ8;
  if (name == "fp8") return LoadQuantization::kFp8;
  if (name == "fp8-block") return LoadQuantization::kFp8Block;
  return std::nullopt;
}

const char* load_quantization_names() { return "none, nf4, nvfp4-experts, q8, fp8 or fp8-block"; }

std::optional<WeightRef> quantize_at_load(const WeightRef& plain, const ExpectedTensor& ex, LoadQuantization mode,
                                          bool release_source, int threads) {
  if (plain.quant || !load_quantization_covers(ex.component, mode) || plain.shape.size() < 2) return std::nullopt;
  if (plain.dtype != DType::kF32 && plain.dtype != DType::kBF16 && plain.dtype != DType::kF16) return std::nullopt;
  const int64_t cols = plain.shape.back();
  const quant::FloatSource src{plain.dtype, plain.data, plain.numel()};
  quant::QuantizeParams p;
  p.threads = threads;
  QuantScheme scheme = QuantScheme::kNF4;
  if (mode == LoadQuantization::kNvfp4Experts) {
    if (plain.shape.size() != 3 || cols % 16 != 0) return std::nullopt;
    scheme = QuantScheme::kNVFP4;
    const bool gate_up = ex.name.size() >= 12 && ex.name.compare(ex.name.size() - 12, 12, "gate_up_proj") == 0;
    p.slice_rows = gate_up ? plain.shape[1] / 2 : plain.shape[1];
    p.scale_rows = plain.shape[1];
  } else if (mode == LoadQuantization::kQ8) {
    scheme = QuantScheme::kInt8;
    p.block = quant::row_block_for(cols, 64);
    if (p.block == 0) return std::nullopt;
  } else if (mode == LoadQuantization::kFp8 || mode == LoadQuantization::kFp8Block) {
    scheme = QuantScheme::kFP8;
    p.block = mode == LoadQuantization::kFp8Block ? quant::row_block_for(cols, 128) : 0;
    if (p.block == 0) p.block = int(cols);  // per output channel
  }
  std::shared_ptr<QuantizedWeight> q = quant::quantize_weight(scheme, src, plain.shape, plain.dtype, p);
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
