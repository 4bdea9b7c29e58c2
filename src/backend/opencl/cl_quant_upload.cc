// Buffer sizes follow the layouts of quantize/quantized_weight.h QuantSlice
// (docs/formats.md §2.2, §3.3, §4.2 and §8.2).
#include "backend/opencl/cl_quant_upload.h"

#include <climits>
#include <cstring>

#include "dgemma/error.h"
#include "quantize/scheme_traits.h"

namespace dgemma::opencl {

size_t QuantUploadPlan::Part::bytes() const {
  size_t n = 0;
  for (const auto& [p, b] : pieces) n += b;
  return n;
}

std::string opencl_quant_refusal(const QuantizedWeight& q) {
  const std::string scheme(quant_scheme_name(q.scheme));
  if (q.cols <= 0 || q.rows <= 0)
    return scheme + " weight of " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + " is empty";
  if (q.cols > INT_MAX || q.rows > INT_MAX - 4096)
    return scheme + " weight of " + std::to_string(q.rows) + "x" + std::to_string(q.cols) +
           " exceeds the OpenCL kernels' int row and column indices";
  if (q.scheme == QuantScheme::kGgml)
    return "a GGUF " + std::string(ggml_type_name(q.ggml_type)) +
           " tensor: ggml block types run on the CPU and CUDA backends, not on OpenCL (docs/formats.md §5)";
  if (q.block <= 0) return scheme + " weight with block " + std::to_string(q.block);
  if (q.slices.empty()) return scheme + " weight without slices";
  if (q.scheme == QuantScheme::kNF4) {
    if (q.double_quant && q.nested_block <= 0) return "nf4 weight with nested block " + std::to_string(q.nested_block);
    return "";
  }
  // Row-sliced formats: whole scale groups per row.
  if (q.cols % q.block != 0)
    return scheme + " weight of " + std::to_string(q.cols) + " columns in blocks of " + std::to_string(q.block) +
           ": the OpenCL decoders need whole blocks per row";
  const int bits = code_bits(q);
  if (bits != 4 && bits != 8) return scheme + " weight of " + std::to_string(bits) + "-bit codes";
  if (bits == 4 && q.cols % 2 != 0) return scheme + " weight of 4-bit codes and an odd column count";
  if (q.scheme == QuantScheme::kAffine && q.scale_dtype != DType::kF32 && q.scale_dtype != DType::kBF16 &&
      q.scale_dtype != DType::kF16)
    return "affine weight with " + std::string(dtype_name(q.scale_dtype)) +
           " scales: the OpenCL decoders read F32, BF16 and F16 scales";
  if (q.scheme == QuantScheme::kNVFP4 && q.slices.size() > size_t(INT_MAX / 2))
    return "nvfp4 weight of " + std::to_string(q.slices.size()) + " slices";
  return "";
}

QuantUploadPlan plan_quant_upload(const QuantizedWeight& q, const std::string& name) {
  const std::string why = opencl_quant_refusal(q);
  if (!why.empty()) throw Error("opencl backend: weight '" + name + "': " + why);
  QuantUploadPlan p;
  p.cols = int(q.cols);
  p.block = q.block;
  p.codes.what = "codes";
  p.scales.what = "scales";
  if (q.scheme == QuantScheme::kNF4) {
    // docs/formats.md §2.2-§2.3: one stream over the flattened tensor.
    const int64_t n = q.rows * q.cols, blocks = (n + q.block - 1) / q.block;
    const QuantSlice& s = q.slices.front();
    p.scheme = "nf4";
    p.codes.pieces.push_back({s.codes, size_t((n + 1) / 2)});
    p.table.what = "code books";
    p.table.pieces.push_back({q.code_map, sizeof q.code_map});
    if (q.double_quant) {
      p.scales.what = "absmax codes";
      p.scales.pieces.push_back({s.scales, size_t(blocks)});
      p.extra.what = "nested absmax";
      p.extra.pieces.push_back({q.nested_scales, size_t((blocks + q.nested_block - 1) / q.nested_block) * 4});
      p.table.pieces.push_back({q.nested_map, sizeof q.nested_map});
      p.p0 = 1;
      p.p1 = q.nested_block;
      p.f0 = q.nested_offset;
    } else {
      p.scales.what = "absmax";
      p.scales.pieces.push_back({s.scales, size_t(blocks) * 4});
    }
    return p;
  }
  const SchemeTraits& traits = scheme_traits(q.scheme);
  const int64_t bits = code_bits(q), groups = q.cols / q.block;
  const int64_t scale_size = dtype_bits(traits.scale_dtype.value_or(q.scale_dtype)) / 8;
  for (const QuantSlice& s : q.slices) {
    p.codes.pieces.push_back({s.codes, size_t(s.rows * q.cols * bits / 8)});
    p.scales.pieces.push_back({s.scales, size_t(s.rows * groups * scale_size)});
    if (traits.biases) p.extra.pieces.push_back({s.biases, size_t(s.rows * groups * scale_size)});
  }
  switch (q.scheme) {
    case QuantScheme::kNVFP4: {
      p.scheme = "nvfp4";
      p.scales.what = "e4m3 scales";
      p.table.what = "slice global scales";
      for (const QuantSlice& s : q.slices) {
        const int first = int(s.row_begin);
        float bits_of_first;
        static_assert(sizeof first == sizeof bits_of_first);
        std::memcpy(&bits_of_first, &first, sizeof first);
        p.owned_table.push_back(bits_of_first);
        p.owned_table.push_back(s.global_scale);
      }
      p.table.pieces.push_back({p.owned_table.data(), p.owned_table.size() * sizeof(float)});
      p.p1 = int(q.slices.size());
      break;
    }
    case QuantScheme::kAffine:
      p.scheme = "affine";
      p.extra.what = "biases";
      p.p0 = q.bits;
      p.p1 = q.scale_dtype == DType::kBF16 ? 1 : q.scale_dtype == DType::kF16 ? 2 : 0;
      break;
    case QuantScheme::kInt8: p.scheme = "int8"; break;
    case QuantScheme::kFP8: p.scheme = "fp8"; break;
    case QuantScheme::kNF4:
    case QuantScheme::kGgml: break;
  }
  return p;
}

}  // namespace dgemma::opencl
