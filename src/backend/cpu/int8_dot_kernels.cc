// Int8DotIsa tables (int8_dot.h): the portable level (plain loops, the
// oracle), AVX2 (vpmaddwd), AVX-VNNI (vpdpwssd on 256 bits), AVX-512
// (vpmaddwd on 512 bits) and AVX512-VNNI (vpdpwssd on 512 bits). All evaluate
// the same integer sums and the same fp32 operations in the same order, so
// their results are bit-identical. Functions compiled for AVX2 use only intrinsics and plain
// loops, no standard-library code (see isa_kernels.h for why).
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "backend/cpu/int8_dot.h"
#include "backend/cpu/int8_dot_ggml.h"

namespace dgemma::cpu {
namespace {

// Blocks whose largest magnitude is below this are quantized to zero: 127 /
// amax would overflow, and their contribution (< 1e-30 per element) is
// below anything fp32 accumulation of the other blocks can resolve.
constexpr float kTinyBlock = 1e-30f;

// ---- portable -------------------------------------------------------------------

void quantize_rows_portable(const float* x, int64_t ldx, int64_t m0, int64_t m1, const Int8Activations& a) {
  for (int64_t m = m0; m < m1; ++m) {
    const float* xr = x + m * ldx;
    for (int64_t b = 0; b < a.nb; ++b) {
      const int64_t c0 = b * kI8Block, n = c0 + kI8Block <= a.k ? kI8Block : a.k - c0;
      int16_t* q = a.q + m * a.kp + c0;
      float amax = 0.0f;
      bool finite = true;
      for (int64_t i = 0; i < n; ++i) {
        const float v = std::fabs(xr[c0 + i]);
        finite = finite && v <= FLT_MAX;
        amax = v > amax ? v : amax;
      }
      if (!finite) {
        for (int i = 0; i < kI8Block; ++i) q[i] = 0;
        a.d[m * a.nb + b] = a.ds[m * a.nb + b] = NAN;
        continue;
      }
      const bool tiny = amax < kTinyBlock;
      const float id = tiny ? 0.0f : 127.0f / amax, d = tiny ? 0.0f : amax / 127.0f;
      int32_t sum = 0;
      for (int64_t i = 0; i < kI8Block; ++i) {
        const int16_t v = i < n ? int16_t(std::nearbyint(xr[c0 + i] * id)) : int16_t(0);
        q[i] = v;
        sum += v;
      }
      a.d[m * a.nb + b] = d;
      a.ds[m * a.nb + b] = d * float(sum);
    }
  }
}

void tile_portable(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, I8Values,
                   const int16_t* v, const float* ws, const float* wb, float* acc) {
  for (int64_t m = m0; m < m1; ++m) {
    const int16_t* q = a.q + m * a.kp + k0;
    float* am = acc + (m - m0) * kI8TileRows;
    for (int64_t s = 0; s < kc / sub; ++s) {
      const int64_t b = (k0 + s * sub) / kI8Block;
      const float d = a.d[m * a.nb + b];
      for (int j = 0; j < kI8TileRows; ++j) {
        int32_t isum = 0;
        for (int64_t k = s * sub; k < (s + 1) * sub; ++k)
          isum += int32_t(q[k]) * v[((k / 2) * kI8TileRows + j) * 2 + k % 2];
        am[j] = std::fma(float(isum), ws[s * kI8TileRows + j] * d, am[j]);
      }
      if (wb && (s + 1) * sub % kI8Block == 0) {
        const int64_t bl = (s * sub) / kI8Block;
        for (int j = 0; j < kI8TileRows; ++j) am[j] = std::fma(wb[bl * kI8TileRows + j], a.ds[m * a.nb + b], am[j]);
      }
    }
  }
}

void nibbles_portable(const uint8_t* codes, int64_t n, bool high_first, const NibbleTable& t, int16_t* out) {
  auto value = [&t](int c) { return int16_t(uint16_t(t.lo[c] | t.hi[c] << 8)); };
  for (int64_t k = 0; k < n / 2; ++k) {
    const uint8_t c = codes[k];
    out[2 * k] = value(high_first ? c >> 4 : c & 0xF);
    out[2 * k + 1] = value(high_first ? c & 0xF : c >> 4);
  }
}

void bytes_portable(const uint8_t* codes, int64_t n, bool is_signed, int16_t* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = is_signed ? int16_t(int8_t(codes[k])) : int16_t(codes[k]);
}

void interleave_portable(const int16_t* rows, int64_t ld, int64_t kc, I8Values, int16_t* v) {
  for (int64_t p = 0; p < kc / 2; ++p)
    for (int j = 0; j < kI8TileRows; ++j) {
      v[(p * kI8TileRows + j) * 2] = rows[j * ld + 2 * p];
      v[(p * kI8TileRows + j) * 2 + 1] = rows[j * ld + 2 * p + 1];
    }
}

// ---- AVX2 -----------------------------------------------------------------------

#define DGEMMA_I8_AVX2 __attribute__((target("avx2,fma")))

DGEMMA_I8_AVX2 void quantize_rows_avx2(const float* x, int64_t ldx, int64_t m0, int64_t m1, const Int8Activations& a) {
  const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
  for (int64_t m = m0; m < m1; ++m) {
    const float* xr = x + m * ldx;
    for (int64_t b = 0; b < a.nb; ++b) {
      const int64_t c0 = b * kI8Block;
      if (c0 + kI8Block > a.k) {  // a ragged last block: this row by the portable code
        quantize_rows_portable(x, ldx, m, m + 1, a);
        break;
      }
      __m256 xv[4], mx = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
      for (int i = 0; i < 4; ++i) {
        xv[i] = _mm256_loadu_ps(xr + c0 + 8 * i);
        const __m256 av = _mm256_andnot_ps(sign, xv[i]);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(av, big, _CMP_LE_OQ));  // false for NaN and ±Inf
        mx = _mm256_max_ps(mx, av);
      }
      int16_t* q = a.q + m * a.kp + c0;
      if (_mm256_movemask_ps(ok) != 0xFF) {
        for (int i = 0; i < kI8Block; ++i) q[i] = 0;
        a.d[m * a.nb + b] = a.ds[m * a.nb + b] = NAN;
        continue;
      }
      __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
      h = _mm_max_ps(h, _mm_movehl_ps(h, h));
      h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
      const float amax = _mm_cvtss_f32(h);
      const bool tiny = amax < kTinyBlock;
      const float d = tiny ? 0.0f : amax / 127.0f;
      const __m256 id = _mm256_set1_ps(tiny ? 0.0f : 127.0f / amax);
      __m256i qi[4];
      for (int i = 0; i < 4; ++i)
        qi[i] = _mm256_cvtps_epi32(
            _mm256_round_ps(_mm256_mul_ps(xv[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      // packs_epi32 interleaves 128-bit lanes: fix the order with a permute.
      const __m256i q01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[0], qi[1]), 0xD8);
      const __m256i q23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(qi[2], qi[3]), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), q01);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16), q23);
      const __m256i s32 =
          _mm256_add_epi32(_mm256_madd_epi16(q01, _mm256_set1_epi16(1)), _mm256_madd_epi16(q23, _mm256_set1_epi16(1)));
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
      a.d[m * a.nb + b] = d;
      a.ds[m * a.nb + b] = d * float(_mm_cvtsi128_si32(s));
    }
  }
}

