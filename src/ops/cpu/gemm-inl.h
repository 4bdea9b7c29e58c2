// GEMM micro-kernels and the blocked loop over one range of C (no include
// guard: included by each kernels_<isa>.cc after simd-inl.h, inside its target
// region). See isa_kernels.h for the formulation and the blocking constants.
//
// kMr (rows of an A micro-panel) is the register blocking: the mr × kNr
// accumulator tile must fit the register file next to the mr broadcasts and
// one B vector, and give enough independent FMA chains to cover the FMA
// latency (4 cycles × 2 pipes = 8 chains at least):
//   AVX-512: 8 rows × 2 zmm = 16 accumulators + 8 broadcasts + 1 B = 25 of 32.
//   AVX2:    3 rows × 4 ymm = 12 accumulators + 3 broadcasts + 1 B = 16 of 16.

#if defined(DGEMMA_SIMD_AVX512)
constexpr int kMr = 8;
#else
constexpr int kMr = 3;
#endif
constexpr int kNv = kNr / S::kLanes;  // vectors per tile row

// C tile (rows × cols, cols ≤ kNr) = [C +] A(rows × kc, packed stride kMr) · B(kc × kNr panel).
template <int R, class BT>
static inline void micro(int64_t kc, const float* a, const BT* b, float* c, int64_t ldc, int cols, bool load_c) {
  S::V acc[R][kNv];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < kNv; ++j) {
      const int c0 = j * S::kLanes;
      if (!load_c || c0 >= cols) acc[r][j] = S::zero();
      else if (c0 + S::kLanes <= cols) acc[r][j] = S::load(c + r * ldc + c0);
      else acc[r][j] = S::load_partial(c + r * ldc + c0, cols - c0);
    }
  for (int64_t k = 0; k < kc; ++k) {
    const float* ak = a + k * kMr;
    const BT* bk = b + k * kNr;
    S::V av[R];
    for (int r = 0; r < R; ++r) av[r] = S::set1(ak[r]);
    for (int j = 0; j < kNv; ++j) {
      const S::V bv = S::load(bk + j * S::kLanes);
      for (int r = 0; r < R; ++r) acc[r][j] = S::fmadd(av[r], bv, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < kNv; ++j) {
      const int c0 = j * S::kLanes;
      if (c0 + S::kLanes <= cols) S::store(c + r * ldc + c0, acc[r][j]);
      else if (c0 < cols) S::store_partial(c + r * ldc + c0, acc[r][j], cols - c0);
    }
}

template <class BT>
static void micro_rows(int rows, int64_t kc, const float* a, const BT* b, float* c, int64_t ldc, int cols,
                       bool load_c) {
  switch (rows) {
    case 1: return micro<1>(kc, a, b, c, ldc, cols, load_c);
    case 2: return micro<2>(kc, a, b, c, ldc, cols, load_c);
    case 3: return micro<3>(kc, a, b, c, ldc, cols, load_c);
#if defined(DGEMMA_SIMD_AVX512)
    case 4: return micro<4>(kc, a, b, c, ldc, cols, load_c);
    case 5: return micro<5>(kc, a, b, c, ldc, cols, load_c);
    case 6: return micro<6>(kc, a, b, c, ldc, cols, load_c);
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

// Panels [p0, p1) of a row-major [K][ld] source, rows [kc, kc+kcl), each
// panel's columns [p·kNr, p·kNr + kNr) ∩ [0, n), zero-padded, into
// dst + (p - p0)·stride as [kcl][kNr]. Row by row across all the panels, so
// each source row is read as one contiguous run.
template <class BT>
static void pack_b_rows(const BT* src, int64_t ld, int64_t n, int64_t kc, int64_t kcl, int64_t p0, int64_t p1,
                        int64_t stride, BT* dst) {
  for (int64_t kk = 0; kk < kcl; ++kk) {
    const BT* s = src + (kc + kk) * ld;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c0 = p * kNr, cols = s_min64(kNr, n - c0);
      BT* d = dst + (p - p0) * stride + kk * kNr;
      int64_t j = 0;
      for (; j < cols; ++j) d[j] = s[c0 + j];
      for (; j < kNr; ++j) d[j] = BT(0);
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

template <class BT>
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
        pack_b_rows(static_cast<const BT*>(g.b.rows), g.b.ld, N, kc, kcl, pb, pe, stride,
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

static void gemm_impl(const GemmArgs& g, const GemmRange& r, float* scratch) {
  if (g.b.type == PanelType::kF32) gemm_range_t<float>(g, r, scratch);
  else if (g.b.type == PanelType::kBF16) gemm_range_t<uint16_t>(g, r, scratch);
}
