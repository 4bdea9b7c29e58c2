#include "quantized_size.h"

#include "quantize/quantizers.h"

namespace dgemma::cli {

uint64_t quantized_bytes(const BoundTensor& t, LoadQuantization mode) {
  const std::vector<int64_t>& shape = t.expected.shape;
  if (!load_quantization_covers(t.expected.component, mode) || shape.size() < 2 || t.storage != dtype_name(t.dtype))
    return t.nbytes;  // not covered, a vector, or already quantized in the file
  uint64_t n = 1;
  for (const int64_t d : shape) n *= uint64_t(d);
  const int64_t cols = shape.back();
  switch (mode) {
    case LoadQuantization::kNone: return t.nbytes;
    case LoadQuantization::kNf4: {
      const uint64_t blocks = (n + 63) / 64;
      return n / 2 + blocks + 4 * ((blocks + 255) / 256) + 4;
    }
    case LoadQuantization::kNvfp4Experts: {
      if (shape.size() != 3 || cols % 16 != 0) return t.nbytes;
      return n / 2 + n / 16 + 4 * uint64_t(shape[0]) * 2;
    }
    case LoadQuantization::kQ8: {
      const int block = quant::row_block_for(cols, 64);
      if (block == 0) return t.nbytes;
      return n + 4 * (n / uint64_t(block));
    }
    case LoadQuantization::kFp8: return n + 4 * (n / uint64_t(cols));
    case LoadQuantization::kFp8Block: {
      const int block = quant::row_block_for(cols, 128);
      return n + 4 * (n / uint64_t(block == 0 ? cols : block));
    }
  }
  return t.nbytes;
}

}  // namespace dgemma::cli
