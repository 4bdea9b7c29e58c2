#pragma once
// Conversions between checkpoint views and activation tensors, for the
// parity tool and tests: float dtypes become F32 tensors, integer and BOOL
// dtypes become I32 tensors (values outside int32 are an error).
#include "io/safetensors.h"
#include "core/tensor.h"

namespace dgemma {

Tensor tensor_from_view(const TensorView& view);

// Max absolute / relative error and argmax agreement of `actual` against
// `expected` (same element count; the last dimension is the argmax axis).
struct CompareResult {
  int64_t numel = 0;
  double max_abs = 0.0;
  double max_rel = 0.0;    // |a-e| / max(|e|, 1e-6), over all elements
  int64_t mismatches = 0;  // elements outside atol + rtol·|e|
  int64_t argmax_rows = 0;
  int64_t argmax_disagree = 0;  // rows whose argmax differs
  bool shape_mismatch = false;
  bool nan_mismatch = false;  // NaN in one and not the other
};
CompareResult compare_tensors(const Tensor& expected, const Tensor& actual, double atol, double rtol);

}  // namespace dgemma
