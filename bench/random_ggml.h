#pragma once
// Random ggml blocks for the benchmarks (no quantizer needed): uniform codes,
// block scales chosen so that the values have mean ≈ 0 and standard deviation
// ≈ sigma (docs/formats.md §5.2 for the layouts).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"

namespace dgemma::ggml_bench {

inline void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Blocks of type t (Q4_K, Q6_K, Q8_0 or Q5_0), rows × cols values.
inline std::vector<uint8_t> random_blocks(GgmlType t, int64_t rows, int64_t cols, float sigma, uint64_t seed) {
  const GgmlTypeTraits& g = ggml_traits(t);
  std::vector<uint8_t> b(size_t(rows) * ggml_row_bytes(t, cols));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < b.size(); i += 8) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    std::memcpy(b.data() + i, &s, std::min<size_t>(8, b.size() - i));
  }
  for (size_t o = 0; o < b.size(); o += size_t(g.block_bytes)) {
    uint8_t* blk = b.data() + o;
    switch (t) {
      case GgmlType::kQ8_0: put_half(blk, sigma / 73.6f); break;  // uniform int8: std 73.6
      case GgmlType::kQ5_0: put_half(blk, sigma / 9.23f); break;  // uniform 5-bit: std 9.23
      case GgmlType::kQ6_K:                                       // scales 100, q - 32 uniform: std 18.5
        for (int i = 0; i < 16; ++i) blk[192 + i] = 100;
        put_half(blk + 208, sigma / (18.5f * 100.0f));
        break;
      case GgmlType::kQ4_K: {  // scale and min 40 in every sub-block: value = d·40·(q - 7.5)
        // 40 = 0b10'1000: bytes 0-7 hold scales and mins 0-3 (6 bits) and the
        // top 2 bits of 4-7; bytes 8-11 their low nibbles.
        for (int i = 0; i < 8; ++i) blk[4 + i] = uint8_t(40 | (2 << 6));
        for (int i = 8; i < 12; ++i) blk[4 + i] = 0x88;
        const float d = sigma / (4.61f * 40.0f);
        put_half(blk, d);
        put_half(blk + 2, d * 7.5f);
        break;
      }
      default: std::fprintf(stderr, "no generator for %s\n", std::string(ggml_type_name(t)).c_str()); std::exit(1);
    }
  }
  return b;
}

}  // namespace dgemma::ggml_bench
