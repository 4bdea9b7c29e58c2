// Byte products on AVX2 and AVX-VNNI for weights whose levels are bytes (the
// ggml types; int8_dot.h Int8DotIsa::byte_tile), the 256-bit counterpart of
// int8_dot_bytes.cc: the same layouts (quads of columns by row, 16 rows in
// two 32-byte halves; the activation byte panels) and the same integer sums
// and fp32 epilogue, so the same bits as every other level.
//
// AVX2 multiplies with vpmaddubsw: 32 unsigned activation bytes (q + 128,
// 1..255) by 32 signed levels into 16 int16 sums of two products, which
// vpmaddwd by ones widens to 8 int32 sums of four. A pair of products stays
// inside int16 only while |V| ≤ 64 (2·255·64 = 32640 < 32767), which holds
// for every ggml type but Q8_0 and the IQ4 ones (Int8DotIsa::byte_max_level;
// those keep the int16 pairs). Three instructions per 32 products against
// four for the int16 pairs (vpmaddwd + vpaddd per 16). AVX-VNNI's vpdpbusd
// does the same in one instruction, for every byte level.
#include "backend/cpu/int8_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/isa_target.h"

DGEMMA_ISA_BEGIN("avx2,fma")

namespace dgemma::cpu::int8bytes256 {
namespace {

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

// 8 × 8 transpose of 32-bit elements: r[j] element i → r[i] element j.
inline void transpose8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
  }
}

// Σ of four u8 × s8 products per int32 lane, added to c.
struct MaddUbs {
  static __m256i dot(__m256i c, __m256i u8, __m256i s8) {
    return _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1)));
  }
};

}  // namespace

namespace maddubs {
#include "backend/cpu/int8_dot_bytes256-inl.h"
}  // namespace maddubs

void quads(const int8_t* rows, int64_t ld, int64_t kc, int sub, uint8_t* v, int32_t* wsum) {
  for (int64_t c0 = 0; c0 < kc; c0 += 32)  // 8 quads of the 16 rows, as two halves of 8 rows
    for (int h = 0; h < 2; ++h) {
      __m256i r[8];
      for (int j = 0; j < 8; ++j) r[j] = load(rows + (8 * h + j) * ld + c0);
      transpose8(r);
      for (int q = 0; q < 8; ++q) store(v + ((c0 / 4 + q) * kI8TileRows + 8 * h) * 4, r[q]);
    }
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t s = 0; s < kc / sub; ++s)
    for (int h = 0; h < 2; ++h) {
      __m256i t = _mm256_setzero_si256();
      for (int p = 0; p < sub / 4; ++p)
        t = _mm256_add_epi32(
            t, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load(v + (s * sub / 4 + p) * 64 + 32 * h)), ones16));
      store(wsum + s * kI8TileRows + 8 * h, t);
    }
}

void tile(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
          const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  maddubs::tile_dot<MaddUbs>(a, m0, m1, k0, kc, sub, v, wsum, ws, wb, acc);
}

}  // namespace dgemma::cpu::int8bytes256

DGEMMA_ISA_END()

DGEMMA_ISA_BEGIN("avx2,fma,avxvnni")

namespace dgemma::cpu::int8bytes256 {
namespace {

struct DpBusd {
  static __m256i dot(__m256i c, __m256i u8, __m256i s8) { return _mm256_dpbusd_avx_epi32(c, u8, s8); }
};

}  // namespace

namespace vnni {
#include "backend/cpu/int8_dot_bytes256-inl.h"
}  // namespace vnni

void tile_vnni(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
               const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  vnni::tile_dot<DpBusd>(a, m0, m1, k0, kc, sub, v, wsum, ws, wb, acc);
}

}  // namespace dgemma::cpu::int8bytes256

DGEMMA_ISA_END()

#endif  // __x86_64__
