// Int8DotIsa::nibble_pairs on AVX-512 BW (int8_dot.h): 4-bit codes of a
// 16-row weight tile decoded straight into the int16 pair layout of the
// tile products, v32[p·16 + j] = V[j, 2p] | V[j, 2p + 1] << 16. A 4-bit
// format stores pair p of a row in its byte p, so the layout is a byte
// transpose of the 16 rows followed by the table lookups:
//   1. 64 code bytes of each row (64 pairs) as 16 dwords, transposed
//      16 × 16: dword j of r[q] holds pairs 4q..4q+3 of row j;
//   2. within each 128-bit lane (rows 4L..4L+3) the bytes reordered pair
//      first (position 4i + r ← byte 4r + i), so that
//   3. the nibbles' table bytes (pshufb on the low and the high byte tables)
//      unpacked to words and then to dwords land as pair 4q + i of rows
//      0..15 in output vector i.
// Per 128 weights about 25 instructions, against about 80 through the row
// buffer (nibbles() per row, then interleave()); the tile products are
// unchanged, so the results are the same bits.
#include "backend/cpu/int8_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/isa_target.h"

DGEMMA_ISA_BEGIN("avx512f,avx512bw")

namespace dgemma::cpu::int8avx512 {
namespace {

#include "backend/cpu/transpose16-inl.h"

}  // namespace

void nibble_pairs(const uint8_t* const* rows, int nr, int64_t kc, bool high_first, const NibbleTable& table,
                  int16_t* v) {
  const __m512i tlo = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(table.lo)));
  const __m512i thi = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(table.hi)));
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i pair_first =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __mmask16 live = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1u);
  int32_t* out = reinterpret_cast<int32_t*>(v);
  const int64_t pairs = kc / 2;  // a multiple of 16
  for (int64_t c0 = 0; c0 < pairs; c0 += 64) {
    const int64_t n = pairs - c0 < 64 ? pairs - c0 : 64;
    const __mmask16 dwords = n == 64 ? __mmask16(0xFFFF) : __mmask16((1u << (n / 4)) - 1u);
    __m512i r[16];
    for (int j = 0; j < 16; ++j)
      r[j] = j < nr ? _mm512_maskz_loadu_epi32(dwords, rows[j] + c0) : _mm512_setzero_si512();
    transpose16(r);
    for (int64_t q = 0; q < n / 4; ++q) {
      const __m512i b = _mm512_shuffle_epi8(r[q], pair_first);
      const __m512i lo = _mm512_and_si512(b, low4), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
      const __m512i f = high_first ? hi : lo, s = high_first ? lo : hi;
      const __m512i fl = _mm512_shuffle_epi8(tlo, f), fh = _mm512_shuffle_epi8(thi, f);
      const __m512i sl = _mm512_shuffle_epi8(tlo, s), sh = _mm512_shuffle_epi8(thi, s);
      const __m512i f0 = _mm512_unpacklo_epi8(fl, fh), f1 = _mm512_unpackhi_epi8(fl, fh);  // words, positions 0-7, 8-15
      const __m512i s0 = _mm512_unpacklo_epi8(sl, sh), s1 = _mm512_unpackhi_epi8(sl, sh);
      const __m512i y[4] = {_mm512_unpacklo_epi16(f0, s0), _mm512_unpackhi_epi16(f0, s0), _mm512_unpacklo_epi16(f1, s1),
                            _mm512_unpackhi_epi16(f1, s1)};
      for (int i = 0; i < 4; ++i) _mm512_storeu_si512(out + (c0 + 4 * q + i) * 16, _mm512_maskz_mov_epi32(live, y[i]));
    }
  }
}

}  // namespace dgemma::cpu::int8avx512

DGEMMA_ISA_END()

#endif  // __x86_64__