// R activation rows against the tile's 16 weight rows, sub-block by
// sub-block: per pair p of columns one weight vector (16 rows × 2 int16) and
// one broadcast activation pair per row, the int32 lanes (one per weight row)
// accumulating q·V exactly; then the block's fp32 epilogue, lane by lane the
// portable level's operations. SUB is a template argument so that the pair
// loop is fully unrolled (GCC otherwise copies every accumulator once per
// step). The body is written once and instantiated per level, because each
// level needs its own target attribute (a VNNI instruction must not appear
// in a level that lacks VNNI):
//   NAME/TARGET  the function name and its target
//   VEC, N       the int32 vector type and the vectors per 16 weight rows
//   MADD(c,w,x)  c + Σ pairs w·x (vpmaddwd + vpaddd, or vpdpwssd)
//   REG          keep the fp32 accumulators in registers over the whole
//                chunk (32 registers), instead of loading and storing them
//                around each block's epilogue (16 registers): the same
//                operations, so the same bits
//   LOAD/SET1/... the vector operations of that width
#define DGEMMA_I8_TILE_ROWS(NAME, TARGET, VEC, FVEC, N, MADD, REG, LOADI, SET1I, ZEROI, LOADF, STOREF, SET1F, MULF,  \
                            FMAF, CVTF)                                                                              \
  template <int R, int SUB>                                                                                          \
  __attribute__((target(TARGET))) inline void NAME(const Int8Activations& a, int64_t m, int64_t k0, int64_t kc,      \
                                                   const int16_t* v, const float* ws, const float* wb, float* acc) { \
    constexpr int sub = SUB, lanes = kI8TileRows / N;                                                                \
    const int16_t* q[R];                                                                                             \
    for (int r = 0; r < R; ++r) q[r] = a.q + (m + r) * a.kp + k0;                                                    \
    FVEC fa[R][N];                                                                                                   \
    if (REG)                                                                                                         \
      for (int r = 0; r < R; ++r)                                                                                    \
        for (int h = 0; h < N; ++h) fa[r][h] = LOADF(acc + r * kI8TileRows + lanes * h);                             \
    for (int64_t s = 0; s < kc / sub; ++s) {                                                                         \
      VEC c[R][N];                                                                                                   \
      for (int r = 0; r < R; ++r)                                                                                    \
        for (int h = 0; h < N; ++h) c[r][h] = ZEROI();                                                               \
      const int16_t* vs = v + s * sub * kI8TileRows;                                                                 \
      _Pragma("GCC unroll 16") for (int p = 0; p < sub / 2; ++p) {                                                   \
        VEC w[N];                                                                                                    \
        for (int h = 0; h < N; ++h) w[h] = LOADI(vs + p * 2 * kI8TileRows + 2 * lanes * h);                          \
        for (int r = 0; r < R; ++r) {                                                                                \
          int32_t pair;                                                                                              \
          std::memcpy(&pair, q[r] + s * sub + 2 * p, 4);                                                             \
          const VEC xb = SET1I(pair);                                                                                \
          for (int h = 0; h < N; ++h) c[r][h] = MADD(c[r][h], w[h], xb);                                             \
        }                                                                                                            \
      }                                                                                                              \
      const int64_t b = (k0 + s * sub) / kI8Block;                                                                   \
      const bool bias = wb && (s + 1) * sub % kI8Block == 0;                                                         \
      const int64_t bl = (s * sub) / kI8Block;                                                                       \
      for (int r = 0; r < R; ++r) {                                                                                  \
        const FVEC d = SET1F(a.d[(m + r) * a.nb + b]);                                                               \
        float* am = acc + r * kI8TileRows;                                                                           \
        for (int h = 0; h < N; ++h) {                                                                                \
          const FVEC sv = MULF(LOADF(ws + s * kI8TileRows + lanes * h), d);                                          \
          FVEC f = FMAF(CVTF(c[r][h]), sv, REG ? fa[r][h] : LOADF(am + lanes * h));                                  \
          if (bias) f = FMAF(LOADF(wb + bl * kI8TileRows + lanes * h), SET1F(a.ds[(m + r) * a.nb + b]), f);          \
          if (REG)                                                                                                   \
            fa[r][h] = f;                                                                                            \
          else                                                                                                       \
            STOREF(am + lanes * h, f);                                                                               \
        }                                                                                                            \
      }                                                                                                              \
    }                                                                                                                \
    if (REG)                                                                                                         \
      for (int r = 0; r < R; ++r)                                                                                    \
        for (int h = 0; h < N; ++h) STOREF(acc + r * kI8TileRows + lanes * h, fa[r][h]);                             \
  }

