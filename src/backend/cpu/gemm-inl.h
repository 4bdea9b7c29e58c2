// GEMM micro-kernels and the blocked loop over one range of C (no include
// guard: included by each kernels_<isa>.cc after simd-inl.h, inside its target
// region). See isa_kernels.h for the formulation and the blocking constants.
//
// kMr (rows of an A micro-panel) is the register blocking: the mr × (kNg
// vectors) accumulator tile must fit the register file next to the B vectors
// and a broadcast, and give enough independent FMA chains to cover the FMA
// latency (4 cycles × 2 pipes = 8 chains at least). The micro-kernel sweeps
// the kNr-wide panel in column groups of kNg vectors, each over the whole kc:
//   AVX-512: 8 rows × 2 zmm (one group = the panel) = 16 accumulators
//            + 8 broadcasts + 1 B = 25 of 32.
//   AVX2:    6 rows × 2 ymm (two groups of 16 columns) = 12 accumulators
//            + 2 B + 1 broadcast + the bf16 mask = 16 of 16. Per k: 12 FMAs
//            on 6 broadcasts from memory and one 256-bit B load (bf16: one
//            shift and one AND to widen 16 columns, see kBF16Split), where
//            3 rows × 4 ymm needed 4 zero-extensions and 4 shifts, which
//            compete with the FMAs for the vector pipes.
// The A micro-panel (6 × kc fp32) is read once per group, the second time
// from L1.

#if defined(DGEMMA_SIMD_AVX512)
constexpr int kMr = 8;
constexpr int kNg = 2;
constexpr PanelType kBf16Panels = PanelType::kBF16;
#else
constexpr int kMr = 6;
constexpr int kNg = 2;
constexpr PanelType kBf16Panels = PanelType::kBF16Split;
#endif
constexpr int kGw = kNg * S::kLanes;  // columns per group

// Element of a kBF16Split panel (bf16 bits, bf16_split_slot column order).
struct Bf16Split {
  uint16_t bits;
};

// B vectors of one column group at row k of a panel: kNg vectors of columns
// [0, kGw) of the group, widened exactly to fp32.
static inline void load_b(const float* p, S::V* v) {
  for (int j = 0; j < kNg; ++j) v[j] = S::load(p + j * S::kLanes);
}
static inline void load_b(const uint16_t* p, S::V* v) {
  for (int j = 0; j < kNg; ++j) v[j] = S::load(p + j * S::kLanes);
}
#if defined(DGEMMA_SIMD_AVX2)
// One 256-bit load holds the group's 16 columns (bf16_split_slot order).
static inline void load_b(const Bf16Split* p, S::V* v) {
  static_assert(kGw == 16, "a kBF16Split group is 16 columns");
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  v[1] = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(int(0xFFFF0000u))));
}
#endif

// C group (rows × cols, cols ≤ NV·kLanes) = [C +] A(rows × kc, packed stride
// kMr) · B(kc × NV vectors, row stride kNr). B is read kNg vectors at a time.
template <int R, int NV, class BT>
static inline void micro_group(int64_t kc, const float* a, const BT* b, float* c, int64_t ldc, int cols, bool load_c) {
  S::V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NV; ++j) {
      const int c0 = j * S::kLanes;
      if (!load_c || c0 >= cols)
        acc[r][j] = S::zero();
      else if (c0 + S::kLanes <= cols)
        acc[r][j] = S::load(c + r * ldc + c0);
      else
        acc[r][j] = S::load_partial(c + r * ldc + c0, cols - c0);
    }
  for (int64_t k = 0; k < kc; ++k) {
    const float* ak = a + k * kMr;
#if defined(DGEMMA_SIMD_AVX512)
    S::V bv[kNg];
    if constexpr (NV == kNg)
      load_b(b + k * kNr, bv);
    else  // a narrow last group (micro below): its first NV vectors
      for (int j = 0; j < NV; ++j) bv[j] = S::load(b + k * kNr + j * S::kLanes);
    S::V av[R];  // all broadcasts live at once: 32 registers leave room
    for (int r = 0; r < R; ++r) av[r] = S::set1(ak[r]);
    for (int j = 0; j < NV; ++j)
      for (int r = 0; r < R; ++r) acc[r][j] = S::fmadd(av[r], bv[j], acc[r][j]);
#else
    for (int j0 = 0; j0 < NV; j0 += kNg) {
      S::V bv[kNg];
      load_b(b + k * kNr + j0 * S::kLanes, bv);
      for (int r = 0; r < R; ++r) {  // one broadcast at a time: 16 registers
        const S::V av = S::set1(ak[r]);
        for (int j = 0; j < kNg; ++j) acc[r][j0 + j] = S::fmadd(av, bv[j], acc[r][j0 + j]);
      }
    }
#endif
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NV; ++j) {
      const int c0 = j * S::kLanes;
      if (c0 + S::kLanes <= cols)
        S::store(c + r * ldc + c0, acc[r][j]);
      else if (c0 < cols)
        S::store_partial(c + r * ldc + c0, acc[r][j], cols - c0);
    }
}

