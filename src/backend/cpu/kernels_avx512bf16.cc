// AVX512_BF16 level: everything of the AVX-512 level plus the bf16 dot-product
// GEMM (vdpbf16ps) for kBF16Pairs panels. vdpbf16ps multiplies bf16 pairs and
// accumulates in fp32, so the A operand (activations) is rounded to bf16 (RNE)
// when it is packed: this path rounds activations and is only used where that
// is intended (CpuBackendOptions::bf16_dot for bf16 weights, or where the
// reference itself rounds A to bf16: soft_embedding over a bf16 table, docs/model.md
// §3.3). The instruction treats denormal inputs and outputs as zero.
#include "backend/cpu/isa_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/isa_target.h"

DGEMMA_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")

namespace dgemma::cpu::avx512bf16 {
namespace {

// Same register blocking as the AVX-512 fp32 kernel (8 rows × 2 zmm = 16
// accumulators); vdpbf16ps has a longer latency (~6 cycles) than an FMA, and
// 16 independent chains still cover it at 2 per cycle.
constexpr int kMr = 8;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// C tile (rows × cols) = [C +] A(rows × 2·k2, bf16 pairs) · B(2·k2 × kNr, pair panel).
template <int R>
inline void micro_pairs(int64_t k2, const uint32_t* a, const uint16_t* b, float* c, int64_t ldc, int cols,
                        bool load_c) {
  __m512 acc[R][2];
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1u);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xffff) : cols <= 16 ? __mmask16(0) : __mmask16((1u << (cols - 16)) - 1u);
  for (int r = 0; r < R; ++r) {
    acc[r][0] = load_c ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = load_c ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t kk = 0; kk < k2; ++kk) {
    const __m512i b0 = _mm512_loadu_si512(b + kk * 2 * kNr);
    const __m512i b1 = _mm512_loadu_si512(b + kk * 2 * kNr + kNr);
    const uint32_t* ak = a + kk * kMr;
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_set1_epi32(int(ak[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)av, (__m512bh)b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)av, (__m512bh)b1);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
  }
}

void micro_pairs_rows(int rows, int64_t k2, const uint32_t* a, const uint16_t* b, float* c, int64_t ldc, int cols,
                      bool load_c) {
  switch (rows) {
    case 1: return micro_pairs<1>(k2, a, b, c, ldc, cols, load_c);
    case 2: return micro_pairs<2>(k2, a, b, c, ldc, cols, load_c);
    case 3: return micro_pairs<3>(k2, a, b, c, ldc, cols, load_c);
    case 4: return micro_pairs<4>(k2, a, b, c, ldc, cols, load_c);
    case 5: return micro_pairs<5>(k2, a, b, c, ldc, cols, load_c);
    case 6: return micro_pairs<6>(k2, a, b, c, ldc, cols, load_c);
    case 7: return micro_pairs<7>(k2, a, b, c, ldc, cols, load_c);
    case 8: return micro_pairs<8>(k2, a, b, c, ldc, cols, load_c);
    default: return;
  }
}

// Rows of x → [ceil(m/kMr)][ceil(k/2)][kMr] pairs (k even in the low half),
// rounded to bf16 with vcvtne2ps2bf16 (round to nearest even).
void pack_a_pairs_impl(const float* x, int64_t ldx, const int32_t* rows, int64_t m, int64_t k, uint32_t* out) {
  const int64_t k2 = (k + 1) / 2;
  for (int64_t mb = 0; mb < m; mb += kMr) {
    const int64_t nr = min64(kMr, m - mb);
    uint32_t* o = out + mb * k2;
    for (int64_t r = 0; r < kMr; ++r) {
      if (r >= nr) {
        for (int64_t j = 0; j < k2; ++j) o[j * kMr + r] = 0u;
        continue;
      }
      const float* src = x + (rows ? int64_t(rows[mb + r]) : mb + r) * ldx;
      int64_t kk = 0;
      alignas(64) uint32_t words[16];
      for (; kk + 32 <= k; kk += 32) {
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + kk + 16), _mm512_loadu_ps(src + kk));
        _mm512_store_si512(words, (__m512i)v);
        for (int j = 0; j < 16; ++j) o[(kk / 2 + j) * kMr + r] = words[j];
      }
      if (kk < k) {
        const int rem = int(k - kk);
        const __m512 lo = _mm512_maskz_loadu_ps(rem >= 16 ? __mmask16(0xffff) : __mmask16((1u << rem) - 1u), src + kk);
        const __m512 hi =
            rem > 16 ? _mm512_maskz_loadu_ps(__mmask16((1u << (rem - 16)) - 1u), src + kk + 16) : _mm512_setzero_ps();
        const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
        _mm512_store_si512(words, (__m512i)v);
        for (int j = 0; j < (rem + 1) / 2; ++j) o[(kk / 2 + j) * kMr + r] = words[j];
      }
    }
  }
}