// The row blocking of one level: RMAX rows at a time (as many as keep the
// accumulators, weight vectors and broadcasts in registers), then the rest.
#define DGEMMA_I8_TILE(NAME, ROWS, TARGET, RMAX)                                                                      \
  template <int SUB, int R = RMAX - 1>                                                                                \
  __attribute__((target(TARGET))) void NAME##_rest(const Int8Activations& a, int64_t m, int64_t rest, int64_t k0,     \
                                                   int64_t kc, const int16_t* v, const float* ws, const float* wb,    \
                                                   float* am) {                                                       \
    if constexpr (R > 0) {                                                                                            \
      if (rest == R) return ROWS<R, SUB>(a, m, k0, kc, v, ws, wb, am);                                                \
      NAME##_rest<SUB, R - 1>(a, m, rest, k0, kc, v, ws, wb, am);                                                     \
    }                                                                                                                 \
  }                                                                                                                   \
  template <int SUB>                                                                                                  \
  __attribute__((target(TARGET))) void NAME##_sub(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0,       \
                                                  int64_t kc, const int16_t* v, const float* ws, const float* wb,     \
                                                  float* acc) {                                                       \
    int64_t m = m0;                                                                                                   \
    for (; m + RMAX <= m1; m += RMAX) ROWS<RMAX, SUB>(a, m, k0, kc, v, ws, wb, acc + (m - m0) * kI8TileRows);         \
    NAME##_rest<SUB>(a, m, m1 - m, k0, kc, v, ws, wb, acc + (m - m0) * kI8TileRows);                                  \
  }                                                                                                                   \
  __attribute__((target(TARGET))) void NAME(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, \
                                            int sub, I8Values, const int16_t* v, const float* ws, const float* wb,    \
                                            float* acc) {                                                             \
    if (sub == 16) return NAME##_sub<16>(a, m0, m1, k0, kc, v, ws, wb, acc);                                          \
    NAME##_sub<32>(a, m0, m1, k0, kc, v, ws, wb, acc);                                                                \
  }

