// Byte products on AVX512-VNNI for weights whose levels are bytes (the ggml
// types; int8_dot.h Int8DotIsa::byte_tile): vpdpbusd multiplies 64 unsigned
// bytes by 64 signed bytes into 16 int32 sums of four products, twice the
// products per instruction of the int16 pairs (vpdpwssd). The unsigned
// operand is the activation, shifted to q + 128 (0..254, Int8Activations::u8);
// the signed one the weight level V (every ggml level fits int8: −128..127).
// Per sub-block and weight row the sum is then Σ (q + 128)·V − 128·ΣV = Σ q·V,
// the same exact integer as every other level computes (|Σ| < 2^31), and the
// fp32 epilogue is the portable level's, in the same order: the same bits.
//
// Layouts: the decoded tile as quads of columns by row, v[(kq·16 + j)·4 + t]
// = V[j, 4kq + t] (one 64-byte vector per 4 columns of the 16 rows), and the
// row sums of each sub-block wsum[s·16 + j] = Σ V[j, s·sub ...]; the
// activations in the byte panels of Int8Activations::u8.
#include "backend/cpu/int8_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/isa_target.h"

DGEMMA_ISA_BEGIN("avx512f,avx512bw,avx512vnni")

namespace dgemma::cpu::int8bytes {
namespace {

#include "backend/cpu/transpose16-inl.h"

// c + Σ of four u8 × s8 products per int32 lane, in place (see dpwssd512 in
// int8_dot_kernels.cc for why inline assembly).
inline __m512i dpbusd(__m512i c, __m512i u8, __m512i s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(u8), "v"(s8));
  return c;
}

// R ≤ kBytePanelRows activation rows (one panel, Int8Activations::u8)
// against the tile, activation block by block and within a block sub-block
// by sub-block; the epilogue as in int8_dot_kernels.cc's tile rows, in the
// same order (accumulators in registers). Every row's quad and scale is a
// broadcast at a fixed offset from the panel's pointers.
template <int R, int SUB>
inline void rows(const uint8_t* qa, const float* da, const float* dsa, int64_t kc, const uint8_t* v,
                 const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  constexpr int P = kBytePanelRows, per = kI8Block / SUB;
  __m512 fa[R];
  for (int r = 0; r < R; ++r) fa[r] = _mm512_loadu_ps(acc + r * kI8TileRows);
  for (int64_t blk = 0; blk < kc / kI8Block; ++blk, qa += kI8Block * P, da += P, dsa += P) {
    for (int h = 0; h < per; ++h) {
      const int64_t s = blk * per + h;
      // The sums start at −128·ΣV, so they end at Σ (q + 128)·V − 128·ΣV.
      const __m512i start =
          _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_loadu_si512(wsum + s * kI8TileRows), 7));
      __m512i c[R];
      for (int r = 0; r < R; ++r) c[r] = start;
      const uint8_t* vs = v + s * SUB * kI8TileRows;
      const uint8_t* qs = qa + h * SUB * P;
#pragma GCC unroll 8
      for (int p = 0; p < SUB / 4; ++p) {
        const __m512i w = _mm512_loadu_si512(vs + p * 64);
        for (int r = 0; r < R; ++r) {
          int32_t quad;
          std::memcpy(&quad, qs + (p * P + r) * 4, 4);
          c[r] = dpbusd(c[r], _mm512_set1_epi32(quad), w);
        }
      }
      const __m512 wsv = _mm512_loadu_ps(ws + s * kI8TileRows);
      for (int r = 0; r < R; ++r) {
        const __m512 sv = _mm512_mul_ps(wsv, _mm512_set1_ps(da[r]));
        fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c[r]), sv, fa[r]);
      }
    }
    if (wb) {
      const __m512 wbv = _mm512_loadu_ps(wb + blk * kI8TileRows);
      for (int r = 0; r < R; ++r) fa[r] = _mm512_fmadd_ps(wbv, _mm512_set1_ps(dsa[r]), fa[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(acc + r * kI8TileRows, fa[r]);
}

template <int SUB, int R = kBytePanelRows>
void rows_n(int n, const uint8_t* qa, const float* da, const float* dsa, int64_t kc, const uint8_t* v,
            const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  if constexpr (R > 0) {
    if (n == R) return rows<R, SUB>(qa, da, dsa, kc, v, wsum, ws, wb, acc);
    rows_n<SUB, R - 1>(n, qa, da, dsa, kc, v, wsum, ws, wb, acc);
  }
}

template <int SUB>
void tile_sub(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, const uint8_t* v,
              const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  constexpr int64_t P = kBytePanelRows;
  for (int64_t m = m0; m < m1; m += P) {
    const int64_t p = a.panel_of_row[m];
    const uint8_t* qa = a.u8 + (p * a.kp + k0) * P;
    const float* da = a.d8 + (p * a.nb + k0 / kI8Block) * P;
    const float* dsa = a.ds8 + (p * a.nb + k0 / kI8Block) * P;
    rows_n<SUB>(int(std::min(P, m1 - m)), qa, da, dsa, kc, v, wsum, ws, wb, acc + (m - m0) * kI8TileRows);
  }
}

}  // namespace

void quads(const int8_t* rows, int64_t ld, int64_t kc, int sub, uint8_t* v, int32_t* wsum) {
  for (int64_t c0 = 0; c0 < kc; c0 += 64) {
    const int64_t n = kc - c0 >= 64 ? 16 : (kc - c0) / 4;  // quads in this group of 64 columns (16 or 8)
    const __mmask16 mask = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
    __m512i r[16];
    for (int j = 0; j < 16; ++j) r[j] = _mm512_maskz_loadu_epi32(mask, rows + j * ld + c0);
    transpose16(r);
    for (int64_t q = 0; q < n; ++q) _mm512_storeu_si512(v + (c0 / 4 + q) * 64, r[q]);
  }
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t s = 0; s < kc / sub; ++s) {
    __m512i t = _mm512_setzero_si512();
    for (int p = 0; p < sub / 4; ++p) t = dpbusd(t, ones, _mm512_loadu_si512(v + (s * sub / 4 + p) * 64));
    _mm512_storeu_si512(wsum + s * kI8TileRows, t);
  }
}

void tile(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
          const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  if (sub == 16) return tile_sub<16>(a, m0, m1, k0, kc, v, wsum, ws, wb, acc);
  tile_sub<32>(a, m0, m1, k0, kc, v, wsum, ws, wb, acc);
}

}  // namespace dgemma::cpu::int8bytes

DGEMMA_ISA_END()

#endif  // __x86_64__
