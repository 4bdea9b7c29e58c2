// The 256-bit byte tile (int8_dot_bytes_avx2.cc) over a product policy
// Dot (Dot::dot(c, u8, s8): c + Σ of four u8 × s8 products per int32 lane).
// Included inside a target region of AVX2 (no include guard, no namespace of
// its own): once per dot instruction, each in a namespace of its own, so
// each copy is compiled for its region's target.

// Two activation rows against the tile (16 weight rows: two vectors per
// quad), activation block by block and sub-block by sub-block; the epilogue
// in the order of int8_dot_kernels.cc's tile rows.
template <class Dot, int R, int SUB>
inline void rows(const uint8_t* qa, const float* da, const float* dsa, int64_t kc, const uint8_t* v,
                 const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  constexpr int P = kBytePanelRows, per = kI8Block / SUB;
  __m256 fa[R][2];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) fa[r][h] = _mm256_loadu_ps(acc + r * kI8TileRows + 8 * h);
  for (int64_t blk = 0; blk < kc / kI8Block; ++blk, qa += kI8Block * P, da += P, dsa += P) {
    for (int hs = 0; hs < per; ++hs) {
      const int64_t s = blk * per + hs;
      // The sums start at −128·ΣV, so they end at Σ (q + 128)·V − 128·ΣV.
      __m256i start[2];
      for (int h = 0; h < 2; ++h)
        start[h] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(load(wsum + s * kI8TileRows + 8 * h), 7));
      __m256i c[R][2];
      for (int r = 0; r < R; ++r) c[r][0] = start[0], c[r][1] = start[1];
      const uint8_t* vs = v + s * SUB * kI8TileRows;
      const uint8_t* qs = qa + hs * SUB * P;
#pragma GCC unroll 8
      for (int p = 0; p < SUB / 4; ++p) {
        const __m256i w0 = load(vs + p * 64), w1 = load(vs + p * 64 + 32);
        for (int r = 0; r < R; ++r) {
          int32_t quad;
          std::memcpy(&quad, qs + (p * P + r) * 4, 4);
          const __m256i a = _mm256_set1_epi32(quad);
          c[r][0] = Dot::dot(c[r][0], a, w0);
          c[r][1] = Dot::dot(c[r][1], a, w1);
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256 wsv = _mm256_loadu_ps(ws + s * kI8TileRows + 8 * h);
        for (int r = 0; r < R; ++r) {
          const __m256 sv = _mm256_mul_ps(wsv, _mm256_set1_ps(da[r]));
          fa[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c[r][h]), sv, fa[r][h]);
        }
      }
    }
    if (wb)
      for (int h = 0; h < 2; ++h) {
        const __m256 wbv = _mm256_loadu_ps(wb + blk * kI8TileRows + 8 * h);
        for (int r = 0; r < R; ++r) fa[r][h] = _mm256_fmadd_ps(wbv, _mm256_set1_ps(dsa[r]), fa[r][h]);
      }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(acc + r * kI8TileRows + 8 * h, fa[r][h]);
}

// Two rows at a time: 4 integer and 4 fp32 accumulators, two weight vectors
// and a broadcast fit the 16 registers.
template <class Dot, int SUB>
void tile_sub(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, const uint8_t* v,
              const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  constexpr int64_t P = kBytePanelRows;
  for (int64_t m = m0; m < m1; m += P) {
    const int64_t p = a.panel_of_row[m], n = std::min(P, m1 - m);
    const uint8_t* qa = a.u8 + (p * a.kp + k0) * P;
    const float* da = a.d8 + (p * a.nb + k0 / kI8Block) * P;
    const float* dsa = a.ds8 + (p * a.nb + k0 / kI8Block) * P;
    float* out = acc + (m - m0) * kI8TileRows;
    int64_t r = 0;
    for (; r + 2 <= n; r += 2)
      rows<Dot, 2, SUB>(qa + r * 4, da + r, dsa + r, kc, v, wsum, ws, wb, out + r * kI8TileRows);
    if (r < n) rows<Dot, 1, SUB>(qa + r * 4, da + r, dsa + r, kc, v, wsum, ws, wb, out + r * kI8TileRows);
  }
}

template <class Dot>
void tile_dot(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
              const int32_t* wsum, const float* ws, const float* wb, float* acc) {
  if (sub == 16) return tile_sub<Dot, 16>(a, m0, m1, k0, kc, v, wsum, ws, wb, acc);
  tile_sub<Dot, 32>(a, m0, m1, k0, kc, v, wsum, ws, wb, acc);
}