#define DGEMMA_LOAD256(p) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
#define DGEMMA_MADD256(c, w, x) _mm256_add_epi32(_mm256_madd_epi16((w), (x)), (c))
#define DGEMMA_DP256(c, w, x) _mm256_dpwssd_avx_epi32((c), (w), (x))
#define DGEMMA_LOAD512(p) _mm512_loadu_si512(static_cast<const void*>(p))
#define DGEMMA_MADD512(c, w, x) _mm512_add_epi32(_mm512_madd_epi16((w), (x)), (c))
#define DGEMMA_DP512(c, w, x) dpwssd512((c), (w), (x))

// vpdpwssd in place. GCC 12 compiles _mm512_dpwssd_epi32 in an unrolled
// loop into the product plus a register copy of its accumulator (the tied
// operand), one extra instruction per product.
__attribute__((target("avx512f,avx512vnni"))) inline __m512i dpwssd512(__m512i c, __m512i w, __m512i x) {
  asm("vpdpwssd %2, %1, %0" : "+v"(c) : "v"(w), "v"(x));
  return c;
}

// AVX2: two vectors of 8 lanes, vpmaddwd + vpaddd. Three rows at a time: 6
// accumulators, 2 weight vectors, 3 broadcasts and the products stay in the
// 16 registers (four rows spill an accumulator, and the store-to-load round
// trip per step costs 3×). AVX-VNNI: the same with vpdpwssd (one instruction
// per 16 products instead of two).
DGEMMA_I8_TILE_ROWS(tile_rows_avx2, "avx2,fma", __m256i, __m256, 2, DGEMMA_MADD256, false, DGEMMA_LOAD256,
                    _mm256_set1_epi32, _mm256_setzero_si256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps,
                    _mm256_mul_ps, _mm256_fmadd_ps, _mm256_cvtepi32_ps)
DGEMMA_I8_TILE(tile_avx2, tile_rows_avx2, "avx2,fma", 3)
DGEMMA_I8_TILE_ROWS(tile_rows_avxvnni, "avx2,fma,avxvnni", __m256i, __m256, 2, DGEMMA_DP256, false, DGEMMA_LOAD256,
                    _mm256_set1_epi32, _mm256_setzero_si256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps,
                    _mm256_mul_ps, _mm256_fmadd_ps, _mm256_cvtepi32_ps)
DGEMMA_I8_TILE(tile_avxvnni, tile_rows_avxvnni, "avx2,fma,avxvnni", 3)
// AVX-512: one vector of 16 lanes holds a whole pair step of the tile; six
// rows at a time (6 accumulators, 1 weight vector, 6 broadcasts of the 32
// registers). AVX512-VNNI: vpdpwssd, 32 products per instruction.
DGEMMA_I8_TILE_ROWS(tile_rows_avx512, "avx512f,avx512bw", __m512i, __m512, 1, DGEMMA_MADD512, true, DGEMMA_LOAD512,
                    _mm512_set1_epi32, _mm512_setzero_si512, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps,
                    _mm512_mul_ps, _mm512_fmadd_ps, _mm512_cvtepi32_ps)
