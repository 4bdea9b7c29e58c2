// The AMX-INT8 level of the integer-dot GEMMs (int8_dot.h): the same integer
// block sums and the same fp32 epilogue as every other level, so its results
// are bit-identical to the portable level's, with the products on the AMX
// tiles: TDPBSSD (int8 activations × int8 weight bytes) and TDPBSUD (× uint8
// weight bytes), 16 activation rows × 16 weight rows × one sub-block of k
// (32 columns, 16 for NVFP4) per instruction, int32 sums.
//
// Weight values V by range (I8Values): int8 (int8, NVFP4's 2·E2M1, MLX
// 4-bit) one signed product; uint8 (MLX 8-bit) one unsigned product; int16
// (NF4's 15-bit levels) V = 256·hi + lo with hi = V >> 8 signed and lo = V &
// 255 unsigned, two products, and the sub-block's sum 256·Σq·hi + Σq·lo is
// the same exact integer (|Σq·V| < 2^31, int8_dot.h).
//
// Layouts (this level's row format and interleave):
//   decoded row j (nibbles/bytes): kc low bytes, then kc high bytes, in the
//     int16 row buffer of the driver (2·ld bytes per row);
//   tile operand (interleave): per plane, k quads by row,
//     plane[(kq·16 + j)·4 + t] = byte(V[j, 4kq + t]): a sub-block's rows of
//     quads are one B tile (sub/4 rows of 64 bytes); the low plane first,
//     the high one 16·kc bytes after it;
//   activations: Int8Activations::q8, panels of 64 columns (A tile: 16 rows
//     of `sub` bytes at a stride of 64; the 16 zero rows past the last row
//     make a last tile of fewer rows read zeros, whose outputs are dropped).
// Each block's C tiles are stored and folded into fp32 accumulators held in
// registers (16 rows × 16 columns), in ascending block order, in a pipeline
// (tile() below) that keeps the tiles multiplying while the vector units
// fold. The int8 sums need a C store per 16 × 16 × 32 product: the tiles'
// loads and stores, not their products, bound this level (bench/README.md).
#include "backend/cpu/int8_dot.h"

#include "backend/cpu/amx_tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/isa_target.h"

#include <cstring>

DGEMMA_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,amx-tile,amx-int8")

namespace dgemma::cpu::int8amx {
namespace {

#include "backend/cpu/transpose16-inl.h"

using amx_tiles::memory_barrier;
using amx_tiles::TileConfig;

// Tiles. One product per block (int8 and uint8 values): 0 and 2 C (16 × 16
// int32) of even and odd blocks, 4 and 7 their A (16 rows × sub bytes), 6
// and 5 their B (sub/4 rows × 64 bytes). Two (int16 values): 0 and 1 C of
// the high and the low product, 4 and 7 A, 5-6 and 2-3 B of the high and
// the low plane, of even and odd blocks. Alternating the operand tiles
// lets the next block's loads run while the tiles still read this block's.
void begin(int sub, I8Values values) {
  TileConfig c;
  const bool wide = values == I8Values::kS16;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;  // C
  c.colsb[4] = c.colsb[7] = uint16_t(sub);                      // A
  for (int t : {5, 6}) c.rows[t] = uint8_t(sub / 4);            // B
  if (wide)
    for (int t : {2, 3}) c.rows[t] = uint8_t(sub / 4);
  memory_barrier();
  _tile_loadconfig(&c);
}

void end() { _tile_release(); }

// 64 codes (32 bytes) → 64 low bytes at lo and 64 high bytes at hi, through
// the table's two pshufb halves. unpack works within 128-bit lanes: e0 holds
// elements 0-15 | 32-47, e1 16-31 | 48-63; the permutes restore the order.
inline void nibbles64(const uint8_t* codes, bool high_first, __m256i tlo, __m256i thi, uint8_t* lo, uint8_t* hi) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
  const __m256i low = _mm256_and_si256(b, mask), high = _mm256_and_si256(_mm256_srli_epi16(b, 4), mask);
  const __m256i first = high_first ? high : low, second = high_first ? low : high;
  const __m256i e0 = _mm256_unpacklo_epi8(first, second), e1 = _mm256_unpackhi_epi8(first, second);
  const __m256i l0 = _mm256_shuffle_epi8(tlo, e0), l1 = _mm256_shuffle_epi8(tlo, e1);
  const __m256i h0 = _mm256_shuffle_epi8(thi, e0), h1 = _mm256_shuffle_epi8(thi, e1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), _mm256_permute2x128_si256(l0, l1, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + 32), _mm256_permute2x128_si256(l0, l1, 0x31));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), _mm256_permute2x128_si256(h0, h1, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + 32), _mm256_permute2x128_si256(h0, h1, 0x31));
}

