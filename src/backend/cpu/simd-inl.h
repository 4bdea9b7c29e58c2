// SIMD vocabulary shared by the per-ISA kernel files (no include guard: it is
// included once per ISA translation unit, inside that unit's target region and
// anonymous namespace; see isa_kernels.h). Define DGEMMA_SIMD_AVX512 or
// DGEMMA_SIMD_AVX2 before including. Only intrinsics and plain loops here: no
// standard-library templates, whose out-of-line copies would otherwise be
// compiled for this ISA and could be picked by the linker for baseline code.
//
// `S` is the vector type's traits: S::V (float lanes), S::kLanes, loads
// (fp32, bf16 widened exactly), stores (full and partial), arithmetic, and
// horizontal reductions. The math functions (exp, tanh) live in
// vecmath-inl.h.

#if defined(DGEMMA_SIMD_AVX512)

struct S {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // bf16 -> fp32 is exact: the 16 bits become the high half of the float.
  static V load(const uint16_t* p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }
  static V load_partial(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_partial(float* p, V v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  // max/min return the second operand when either is NaN (x86 semantics):
  // put the value that must propagate NaN second.
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  static V round_nearest(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for integral-valued n in [-126, 127].
  static V pow2(V n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  // a < b ? x : y (false for NaN operands).
  static V select_lt(V a, V b, V x, V y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x); }
  // a >= b ? x : y (false for NaN operands).
  static V select_ge(V a, V b, V x, V y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GE_OQ), y, x); }
  // Copies the sign of s onto the magnitude m.
  static V copysign(V m, V s) {
    const __m512i sign = _mm512_set1_epi32(int(0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(m)),
                                               _mm512_and_si512(sign, _mm512_castps_si512(s))));
  }
  static float reduce_add(V v) { return _mm512_reduce_add_ps(v); }
};

#elif defined(DGEMMA_SIMD_AVX2)

struct S {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const uint16_t* p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load_partial(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_partial(float* p, V v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static V round_nearest(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V pow2(V n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static V select_lt(V a, V b, V x, V y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
  static V select_ge(V a, V b, V x, V y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_GE_OQ)); }
  static V copysign(V m, V s) {
    const V sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, m), _mm256_and_ps(sign, s));
  }
  static float reduce_add(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#else
#error "define DGEMMA_SIMD_AVX512 or DGEMMA_SIMD_AVX2 before including simd-inl.h"
#endif

// ---- vector math ------------------------------------------------------------

// e^x, relative error ~2 ulp on [-87.3, 88]. Results for x < -87.34 (where
// e^x would be a denormal) are flushed to +0, so exp(-inf) = 0 exactly, as
// the softmax of a masked score needs; x > 88 saturates at e^88 (only
// non-positive arguments occur in our softmaxes). NaN propagates.
static inline S::V v_exp(S::V x) {
  const S::V lo = S::set1(-87.33654f), hi = S::set1(88.0f);
  // Cephes' expf: n = round(x·log2 e), r = x − n·ln2 (two-part ln2), degree-5
  // polynomial for e^r on [−ln2/2, ln2/2].
  S::V xc = S::min(hi, S::max(lo, x));  // NaN-preserving clamp (x second)
  S::V n = S::round_nearest(S::mul(xc, S::set1(1.44269504088896341f)));
  S::V r = S::fnmadd(n, S::set1(0.693359375f), xc);
  r = S::fnmadd(n, S::set1(-2.12194440e-4f), r);
  S::V p = S::set1(1.9875691500e-4f);
  p = S::fmadd(p, r, S::set1(1.3981999507e-3f));
  p = S::fmadd(p, r, S::set1(8.3334519073e-3f));
  p = S::fmadd(p, r, S::set1(4.1665795894e-2f));
  p = S::fmadd(p, r, S::set1(1.6666665459e-1f));
  p = S::fmadd(p, r, S::set1(5.0000001201e-1f));
  S::V y = S::fmadd(S::mul(p, r), r, S::add(r, S::set1(1.0f)));
  y = S::mul(y, S::pow2(n));
  return S::select_lt(x, lo, S::zero(), y);
}

// tanh(x): odd rational minimax approximation (the coefficients Eigen's
// generic_fast_tanh_float uses), a few ulp on |x| < 7.9; ±1 exactly beyond, so
// large inputs saturate like std::tanh (gelu_tanh(-40) = 0, not a tiny
// residue times 40) and ±inf give ±1. NaN propagates.
static inline S::V v_tanh(S::V x) {
  const S::V c = S::set1(7.90531110763549805f);
  S::V xc = S::min(c, S::max(S::set1(-7.90531110763549805f), x));
  S::V x2 = S::mul(xc, xc);
  S::V p = S::set1(-2.76076847742355e-16f);
  p = S::fmadd(p, x2, S::set1(2.00018790482477e-13f));
  p = S::fmadd(p, x2, S::set1(-8.60467152213735e-11f));
  p = S::fmadd(p, x2, S::set1(5.12229709037114e-08f));
  p = S::fmadd(p, x2, S::set1(1.48572235717979e-05f));
  p = S::fmadd(p, x2, S::set1(6.37261928875436e-04f));
  p = S::fmadd(p, x2, S::set1(4.89352455891786e-03f));
  p = S::mul(p, xc);
  S::V q = S::set1(1.19825839466702e-06f);
  q = S::fmadd(q, x2, S::set1(1.18534705686654e-04f));
  q = S::fmadd(q, x2, S::set1(2.26843463243900e-03f));
  q = S::fmadd(q, x2, S::set1(4.89352518554385e-03f));
  S::V t = S::div(p, q);
  const S::V ax = S::abs(x);
  t = S::select_lt(ax, S::set1(0.0004f), x, t);  // tanh(x) = x to fp32 precision
  return S::select_ge(ax, c, S::copysign(S::set1(1.0f), x), t);
}

// gelu_pytorch_tanh (docs/model.md §1.5): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
static inline S::V v_gelu_tanh(S::V x) {
  const S::V x3 = S::mul(S::mul(x, x), x);
  const S::V u = S::mul(S::set1(0.7978845608028654f), S::fmadd(S::set1(0.044715f), x3, x));
  return S::mul(S::mul(S::set1(0.5f), x), S::add(S::set1(1.0f), v_tanh(u)));
}

static inline float s_max(float a, float b) { return a < b ? b : a; }
static inline int64_t s_min64(int64_t a, int64_t b) { return a < b ? a : b; }