// C tile (rows × cols, cols ≤ kNr) = [C +] A(rows × kc) · B(kc × kNr panel),
// group by group (groups wholly in the zero padding are skipped). AVX2 tiles
// of up to 2 rows take the whole panel as one group instead, for twice the
// independent FMA chains (R × 4 accumulators + R broadcasts, which the
// compiler keeps across the two halves, + 2 B + the mask fit 16 registers;
// 3 rows would not, and an accumulator spilled to the stack would put a
// store-to-load round trip into its FMA chain).
template <int R, class BT>
static inline void micro(int64_t kc, const float* a, const BT* b, float* c, int64_t ldc, int cols, bool load_c) {
  constexpr int kNv = kNr / S::kLanes;
  if constexpr (3 * R <= kMr && kNg < kNv) {
    micro_group<R, kNv>(kc, a, b, c, ldc, cols, load_c);
  } else {
#if defined(DGEMMA_SIMD_AVX512)
    // A panel of at most one vector's columns (the tail of N, or of a head
    // dim such as 72 = 2·32 + 8 in attention's P·V): one vector per row.
    if (cols <= S::kLanes) return micro_group<R, 1>(kc, a, b, c, ldc, cols, load_c);
#endif
    for (int g0 = 0; g0 < cols; g0 += kGw) micro_group<R, kNg>(kc, a, b + g0, c + g0, ldc, cols - g0, load_c);
  }
}

template <class BT>
static void micro_rows(int rows, int64_t kc, const float* a, const BT* b, float* c, int64_t ldc, int cols,
                       bool load_c) {
  switch (rows) {
    case 1: return micro<1>(kc, a, b, c, ldc, cols, load_c);
    case 2: return micro<2>(kc, a, b, c, ldc, cols, load_c);
    case 3: return micro<3>(kc, a, b, c, ldc, cols, load_c);
    case 4: return micro<4>(kc, a, b, c, ldc, cols, load_c);
    case 5: return micro<5>(kc, a, b, c, ldc, cols, load_c);
    case 6: return micro<6>(kc, a, b, c, ldc, cols, load_c);
#if defined(DGEMMA_SIMD_AVX512)
    case 7: return micro<7>(kc, a, b, c, ldc, cols, load_c);
    case 8: return micro<8>(kc, a, b, c, ldc, cols, load_c);
#endif
    default: return;
  }
}

static void pack_a_impl(const float* x, int64_t ldx, const int32_t* rows, int64_t m, int64_t k, float* out) {
  for (int64_t mb = 0; mb < m; mb += kMr) {
    const int64_t nr = s_min64(kMr, m - mb);
    float* o = out + mb * k;  // block (mb / kMr) starts at mb·k
    const float* src[kMr];
    for (int64_t r = 0; r < nr; ++r) src[r] = x + (rows ? int64_t(rows[mb + r]) : mb + r) * ldx;
    for (int64_t kk = 0; kk < k; ++kk) {
      float* ok = o + kk * kMr;
      int64_t r = 0;
      for (; r < nr; ++r) ok[r] = src[r][kk];
      for (; r < kMr; ++r) ok[r] = 0.0f;
    }
  }
}

