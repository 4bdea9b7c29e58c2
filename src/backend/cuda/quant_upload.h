#pragma once
// How a quantized weight (quantize/quantized_weight.h) goes to the device:
// its packed buffers uploaded as they are stored (codes, block scales, biases
// of every slice; NF4's nested scales), described to the kernels by a QView
// (cuda_kernels.h). The weight stays quantized in device memory; kernels
// dequantize per element. Plain C++: the CUDA backend does the copies.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_kernels.h"
#include "quantize/quantized_weight.h"

namespace dgemma::cuda {

// The kernels' element type of a float dtype (F32, BF16, F16); false for
// any other dtype.
bool float_wtype(DType dtype, WType* out);

// The kernels' name of a quantization scheme.
QScheme kernel_scheme(QuantScheme scheme);

struct QuantUpload {
  struct Buffer {
    const void* host = nullptr;
    int64_t bytes = 0;
    std::string what;  // "codes of slice 3", ...
  };
  std::vector<Buffer> buffers;
  QView view;                  // tables and shape; device pointers set by bind()
  std::vector<QSlice> slices;  // rows of each slice; device pointers set by bind()

  // Sets the device addresses: dev[b] is where buffers[b] was copied.
  void bind(const std::vector<void*>& dev);

 private:
  friend QuantUpload plan_quant_upload(const QuantizedWeight& q, const std::string& name);
  struct SliceBuffers {
    int codes = -1, scales = -1, biases = -1;
  };
  std::vector<SliceBuffers> slice_buffers_;
  int nested_scales_ = -1;
};

// The buffers and view of `q` (named `name` in errors). Throws dgemma::Error
// for a layout the kernels cannot read (a scale dtype other than F32, BF16,
// F16 for affine weights).
QuantUpload plan_quant_upload(const QuantizedWeight& q, const std::string& name);

}  // namespace dgemma::cuda
