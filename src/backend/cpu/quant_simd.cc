// QuantIsa tables (quant_simd.h): the portable level (plain loops the
// compiler vectorizes for the baseline ISA, and once more for AVX2 + FMA) and
// the AVX-512 level (intrinsics). Functions compiled for a wider ISA use only
// intrinsics and plain loops, no standard-library code.
#include "backend/cpu/quant_simd.h"

#include <immintrin.h>

#include <cmath>

namespace dgemma::cpu {
namespace {

// ---- portable -------------------------------------------------------------------

// Sixteen independent lanes per (row, weight row) so that the loop vectorizes
// and the summation order is fixed.
static inline __attribute__((always_inline)) void tile_dot_body(const float* x, int64_t ldx, int64_t M, const float* w,
                                                                int64_t ldw, int64_t kc, float* acc) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    for (int j = 0; j < kQuantTileRows; ++j) {
      float* a = acc + (m * kQuantTileRows + j) * kQuantLanes;
      const float* wr = w + j * ldw;
      float s[kQuantLanes];
      for (int l = 0; l < kQuantLanes; ++l) s[l] = a[l];
      for (int64_t k = 0; k < kc; k += kQuantLanes)
        for (int l = 0; l < kQuantLanes; ++l) s[l] += xr[k + l] * wr[k + l];
      for (int l = 0; l < kQuantLanes; ++l) a[l] = s[l];
    }
  }
}

void tile_dot_portable(const float* x, int64_t ldx, int64_t M, const float* w, int64_t ldw, int64_t kc, float* acc) {
  tile_dot_body(x, ldx, M, w, ldw, kc, acc);
}

__attribute__((target("avx2,fma"))) void tile_dot_avx2(const float* x, int64_t ldx, int64_t M, const float* w,
                                                       int64_t ldw, int64_t kc, float* acc) {
  tile_dot_body(x, ldx, M, w, ldw, kc, acc);
}

void nibbles_scaled_portable(const uint8_t* codes, int64_t n, bool high_first, const float* lut, float scale,
                             float* out) {
  for (int64_t k = 0; k < n / 2; ++k) {
    const uint8_t b = codes[k];
    const int first = high_first ? b >> 4 : b & 0xF, second = high_first ? b & 0xF : b >> 4;
    out[2 * k] = lut[first] * scale;
    out[2 * k + 1] = lut[second] * scale;
  }
}

void nvfp4_blocks_portable(const uint8_t* codes, const uint8_t* scales, int64_t blocks, float g, const float* e2m1,
                           const float* e4m3, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float s = e4m3[scales[b]];
    for (int k = 0; k < 8; ++k) {
      const uint8_t c = codes[b * 8 + k];
      out[b * 16 + 2 * k] = (e2m1[c & 0xF] * s) * g;
      out[b * 16 + 2 * k + 1] = (e2m1[c >> 4] * s) * g;
    }
  }
}

void affine4_portable(const uint8_t* codes, int64_t n, float s, float b, float* out) {
  for (int64_t k = 0; k < n / 2; ++k) {
    out[2 * k] = std::fma(s, float(codes[k] & 0xF), b);
    out[2 * k + 1] = std::fma(s, float(codes[k] >> 4), b);
  }
}

void affine8_portable(const uint8_t* codes, int64_t n, float s, float b, float* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = std::fma(s, float(codes[k]), b);
}

void int8_portable(const int8_t* codes, int64_t n, float s, float* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = s * float(codes[k]);
}

void fp8_portable(const uint8_t* codes, int64_t n, const float* lut, float s, float* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = s * lut[codes[k]];
}

// ---- AVX-512 --------------------------------------------------------------------

#define DGEMMA_QUANT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

// Blocks of four rows of x against four of the eight weight rows at a time:
// 16 accumulators, 8 loads per 16 FMAs; the block's x rows (8 KB) are read
// from L1 for the second half.
DGEMMA_QUANT_AVX512 void tile_dot_avx512(const float* x, int64_t ldx, int64_t M, const float* w, int64_t ldw,
                                         int64_t kc, float* acc) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    const float* x0 = x + m * ldx;
    for (int half = 0; half < 2; ++half) {
      const float* wh = w + half * 4 * ldw;
      float* ah = acc + (m * kQuantTileRows + half * 4) * kQuantLanes;
      __m512 a[4][4];
      for (int r = 0; r < 4; ++r)
        for (int j = 0; j < 4; ++j) a[r][j] = _mm512_loadu_ps(ah + (r * kQuantTileRows + j) * kQuantLanes);
      for (int64_t k = 0; k < kc; k += 16) {
        const __m512 w0 = _mm512_loadu_ps(wh + k), w1 = _mm512_loadu_ps(wh + ldw + k);
        const __m512 w2 = _mm512_loadu_ps(wh + 2 * ldw + k), w3 = _mm512_loadu_ps(wh + 3 * ldw + k);
        for (int r = 0; r < 4; ++r) {
          const __m512 xv = _mm512_loadu_ps(x0 + r * ldx + k);
          a[r][0] = _mm512_fmadd_ps(xv, w0, a[r][0]);
          a[r][1] = _mm512_fmadd_ps(xv, w1, a[r][1]);
          a[r][2] = _mm512_fmadd_ps(xv, w2, a[r][2]);
          a[r][3] = _mm512_fmadd_ps(xv, w3, a[r][3]);
        }
      }
      for (int r = 0; r < 4; ++r)
        for (int j = 0; j < 4; ++j) _mm512_storeu_ps(ah + (r * kQuantTileRows + j) * kQuantLanes, a[r][j]);
    }
  }
  for (; m < M; ++m) {
    const float* xr = x + m * ldx;
    for (int half = 0; half < 2; ++half) {
      const float* wh = w + half * 4 * ldw;
      float* ah = acc + (m * kQuantTileRows + half * 4) * kQuantLanes;
      __m512 a[4];
      for (int j = 0; j < 4; ++j) a[j] = _mm512_loadu_ps(ah + j * kQuantLanes);
      for (int64_t k = 0; k < kc; k += 16) {
        const __m512 xv = _mm512_loadu_ps(xr + k);
        for (int j = 0; j < 4; ++j) a[j] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(wh + j * ldw + k), a[j]);
      }
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(ah + j * kQuantLanes, a[j]);
    }
  }
}