DGEMMA_I8_TILE(tile_avx512, tile_rows_avx512, "avx512f,avx512bw", 6)
DGEMMA_I8_TILE_ROWS(tile_rows_avx512vnni, "avx512f,avx512bw,avx512vnni", __m512i, __m512, 1, DGEMMA_DP512, true,
                    DGEMMA_LOAD512, _mm512_set1_epi32, _mm512_setzero_si512, _mm512_loadu_ps, _mm512_storeu_ps,
                    _mm512_set1_ps, _mm512_mul_ps, _mm512_fmadd_ps, _mm512_cvtepi32_ps)
DGEMMA_I8_TILE(tile_avx512vnni, tile_rows_avx512vnni, "avx512f,avx512bw,avx512vnni", 6)

#undef DGEMMA_I8_TILE_ROWS
#undef DGEMMA_I8_TILE
#undef DGEMMA_LOAD256
#undef DGEMMA_MADD256
#undef DGEMMA_DP256
#undef DGEMMA_LOAD512
#undef DGEMMA_MADD512
#undef DGEMMA_DP512

// 64 codes (32 bytes) → 64 int16 values. pshufb and the unpacks work within
// 128-bit lanes: lane 0 yields elements 0-31, lane 1 elements 32-63, and the
// permutes put each 16-element run in place.
DGEMMA_I8_AVX2 inline void nibbles64_avx2(const uint8_t* codes, bool high_first, __m256i tlo, __m256i thi,
                                          int16_t* out) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
  const __m256i low = _mm256_and_si256(b, mask), high = _mm256_and_si256(_mm256_srli_epi16(b, 4), mask);
  const __m256i first = high_first ? high : low, second = high_first ? low : high;
  // e0: elements 0-15 | 32-47, e1: 16-31 | 48-63 (one code per byte, in order).
  const __m256i e[2] = {_mm256_unpacklo_epi8(first, second), _mm256_unpackhi_epi8(first, second)};
  for (int h = 0; h < 2; ++h) {
    const __m256i vl = _mm256_shuffle_epi8(tlo, e[h]), vh = _mm256_shuffle_epi8(thi, e[h]);
    const __m256i a = _mm256_unpacklo_epi8(vl, vh), c = _mm256_unpackhi_epi8(vl, vh);  // 0-7 | 32-39, 8-15 | 40-47
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * h), _mm256_permute2x128_si256(a, c, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 + 16 * h), _mm256_permute2x128_si256(a, c, 0x31));
  }
}

DGEMMA_I8_AVX2 void nibbles_avx2(const uint8_t* codes, int64_t n, bool high_first, const NibbleTable& table,
                                 int16_t* out) {
  const __m256i tlo = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table.lo)));
  const __m256i thi = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table.hi)));
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) nibbles64_avx2(codes + i / 2, high_first, tlo, thi, out + i);
  if (i < n) {  // a last run of 32 codes, through a zero-padded copy
    alignas(32) uint8_t padded[32] = {};
    alignas(32) int16_t values[64];
    for (int k = 0; k < 16; ++k) padded[k] = codes[i / 2 + k];
    nibbles64_avx2(padded, high_first, tlo, thi, values);
    for (int k = 0; k < 32; ++k) out[i + k] = values[k];
  }
}

DGEMMA_I8_AVX2 void bytes_avx2(const uint8_t* codes, int64_t n, bool is_signed, int16_t* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        is_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b));
  }
}

// 8 × 8 transposes of 32-bit pairs: rows j = 0..7 and 8..15, 8 pairs at a time.
DGEMMA_I8_AVX2 void interleave_avx2(const int16_t* rows, int64_t ld, int64_t kc, I8Values, int16_t* v) {
  for (int64_t p0 = 0; p0 < kc / 2; p0 += 8) {
    for (int g = 0; g < 2; ++g) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j)
        r[j] =
            _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + (8 * g + j) * ld + 2 * p0)));
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      // Row p of the transpose holds pair p0 + p of rows 8g .. 8g + 7.
      const __m256 o[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                           _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                           _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                           _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
      for (int p = 0; p < 8; ++p)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + ((p0 + p) * kI8TileRows + 8 * g) * 2),
                            _mm256_castps_si256(o[p]));
    }
  }
}

