#pragma once
// How a quantized weight (quantize/quantized_weight.h) goes to the device
// (docs/opencl.md §1): packed, as stored, never dequantized on the host. Its
// codes, block scales and biases each become one buffer, the slices' pieces
// joined in row order (every row-sliced layout of QuantSlice is row-major, so
// the joined buffer is laid out as one slice holding all rows); NF4's nested
// absmax and code books, and NVFP4's per-slice global scales, follow. The
// kernels read them through the decoders of kernels_quant.cl, whose
// parameters this plan fills. Plain C++: WeightCache does the copies.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "quantize/quantized_weight.h"

namespace dgemma::opencl {

struct QuantUploadPlan {
  // One device buffer: host pieces copied one after another.
  struct Part {
    std::string what;  // "codes", "scales", ... for messages
    std::vector<std::pair<const void*, size_t>> pieces;
    size_t bytes() const;
  };
  const char* scheme = "";           // the decoders' name: nf4, nvfp4, affine, int8, fp8 (QLOAD in kernels_common.cl)
  Part codes, scales, extra, table;  // extra, table: no pieces where the scheme has none
  std::vector<float> owned_table;    // NVFP4: the table's values, built here
  // The decoders' q_cols, q_block, q_p0, q_p1, q_f0 (kernels_quant.cl).
  int cols = 0, block = 0, p0 = 0, p1 = 0;
  float f0 = 0.0f;
};

// Why the OpenCL kernels cannot read `q` (empty when they can): a layout or
// scale dtype they do not decode, or a size beyond their int indices.
std::string opencl_quant_refusal(const QuantizedWeight& q);

// The buffers and parameters of `q` (named `name` in errors); throws the
// refusal's reason as a dgemma::Error where opencl_quant_refusal gives one.
QuantUploadPlan plan_quant_upload(const QuantizedWeight& q, const std::string& name);

}  // namespace dgemma::opencl
