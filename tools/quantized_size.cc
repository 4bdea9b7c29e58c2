#include "quantized_size.h"

#include "quantize/load_formats.h"

namespace dgemma::cli {

uint64_t quantized_bytes(const BoundTensor& t, LoadQuantization mode) {
  const std::vector<int64_t>& shape = t.expected.shape;
  if (!load_quantization_covers(t.expected.component, mode) || shape.size() < 2 || t.storage != dtype_name(t.dtype))
    return t.nbytes;  // not covered, a vector, or already quantized in the file
  return load_quantized_bytes(mode, shape, t.expected.name).value_or(t.nbytes);
}

}  // namespace dgemma::cli
