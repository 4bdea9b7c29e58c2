// Included inside a function-level target region of AVX-512F (no include
// guard, no namespace of its own: each including file puts it in its
// anonymous namespace, compiled for that file's target).
// 16 × 16 transpose of 32-bit elements: r[j] element i → r[i] element j.
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Now r[4a + b] holds, per 128-bit lane L, element 4L + b' of rows 4a..4a+3
  // (b' = the unpack order 0, 1, 2, 3 for b = 0, 1, 2, 3). Exchange the lanes.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[4 + i], 0x88);      // lanes 0, 2 of r[i]; 0, 2 of r[4+i]
    t[4 + i] = _mm512_shuffle_i32x4(r[i], r[4 + i], 0xDD);  // lanes 1, 3
    t[8 + i] = _mm512_shuffle_i32x4(r[8 + i], r[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_i32x4(r[8 + i], r[12 + i], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0x88);  // element 4·0 + i and 4·2 + i
    r[8 + i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0xDD);
    r[4 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0x88);
    r[12 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0xDD);
  }
}