void nibbles(const uint8_t* codes, int64_t n, bool high_first, const NibbleTable& table, int16_t* out) {
  const __m256i tlo = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table.lo)));
  const __m256i thi = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table.hi)));
  uint8_t* lo = reinterpret_cast<uint8_t*>(out);
  uint8_t* hi = lo + n;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) nibbles64(codes + i / 2, high_first, tlo, thi, lo + i, hi + i);
  if (i < n) {  // a last run of 32 codes, through a zero-padded copy
    alignas(32) uint8_t padded[32] = {}, l[64], h[64];
    std::memcpy(padded, codes + i / 2, 16);
    nibbles64(padded, high_first, tlo, thi, l, h);
    std::memcpy(lo + i, l, 32);
    std::memcpy(hi + i, h, 32);
  }
}

void bytes(const uint8_t* codes, int64_t n, bool is_signed, int16_t* out) {
  uint8_t* lo = reinterpret_cast<uint8_t*>(out);
  uint8_t* hi = lo + n;
  std::memcpy(lo, codes, size_t(n));
  for (int64_t i = 0; i < n; i += 32) {  // high bytes: the sign (signed codes) or zero
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + i));
    const __m256i h = is_signed ? _mm256_cmpgt_epi8(_mm256_setzero_si256(), b) : _mm256_setzero_si256();
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + i), h);
  }
}

// One plane: rows of kc bytes at stride ld_bytes → quads by row.
void quads(const uint8_t* rows, int64_t ld_bytes, int64_t kc, uint8_t* out) {
  for (int64_t c0 = 0; c0 < kc; c0 += 64) {
    const int64_t n = kc - c0 >= 64 ? 16 : (kc - c0) / 4;  // quads in this column group (16 or 8)
    const __mmask16 mask = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
    __m512i r[16];
    for (int j = 0; j < 16; ++j) r[j] = _mm512_maskz_loadu_epi32(mask, rows + j * ld_bytes + c0);
    transpose16(r);
    for (int64_t q = 0; q < n; ++q) _mm512_storeu_si512(out + (c0 / 4 + q) * 64, r[q]);
  }
}

void interleave(const int16_t* rows, int64_t ld, int64_t kc, I8Values values, int16_t* v) {
  const uint8_t* r = reinterpret_cast<const uint8_t*>(rows);
  uint8_t* out = reinterpret_cast<uint8_t*>(v);
  quads(r, 2 * ld, kc, out);
  if (values == I8Values::kS16) quads(r + kc, 2 * ld, kc, out + 16 * kc);
}

// One product per block: the operand loads and the product into C (issue),
// and the store of C to c, separate so that a block's tile is stored only
// after the next block's product has been issued (a store right after its
// product waits for it). Macros: the compilers' tile intrinsics take literal
// tile numbers.
#define DGEMMA_AMX_PRODUCTS(NAME, C, A, B)                                              \
  inline void NAME##_issue(const int8_t* a_rows, const uint8_t* lo, bool is_unsigned) { \
    _tile_loadd(A, a_rows, 64);                                                         \
    _tile_loadd(B, lo, 64);                                                             \
    _tile_zero(C);                                                                      \
    if (is_unsigned)                                                                    \
      _tile_dpbsud(C, A, B);                                                            \
    else                                                                                \
      _tile_dpbssd(C, A, B);                                                            \
  }                                                                                     \
  inline void NAME##_store(int32_t* c) { _tile_stored(C, c, 64); }
DGEMMA_AMX_PRODUCTS(even, 0, 4, 6)
DGEMMA_AMX_PRODUCTS(odd, 2, 7, 5)
#undef DGEMMA_AMX_PRODUCTS
// Two products per block (int16 values): the operand loads, and the
// products into C tiles 0 (high plane) and 1 (low plane), which the caller
// stores (wide_store) between the two, once the previous block's products
// are done.
#define DGEMMA_AMX_WIDE(NAME, A, BH, BL)                                                \
  inline void NAME##_load(const int8_t* a_rows, const uint8_t* lo, const uint8_t* hi) { \
    _tile_loadd(A, a_rows, 64);                                                         \
    _tile_loadd(BH, hi, 64);                                                            \
    _tile_loadd(BL, lo, 64);                                                            \
  }                                                                                     \
  inline void NAME##_products() {                                                       \
    _tile_zero(0);                                                                      \
    _tile_zero(1);                                                                      \
    _tile_dpbssd(0, A, BH);                                                             \
    _tile_dpbsud(1, A, BL);                                                             \
  }