// 16 code indices from 8 bytes of 4-bit codes, in element order.
DGEMMA_QUANT_AVX512 inline __m512i nibble_indices(const uint8_t* p, bool high_first) {
  const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i hi = _mm_srli_epi16(w, 4), lo = _mm_and_si128(w, _mm_set1_epi16(0xF));
  const __m128i pairs = high_first ? _mm_or_si128(hi, _mm_slli_epi16(lo, 8)) : _mm_or_si128(lo, _mm_slli_epi16(hi, 8));
  return _mm512_cvtepu8_epi32(pairs);
}

DGEMMA_QUANT_AVX512 void nibbles_scaled_avx512(const uint8_t* codes, int64_t n, bool high_first, const float* lut,
                                               float scale, float* out) {
  const __m512 table = _mm512_loadu_ps(lut), s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(out + i,
                     _mm512_mul_ps(_mm512_permutexvar_ps(nibble_indices(codes + i / 2, high_first), table), s));
}

DGEMMA_QUANT_AVX512 void nvfp4_blocks_avx512(const uint8_t* codes, const uint8_t* scales, int64_t blocks, float g,
                                             const float* e2m1, const float* e4m3, float* out) {
  const __m512 table = _mm512_loadu_ps(e2m1), gv = _mm512_set1_ps(g);
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512 v = _mm512_permutexvar_ps(nibble_indices(codes + b * 8, false), table);
    _mm512_storeu_ps(out + b * 16, _mm512_mul_ps(_mm512_mul_ps(v, _mm512_set1_ps(e4m3[scales[b]])), gv));
  }
}

DGEMMA_QUANT_AVX512 void affine4_avx512(const uint8_t* codes, int64_t n, float s, float b, float* out) {
  const __m512 sv = _mm512_set1_ps(s), bv = _mm512_set1_ps(b);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 q = _mm512_cvtepi32_ps(nibble_indices(codes + i / 2, false));
    _mm512_storeu_ps(out + i, _mm512_fmadd_ps(sv, q, bv));
  }
}

DGEMMA_QUANT_AVX512 void affine8_avx512(const uint8_t* codes, int64_t n, float s, float b, float* out) {
  const __m512 sv = _mm512_set1_ps(s), bv = _mm512_set1_ps(b);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 q =
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i))));
    _mm512_storeu_ps(out + i, _mm512_fmadd_ps(sv, q, bv));
  }
}

DGEMMA_QUANT_AVX512 void int8_avx512(const int8_t* codes, int64_t n, float s, float* out) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 q =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i))));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(sv, q));
  }
}

// 16 codes: zero-extended to indices, the values gathered from the table.
DGEMMA_QUANT_AVX512 void fp8_avx512(const uint8_t* codes, int64_t n, const float* lut, float s, float* out) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(sv, _mm512_i32gather_ps(idx, lut, 4)));
  }
}

#undef DGEMMA_QUANT_AVX512

const QuantIsa kPortable = {"portable",       tile_dot_portable, nibbles_scaled_portable, nvfp4_blocks_portable,
                            affine4_portable, affine8_portable,  int8_portable,           fp8_portable};
const QuantIsa kAvx2 = {"avx2",           tile_dot_avx2,    nibbles_scaled_portable, nvfp4_blocks_portable,
                        affine4_portable, affine8_portable, int8_portable,           fp8_portable};
const QuantIsa kAvx512 = {"avx512",       tile_dot_avx512, nibbles_scaled_avx512, nvfp4_blocks_avx512,
                          affine4_avx512, affine8_avx512,  int8_avx512,           fp8_avx512};

}  // namespace

const QuantIsa& quant_table(QuantLevel level) {
  switch (level) {
    case QuantLevel::kPortable: return kPortable;
    case QuantLevel::kAvx2: return kAvx2;
    case QuantLevel::kAvx512: return kAvx512;
  }
  return kPortable;
}

}  // namespace dgemma::cpu