// One k row of one panel: `cols` source values, zero-padded to kNr.
template <class BT>
static inline void pack_panel_row(const BT* s, int cols, BT* d) {
  int j = 0;
  for (; j < cols; ++j) d[j] = s[j];
  for (; j < kNr; ++j) d[j] = BT(0);
}
#if defined(DGEMMA_SIMD_AVX2)
// Into a kBF16Split panel: per 16-column group, columns j and 8 + j become
// the 16-bit pair of lane j (one unpack of the group's two 8-column halves).
static inline void pack_panel_row(const uint16_t* s, int cols, Bf16Split* d) {
  if (cols < kNr) {
    for (int j = 0; j < kNr; ++j) d[bf16_split_slot(j)].bits = j < cols ? s[j] : uint16_t(0);
    return;
  }
  for (int g = 0; g < kNr; g += 16) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + g));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + g + 8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + g), _mm_unpacklo_epi16(lo, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + g + 8), _mm_unpackhi_epi16(lo, hi));
  }
}
#endif

// Panels [p0, p1) of a row-major [K][ld] source, rows [kc, kc+kcl), each
// panel's columns [p·kNr, p·kNr + kNr) ∩ [0, n), zero-padded, into
// dst + (p - p0)·stride as [kcl][kNr]. Row by row across all the panels, so
// each source row is read as one contiguous run.
template <class BT, class SrcT>
static void pack_b_rows(const SrcT* src, int64_t ld, int64_t n, int64_t kc, int64_t kcl, int64_t p0, int64_t p1,
                        int64_t stride, BT* dst) {
  for (int64_t kk = 0; kk < kcl; ++kk) {
    const SrcT* s = src + (kc + kk) * ld;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c0 = p * kNr;
      pack_panel_row(s + c0, int(s_min64(kNr, n - c0)), dst + (p - p0) * stride + kk * kNr);
    }
  }
}

// Panels per L2 block for a range of rows: kNcPanels, or 1 (each panel's
// whole K in one sequential sweep) when the packed A rows fit in L2 anyway
// (expert GEMMs, M ≈ 16). Then B, which is used by only a few row blocks and
// streamed from memory, is read as one long run per panel (a stream the
// hardware prefetcher follows) instead of kKc-deep pieces 8 panels apart.
static inline int64_t panels_per_block(int64_t rows, int64_t k) {
  return rows * k * 4 <= (int64_t(512) << 10) ? 1 : kNcPanels;
}

// BT: the panel element type; SrcT: the element type of a row-major source.
template <class BT, class SrcT = BT>
static void gemm_range_t(const GemmArgs& g, const GemmRange& r, float* scratch) {
  const float* A = static_cast<const float*>(g.a);
  const int64_t K = g.k, N = g.n, nc = panels_per_block(r.m1 - r.m0, K);
  for (int64_t pb = r.p0; pb < r.p1; pb += nc) {
    const int64_t pe = s_min64(pb + nc, r.p1);
    for (int64_t kc = 0; kc < K; kc += kKc) {
      const int64_t kcl = s_min64(kKc, K - kc);
      const bool load_c = g.accumulate || kc > 0;
      const int64_t stride = kKc * kNr;  // per packed panel in scratch (BT units)
      if (g.b.rows)
        pack_b_rows(static_cast<const SrcT*>(g.b.rows), g.b.ld, N, kc, kcl, pb, pe, stride,
                    reinterpret_cast<BT*>(scratch));
      for (int64_t p = pb; p < pe; ++p) {
        const BT* bp;
        if (g.b.rows) {
          bp = reinterpret_cast<const BT*>(scratch) + (p - pb) * stride;
        } else {
          bp = static_cast<const BT*>(g.b.panels) + p * g.b.panel_stride + kc * kNr;
        }
        const int cols = int(s_min64(kNr, N - p * kNr));
        for (int64_t mb = r.m0; mb < r.m1; mb += kMr) {
          const int rows = int(s_min64(kMr, r.m1 - mb));
          micro_rows(rows, kcl, A + mb * K + kc * kMr, bp, g.c + mb * g.ldc + p * kNr, g.ldc, cols, load_c);
        }
      }
    }
  }
}

// A row-major bf16 source is packed into this level's bf16 panel type.
static void gemm_impl(const GemmArgs& g, const GemmRange& r, float* scratch) {
  if (g.b.type == PanelType::kF32) gemm_range_t<float>(g, r, scratch);
#if defined(DGEMMA_SIMD_AVX2)
  else if (g.b.type == PanelType::kBF16Split || (g.b.type == PanelType::kBF16 && g.b.rows))
    gemm_range_t<Bf16Split, uint16_t>(g, r, scratch);
#endif
  else if (g.b.type == PanelType::kBF16)
    gemm_range_t<uint16_t>(g, r, scratch);
}