DGEMMA_AMX_WIDE(wide_even, 4, 5, 6)
DGEMMA_AMX_WIDE(wide_odd, 7, 2, 3)
#undef DGEMMA_AMX_WIDE
inline void wide_store(int32_t* c) {
  _tile_stored(0, c, 64);
  _tile_stored(1, c + 256, 64);
}

void tile(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, I8Values values,
          const int16_t* v, const float* ws, const float* wb, float* acc) {
  const uint8_t* lo = reinterpret_cast<const uint8_t*>(v);
  const uint8_t* hi = lo + 16 * kc;
  const int64_t nsub = kc / sub, plane_step = int64_t(sub / 4) * 64;
  const bool wide = values == I8Values::kS16;
  alignas(64) int32_t c[2][512];
  memory_barrier();
  for (int64_t m = m0; m < m1; m += 16) {
    const int rows = int(m1 - m < 16 ? m1 - m : 16);
    const int64_t panel_rows = a.m + kI8TileRows;
    float* am = acc + (m - m0) * kI8TileRows;
    __m512 fa[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) fa[r] = r < rows ? _mm512_loadu_ps(am + r * 16) : _mm512_setzero_ps();
    // A three-stage pipeline over the sub-blocks: at step t the products of
    // block t are issued, block t - 1's tiles stored and block t - 2 folded,
    // so that neither the store nor the fold waits for the instruction just
    // before it. Two buffers are enough (block t - 2's tiles were stored at
    // step t - 1), and two C tiles for one product per block; two products
    // share C tiles 0-1, stored after block t's operands are loaded and
    // before its products start.
    const bool is_unsigned = values == I8Values::kU8;
    for (int64_t t = 0; t < nsub + 2; ++t) {
      const int64_t tt = t < nsub ? t : 0, k = k0 + tt * sub;  // block t's operands (any, past the last)
      const int8_t* at = a.q8 + ((k / 64) * panel_rows + m) * 64 + k % 64;
      const uint8_t *lt = lo + tt * plane_step, *ht = hi + tt * plane_step;
      if (wide) {
        if (t < nsub) {
          if (t & 1)
            wide_odd_load(at, lt, ht);
          else
            wide_even_load(at, lt, ht);
        }
        if (t >= 1 && t - 1 < nsub) wide_store(c[(t - 1) & 1]);
        if (t < nsub) {
          if (t & 1)
            wide_odd_products();
          else
            wide_even_products();
        }
      } else {
        if (t < nsub) {
          if (t & 1)
            odd_issue(at, lt, is_unsigned);
          else
            even_issue(at, lt, is_unsigned);
        }
        if (t >= 1 && t - 1 < nsub) {
          if ((t - 1) & 1)
            odd_store(c[1]);
          else
            even_store(c[0]);
        }
      }
      if (t < 2) continue;
      const int64_t s = t - 2;
      memory_barrier();
      // The fold: per row, the portable level's operations (int8_dot.h).
      const int32_t* cs = c[s & 1];
      const int64_t b = (k0 + s * sub) / kI8Block;
      const bool bias = wb && (s + 1) * sub % kI8Block == 0;
      const __m512 wsv = _mm512_loadu_ps(ws + s * kI8TileRows);
      const __m512 wbv = bias ? _mm512_loadu_ps(wb + (s * sub) / kI8Block * kI8TileRows) : _mm512_setzero_ps();
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r) {
        if (r >= rows) break;
        __m512i isum = _mm512_load_si512(cs + r * 16);
        if (wide) isum = _mm512_add_epi32(_mm512_slli_epi32(isum, 8), _mm512_load_si512(cs + 256 + r * 16));
        const __m512 sv = _mm512_mul_ps(wsv, _mm512_set1_ps(a.d[(m + r) * a.nb + b]));
        fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), sv, fa[r]);
        if (bias) fa[r] = _mm512_fmadd_ps(wbv, _mm512_set1_ps(a.ds[(m + r) * a.nb + b]), fa[r]);
      }
      memory_barrier();
    }
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r)
      if (r < rows) _mm512_storeu_ps(am + r * 16, fa[r]);
  }
}

}  // namespace

// The activation quantization is the AVX2 level's (int8_dot_kernels.cc).
Int8DotIsa level(const Int8DotIsa& avx2) {
  Int8DotIsa l = avx2;
  l.name = "amx-int8";
  l.tile = tile;
  l.nibbles = nibbles;
  l.bytes = bytes;
  l.interleave = interleave;
  l.begin = begin;
  l.end = end;
  l.int8_rows = true;
  return l;
}

}  // namespace dgemma::cpu::int8amx

DGEMMA_ISA_END()

#else  // not x86-64

namespace dgemma::cpu::int8amx {
Int8DotIsa level(const Int8DotIsa& avx2) { return avx2; }
}  // namespace dgemma::cpu::int8amx

#endif
