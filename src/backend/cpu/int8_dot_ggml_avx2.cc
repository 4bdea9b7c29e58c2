// Int8DotIsa::ggml_levels on AVX2 (int8_dot.h, int8_dot_ggml.h): the levels
// of the types of the published files (Q4_K, Q5_0, Q6_K, Q8_0) with vector
// masks and shifts, 32 levels per step; the other types by the scalar
// decoder. The same bytes as the scalar decoder (docs/formats.md §5.2).
#include "backend/cpu/int8_dot.h"
#include "backend/cpu/int8_dot_ggml.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/isa_target.h"

DGEMMA_ISA_BEGIN("avx2,fma")

namespace dgemma::cpu::int8avx2 {
namespace {

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store32(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

}  // namespace

void ggml_levels(GgmlType t, const uint8_t* b, int64_t n, uint8_t* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  switch (t) {
    case GgmlType::kQ4_K:  // per 64 columns: 32 low nibbles, then 32 high ones
      for (int64_t k = 0; k < n; k += 256, b += 144)
        for (int c = 0; c < 4; ++c) {
          const __m256i x = load32(b + 16 + 32 * c);
          store32(out + k + 64 * c, _mm256_and_si256(x, low4));
          store32(out + k + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(x, 4), low4));
        }
      return;
    case GgmlType::kQ8_0:
      for (int64_t k = 0; k < n; k += 32, b += 34) store32(out + k, load32(b + 2));
      return;
    case GgmlType::kQ5_0: {
      // Bit j of the u32 qh into byte j: bytes j/8 of qh broadcast, the
      // bit of each byte selected, compared.
      const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                              3, 3, 3, 3, 3, 3, 3);
      const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL), fifth = _mm256_set1_epi8(0x10);
      for (int64_t k = 0; k < n; k += 32, b += 22) {
        uint32_t h;
        __builtin_memcpy(&h, b + 2, 4);
        const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 6));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), low4);
        const __m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int(h)), spread), bit);
        const __m256i q = _mm256_or_si256(nib, _mm256_and_si256(_mm256_cmpeq_epi8(hb, bit), fifth));
        store32(out + k, _mm256_sub_epi8(q, fifth));
      }
      return;
    }
    case GgmlType::kQ6_K: {
      const __m256i two = _mm256_set1_epi8(0x30), bias = _mm256_set1_epi8(32);
      for (int64_t k = 0; k < n; k += 256, b += 210)
        for (int h = 0; h < 2; ++h) {
          const __m256i ql0 = load32(b + 64 * h), ql1 = load32(b + 64 * h + 32), qh = load32(b + 128 + 32 * h);
          uint8_t* o = out + k + 128 * h;
          const __m256i q0 =
              _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), two));
          const __m256i q1 =
              _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), two));
          const __m256i q2 =
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, two));
          const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), two));
          store32(o, _mm256_sub_epi8(q0, bias));
          store32(o + 32, _mm256_sub_epi8(q1, bias));
          store32(o + 64, _mm256_sub_epi8(q2, bias));
          store32(o + 96, _mm256_sub_epi8(q3, bias));
        }
      return;
    }
    default: return ::dgemma::cpu::ggml_levels(t, b, n, out);
  }
}

}  // namespace dgemma::cpu::int8avx2

DGEMMA_ISA_END()

#else  // not x86-64

namespace dgemma::cpu::int8avx2 {
void ggml_levels(GgmlType t, const uint8_t* b, int64_t n, uint8_t* out) { ::dgemma::cpu::ggml_levels(t, b, n, out); }
}  // namespace dgemma::cpu::int8avx2

#endif
