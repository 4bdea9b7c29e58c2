// libFuzzer target: the input's bytes decoded as a row of every ggml block
// type (docs/formats.md §5.2), through the decoder and the integer-level
// view. Any bytes are a valid block: fp16 NaN/Inf scales give NaN/Inf values,
// never a trap; a sanitizer report or a level outside the type's range is a
// bug.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/ggml_types.h"
#include "quantize/ggml_blocks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const dgemma::GgmlTypeTraits& t : dgemma::kGgmlTypes) {
    const size_t blocks = size / size_t(t.block_bytes);
    if (blocks == 0) continue;
    const int64_t n = int64_t(blocks) * t.block_elems;
    std::vector<float> out(static_cast<size_t>(n));
    dgemma::quant::ggml_decode_row(t.type, data, 0, n, out.data());
    // A part of a row from an odd column decodes to the same floats.
    if (n > 1) {
      std::vector<float> part(static_cast<size_t>(n - 1));
      dgemma::quant::ggml_decode_row(t.type, data, 1, n - 1, part.data());
      for (int64_t i = 1; i < n; ++i)
        if (!(part[size_t(i - 1)] == out[size_t(i)]) && out[size_t(i)] == out[size_t(i)]) __builtin_trap();
    }
    if (!dgemma::ggml_is_block(t.type)) continue;
    dgemma::quant::GgmlBlockLevels lv;
    for (size_t b = 0; b < blocks; ++b) {
      const int subs = dgemma::quant::ggml_block_levels(t.type, data + b * size_t(t.block_bytes), lv);
      if (subs * t.sub_block != t.block_elems) __builtin_trap();
      for (int e = 0; e < t.block_elems; ++e)
        if (lv.levels[e] < -128 || lv.levels[e] > 127) __builtin_trap();
    }
  }
  return 0;
}