// Rows [kc, kc+kcl) (kc even) × panels [p0, p1) of a row-major bf16 [K][ld]
// source, each panel into the pair layout [ceil(kcl/2)][kNr][2] (zero-padded)
// at dst + (p - p0)·stride. Row by row across all the panels, so each source
// row is read as one contiguous run (whole cache lines, one page) rather than
// 64 bytes per panel; full panels interleave their two rows with one
// vpermt2w per 32 pairs.
void pack_b_rows_pairs(const uint16_t* src, int64_t ld, int64_t n, int64_t K, int64_t kc, int64_t kcl, int64_t p0,
                       int64_t p1, int64_t stride, uint16_t* dst) {
  // lo takes pairs 0..15 (a[j], b[j]), hi pairs 16..31; bit 5 selects b.
  alignas(64) uint16_t lo_idx[32], hi_idx[32];
  for (int j = 0; j < 16; ++j) {
    lo_idx[2 * j] = uint16_t(j), lo_idx[2 * j + 1] = uint16_t(32 + j);
    hi_idx[2 * j] = uint16_t(16 + j), hi_idx[2 * j + 1] = uint16_t(48 + j);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int64_t kk = 0; kk < kcl; kk += 2) {
    const uint16_t* s0 = src + (kc + kk) * ld;
    const uint16_t* s1 = kc + kk + 1 < K ? s0 + ld : nullptr;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c0 = p * kNr, cols = min64(kNr, n - c0);
      uint16_t* d = dst + (p - p0) * stride + kk * kNr;
      if (cols == kNr && s1 != nullptr) {
        const __m512i a = _mm512_loadu_si512(s0 + c0), b = _mm512_loadu_si512(s1 + c0);
        _mm512_storeu_si512(d, _mm512_permutex2var_epi16(a, lo, b));
        _mm512_storeu_si512(d + 32, _mm512_permutex2var_epi16(a, hi, b));
        continue;
      }
      int64_t j = 0;
      for (; j < cols; ++j) {
        d[2 * j] = s0[c0 + j];
        d[2 * j + 1] = s1 ? s1[c0 + j] : uint16_t(0);
      }
      for (; j < kNr; ++j) d[2 * j] = d[2 * j + 1] = 0;
    }
  }
}

const IsaKernels* base() { return avx512::table(); }

void gemm_impl(const GemmArgs& g, const GemmRange& r, float* scratch) {
  if (g.b.type != PanelType::kBF16Pairs) return base()->gemm(g, r, scratch);
  const uint32_t* A = static_cast<const uint32_t*>(g.a);
  const int64_t K = g.k, N = g.n, K2 = (K + 1) / 2;
  // As gemm-inl.h panels_per_block (A rows here are 2 bytes per k).
  const int64_t nc = (r.m1 - r.m0) * K * 2 <= (int64_t(512) << 10) ? 1 : kNcPanels;
  for (int64_t pb = r.p0; pb < r.p1; pb += nc) {
    const int64_t pe = min64(pb + nc, r.p1);
    for (int64_t kc = 0; kc < K; kc += kKc) {  // kKc is even: blocks start on a pair
      const int64_t kcl = min64(kKc, K - kc), k2 = (kcl + 1) / 2;
      const bool load_c = g.accumulate || kc > 0;
      const int64_t stride = kKc * kNr;  // per packed panel in scratch (uint16 units)
      if (g.b.rows)
        pack_b_rows_pairs(static_cast<const uint16_t*>(g.b.rows), g.b.ld, N, K, kc, kcl, pb, pe, stride,
                          reinterpret_cast<uint16_t*>(scratch));
      for (int64_t p = pb; p < pe; ++p) {
        const uint16_t* bp;
        if (g.b.rows) {
          bp = reinterpret_cast<const uint16_t*>(scratch) + (p - pb) * stride;
        } else {
          bp = static_cast<const uint16_t*>(g.b.panels) + p * g.b.panel_stride + kc * kNr;
        }
        const int cols = int(min64(kNr, N - p * kNr));
        for (int64_t mb = r.m0; mb < r.m1; mb += kMr) {
          const int rows = int(min64(kMr, r.m1 - mb));
          micro_pairs_rows(rows, k2, A + mb * K2 + (kc / 2) * kMr, bp, g.c + mb * g.ldc + p * kNr, g.ldc, cols, load_c);
        }
      }
    }
  }
}

// 16 independent vdpbf16ps chains (latency ~6 × 2 per cycle = 12 needed).
double peak_dot_impl(int64_t iters, float seed) {
  constexpr int kChains = 16;
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed * float(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(seed), _mm512_set1_ps(seed));
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return double(iters) * kChains * 16 * 4.0;
}

}  // namespace

const IsaKernels* table() {
  static const IsaKernels t = [] {
    IsaKernels k = *base();
    k.isa = CpuIsa::kAvx512Bf16;
    k.pack_a_pairs = pack_a_pairs_impl;
    k.pack_b_pairs = pack_b_rows_pairs;
    k.gemm = gemm_impl;
    k.peak_dot = peak_dot_impl;
    return k;
  }();
  return &t;
}

}  // namespace dgemma::cpu::avx512bf16

DGEMMA_ISA_END()

#endif  // __x86_64__ (cpu_levels.cc calls the level only there)