#undef DGEMMA_I8_AVX2

const Int8DotIsa kPortable = {"portable",     quantize_rows_portable,
                              tile_portable,  nibbles_portable,
                              bytes_portable, interleave_portable,
                              nullptr,        nullptr,
                              false,          nullptr,
                              ggml_levels};
// AVX2 multiplies the byte levels up to ±64 as bytes (int8_dot_bytes_avx2.cc).
const Int8DotIsa kAvx2 = {"avx2",
                          quantize_rows_avx2,
                          tile_avx2,
                          nibbles_avx2,
                          bytes_avx2,
                          interleave_avx2,
                          nullptr,
                          nullptr,
                          false,
                          nullptr,
                          int8avx2::ggml_levels,
                          int8bytes256::quads,
                          int8bytes256::tile,
                          64};
// The VNNI and AVX-512 levels differ from AVX2 in the tile product (the
// quantization of the activations is the AVX2 level's).
const Int8DotIsa kAvxVnni = {"avx-vnni",
                             quantize_rows_avx2,
                             tile_avxvnni,
                             nibbles_avx2,
                             bytes_avx2,
                             interleave_avx2,
                             nullptr,
                             nullptr,
                             false,
                             nullptr,
                             int8avx2::ggml_levels,
                             int8bytes256::quads,
                             int8bytes256::tile_vnni};
// The AVX-512 levels decode 4-bit codes straight into the pair layout
// (int8_dot_avx512.cc); AVX512-VNNI multiplies byte levels (the ggml types)
// as bytes (int8_dot_bytes.cc).
const Int8DotIsa kAvx512 = {"avx512",
                            quantize_rows_avx2,
                            tile_avx512,
                            nibbles_avx2,
                            bytes_avx2,
                            interleave_avx2,
                            nullptr,
                            nullptr,
                            false,
                            int8avx512::nibble_pairs,
                            int8avx2::ggml_levels};
const Int8DotIsa kAvx512Vnni = {"avx512-vnni",
                                quantize_rows_avx2,
                                tile_avx512vnni,
                                nibbles_avx2,
                                bytes_avx2,
                                interleave_avx2,
                                nullptr,
                                nullptr,
                                false,
                                int8avx512::nibble_pairs,
                                int8avx2::ggml_levels,
                                int8bytes::quads,
                                int8bytes::tile};

const Int8DotIsa& amx_int8_level() {
  static const Int8DotIsa l = int8amx::level(kAvx2);
  return l;
}

}  // namespace

NibbleTable nibble_table(const int16_t (&values)[16]) {
  NibbleTable t;
  for (int i = 0; i < 16; ++i) {
    t.lo[i] = uint8_t(uint16_t(values[i]) & 0xFF);
    t.hi[i] = uint8_t(uint16_t(values[i]) >> 8);
  }
  return t;
}

const Int8DotIsa& int8_dot_table(Int8DotLevel level) {
  switch (level) {
    case Int8DotLevel::kPortable: return kPortable;
    case Int8DotLevel::kAvx2: return kAvx2;
    case Int8DotLevel::kAvxVnni: return kAvxVnni;
    case Int8DotLevel::kAvx512: return kAvx512;
    case Int8DotLevel::kAvx512Vnni: return kAvx512Vnni;
    case Int8DotLevel::kAmxInt8: return amx_int8_level();
  }
  return kPortable;
}

std::vector<const Int8DotIsa*> int8_dot_levels() {
  const CpuFeatures& f = cpu_features();
  const CpuIsa top = detected_isa();
  std::vector<const Int8DotIsa*> v = {&kPortable};
  if (top >= CpuIsa::kAvx2) v.push_back(&kAvx2);
  if (top >= CpuIsa::kAvx2 && f.avx_vnni) v.push_back(&kAvxVnni);
  if (top >= CpuIsa::kAvx512) v.push_back(&kAvx512);
  if (top >= CpuIsa::kAvx512 && f.avx512_vnni) v.push_back(&kAvx512Vnni);
  if (top >= CpuIsa::kAmx && f.amx_int8) v.push_back(&amx_int8_level());
  return v;
}

}  // namespace dgemma::cpu
