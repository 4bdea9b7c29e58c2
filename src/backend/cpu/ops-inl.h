// Row-wise vector kernels and the attention tile (no include guard: included
// by each kernels_<isa>.cc after gemm-inl.h, inside its target region).

static void gelu_glu_impl(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) S::store(out + i, S::mul(v_gelu_tanh(S::load(g + i)), S::load(u + i)));
  if (i < n) {
    const int r = int(n - i);
    S::store_partial(out + i, S::mul(v_gelu_tanh(S::load_partial(g + i, r)), S::load_partial(u + i, r)), r);
  }
}

static void softcap_impl(const float* x, float* out, int64_t n, float cap) {
  const S::V c = S::set1(cap);
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) S::store(out + i, S::mul(c, v_tanh(S::div(S::load(x + i), c))));
  if (i < n) {
    const int r = int(n - i);
    S::store_partial(out + i, S::mul(c, v_tanh(S::div(S::load_partial(x + i, r), c))), r);
  }
}

static float sum_squares(const float* x, int64_t n) {
  S::V a0 = S::zero(), a1 = S::zero();
  int64_t i = 0;
  for (; i + 2 * S::kLanes <= n; i += 2 * S::kLanes) {
    const S::V v0 = S::load(x + i), v1 = S::load(x + i + S::kLanes);
    a0 = S::fmadd(v0, v0, a0);
    a1 = S::fmadd(v1, v1, a1);
  }
  for (; i < n; i += S::kLanes) {
    const int r = int(s_min64(S::kLanes, n - i));
    const S::V v = S::load_partial(x + i, r);
    a0 = S::fmadd(v, v, a0);
  }
  return S::reduce_add(S::add(a0, a1));
}

// RMSNorm of one row (docs/model.md §1.2), same operation order per element as the
// reference: (x · inv) · w.
static void rms_norm_row_impl(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float inv = 1.0f / __builtin_sqrtf(sum_squares(x, n) / float(n) + eps);
  const S::V vi = S::set1(inv);
  for (int64_t i = 0; i < n; i += S::kLanes) {
    const int r = int(s_min64(S::kLanes, n - i));
    S::V v = S::mul(r == S::kLanes ? S::load(x + i) : S::load_partial(x + i, r), vi);
    if (w) v = S::mul(v, r == S::kLanes ? S::load(w + i) : S::load_partial(w + i, r));
    if (r == S::kLanes)
      S::store(out + i, v);
    else
      S::store_partial(out + i, v, r);
  }
}

static float row_max_impl(const float* x, int64_t n) {
  S::V m = S::set1(-__builtin_inff());
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) m = S::max(S::load(x + i), m);  // NaN in x: keeps m
  float lanes[S::kLanes];
  S::store(lanes, m);
  float r = lanes[0];
  for (int j = 1; j < S::kLanes; ++j) r = s_max(r, lanes[j]);
  for (; i < n; ++i) r = s_max(r, x[i]);  // a NaN x[i] compares false: ignored
  return r;
}

static float exp_sum_impl(const float* x, float shift, float* out, int64_t n) {
  const S::V sh = S::set1(shift);
  S::V acc = S::zero();
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) {
    const S::V e = v_exp(S::sub(S::load(x + i), sh));
    S::store(out + i, e);
    acc = S::add(acc, e);
  }
  float tail = 0.0f;
  if (i < n) {
    const int r = int(n - i);
    const S::V e = v_exp(S::sub(S::load_partial(x + i, r), sh));
    float lanes[S::kLanes];
    S::store(lanes, e);
    for (int j = 0; j < r; ++j) {
      out[i + j] = lanes[j];
      tail += lanes[j];
    }
  }
  return S::reduce_add(acc) + tail;
}

// bf16(x·s), round to nearest even, NaN kept quiet (dtype.h f32_to_bf16).
static void scale_round_bf16_impl(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float f = x[i] * s;
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      u = (u | 0x00400000u) & 0xffff0000u;
    else
      u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    __builtin_memcpy(&f, &u, 4);
    x[i] = f;
  }
}

// ---- attention ---------------------------------------------------------------

// The mask of docs/model.md §2.2/§2.4 and §7.7 (ops/op.h AttentionMask: 0 none,
// 1 causal window, 2 committed window, 3 causal window or the same image
// block, 4 JAX's blocks rule); qb, kb: the query's and the key's image block
// (-1: none).
static inline bool attn_visible(const AttnArgs& a, int64_t qp, int64_t kp, int32_t qb, int32_t kb) {
  switch (a.mask) {
    case 1: return kp <= qp && (a.window == 0 || qp - kp < a.window);
    case 2: return kp >= a.first_canvas_pos || kp > qp - a.window;
    case 3: return (kp <= qp && (a.window == 0 || qp - kp < a.window)) || (qb >= 0 && qb == kb);
    case 4: return (kp <= qp || (qb >= 0 && qb == kb)) && (qp - kp < a.window && kp - qp < a.window);
    default: return true;
  }
}

// Whether a block of keys with positions in [kmin, kmax] is visible to no
// query / every query with positions in [qmin, qmax]. blocks_meet: some
// query of the tile and some key of the block share an image block (masks 3
// and 4), so that the causal bounds alone cannot rule the block out.
static inline int attn_block_class(const AttnArgs& a, int64_t qmin, int64_t qmax, int64_t kmin, int64_t kmax,
                                   bool blocks_meet) {
  enum { kNoneVisible = 0, kAllVisible = 1, kPartial = 2 };
  auto causal_window = [&] {
    if (kmin > qmax || (a.window > 0 && qmin - kmax >= a.window)) return int(kNoneVisible);
    if (kmax <= qmin && (a.window == 0 || qmax - kmin < a.window)) return int(kAllVisible);
    return int(kPartial);
  };
  switch (a.mask) {
    case 1: return causal_window();
    case 2:
      if (kmin >= a.first_canvas_pos || kmin > qmax - a.window) return kAllVisible;
      if (kmax < a.first_canvas_pos && kmax <= qmin - a.window) return kNoneVisible;
      return kPartial;
    case 3: {  // causal window OR the same block
      const int cls = causal_window();
      return cls == kNoneVisible && blocks_meet ? int(kPartial) : cls;
    }
    case 4:  // (causal OR the same block) AND |qpos - kpos| < window
      if (qmin - kmax >= a.window || kmin - qmax >= a.window) return kNoneVisible;
      return blocks_meet ? int(kPartial) : causal_window();  // without a shared block: the causal window
    default: return kAllVisible;
  }
}

// Whether the image blocks [bmin0, bmax0] and [bmin1, bmax1] (a range with
// bmin > bmax: no block) may share one.
static inline bool attn_blocks_meet(int32_t bmin0, int32_t bmax0, int32_t bmin1, int32_t bmax1) {
  return bmin0 <= bmax0 && bmin1 <= bmax1 && bmin0 <= bmax1 && bmin1 <= bmax0;
}

// Flash-attention style tile: up to kAttnRows query rows of one KV head
// against all keys, in blocks of kAttnKeys with an online softmax (running
// max m, running sum l, output rescaled by e^(m_old − m_new)). Scores and P·V
// use the GEMM micro-kernel (Kᵀ and V prepacked into kNr panels by the
// driver). Scale 1.0 (docs/model.md §1.3); a query with no visible key gets zeros, as
// in the reference.
static void attention_tile_impl(const AttnArgs& a, int64_t kh, int64_t t0, int64_t t1, float* scratch) {
  const int64_t d = a.d, G = a.group, R = t1 - t0, S_ = a.s;
  const int64_t dp = (d + kNr - 1) / kNr * kNr, sp = (S_ + kNr - 1) / kNr * kNr;
  float* qp = scratch;                     // [ceil(R/kMr)][d][kMr]
  float* sc = qp + kAttnRows * d;          // [R][kAttnKeys] scores, then probabilities
  float* pp = sc + kAttnRows * kAttnKeys;  // [ceil(R/kMr)][kAttnKeys][kMr]
  float* o = pp + kAttnRows * kAttnKeys;   // [R][dp]
  float* mrow = o + kAttnRows * dp;        // running max
  float* lrow = mrow + kAttnRows;          // running sum
  int32_t rows[kAttnRows], qblock[kAttnRows];
  int64_t qpos[kAttnRows];
  int64_t qmin = 0, qmax = 0;
  int32_t qbmin = 0x7fffffff, qbmax = -1;  // the tile's image blocks (none: qbmin > qbmax)
  for (int64_t i = 0; i < R; ++i) {
    const int64_t t = t0 + i, m = t / G, h = kh * G + t % G;
    rows[i] = int32_t(m * a.hq + h);
    qpos[i] = a.qpos[m];
    qblock[i] = a.qblock ? a.qblock[m] : -1;
    if (qblock[i] >= 0) {
      qbmin = qblock[i] < qbmin ? qblock[i] : qbmin;
      qbmax = qblock[i] > qbmax ? qblock[i] : qbmax;
    }
    qmin = i == 0 ? qpos[i] : (qpos[i] < qmin ? qpos[i] : qmin);
    qmax = i == 0 ? qpos[i] : (qpos[i] > qmax ? qpos[i] : qmax);
    mrow[i] = -__builtin_inff();
    lrow[i] = 0.0f;
  }
  pack_a_impl(a.q, d, rows, R, d, qp);
  if (a.round_bf16) scale_round_bf16_impl(qp, 1.0f, (R + kMr - 1) / kMr * kMr * d);
  for (int64_t i = 0; i < R * dp; ++i) o[i] = 0.0f;
  const float* kt = a.kt + kh * a.kt_head_stride;
  const float* vp = a.vp + kh * a.vp_head_stride;

  for (int64_t kb = 0; kb < S_; kb += kAttnKeys) {
    const int64_t kbl = s_min64(kAttnKeys, S_ - kb);
    const int64_t npan = (kbl + kNr - 1) / kNr, kbp = npan * kNr;
    int64_t kmin = a.kpos[kb], kmax = a.kpos[kb];
    for (int64_t j = 1; j < kbl; ++j) {
      const int64_t kp = a.kpos[kb + j];
      kmin = kp < kmin ? kp : kmin;
      kmax = kp > kmax ? kp : kmax;
    }
    int32_t kbmin = 0x7fffffff, kbmax = -1;
    if (a.kblock)
      for (int64_t j = 0; j < kbl; ++j) {
        const int32_t b = a.kblock[kb + j];
        if (b < 0) continue;
        kbmin = b < kbmin ? b : kbmin;
        kbmax = b > kbmax ? b : kbmax;
      }
    const int cls = attn_block_class(a, qmin, qmax, kmin, kmax, attn_blocks_meet(qbmin, qbmax, kbmin, kbmax));
    if (cls == 0) continue;
    // Scores: Q (R × d) · Kᵀ (d × kbp).
    for (int64_t p = 0; p < npan; ++p)
      for (int64_t mb = 0; mb < R; mb += kMr)
        micro_rows(int(s_min64(kMr, R - mb)), d, qp + mb * d, kt + (kb / kNr + p) * d * kNr,
                   sc + mb * kAttnKeys + p * kNr, kAttnKeys, kNr, false);
    // Mask, online softmax.
    for (int64_t i = 0; i < R; ++i) {
      float* s = sc + i * kAttnKeys;
      for (int64_t j = kbl; j < kbp; ++j) s[j] = -__builtin_inff();  // padding keys
      if (cls == 2)
        for (int64_t j = 0; j < kbl; ++j)
          if (!attn_visible(a, qpos[i], a.kpos[kb + j], qblock[i], a.kblock ? a.kblock[kb + j] : -1))
            s[j] = -__builtin_inff();
      const float bm = row_max_impl(s, kbl);
      const float mnew = s_max(mrow[i], bm);
      if (mnew == -__builtin_inff()) {  // nothing visible yet: P row is zero
        for (int64_t j = 0; j < kbp; ++j) s[j] = 0.0f;
        continue;
      }
      const float alpha = mrow[i] == -__builtin_inff() ? 0.0f : __builtin_expf(mrow[i] - mnew);
      const float sum = exp_sum_impl(s, mnew, s, kbp);
      lrow[i] = lrow[i] * alpha + sum;
      if (alpha != 1.0f) {
        float* orow = o + i * dp;
        const S::V va = S::set1(alpha);
        for (int64_t j = 0; j < dp; j += S::kLanes) S::store(orow + j, S::mul(S::load(orow + j), va));
      }
      mrow[i] = mnew;
    }
    // O += P (R × kbp) · V (kbp × dp).
    if (a.round_bf16)
      for (int64_t i = 0; i < R; ++i) scale_round_bf16_impl(sc + i * kAttnKeys, 1.0f, kbp);
    pack_a_impl(sc, kAttnKeys, nullptr, R, kbp, pp);
    for (int64_t pd = 0; pd < dp / kNr; ++pd)
      for (int64_t mb = 0; mb < R; mb += kMr)
        micro_rows(int(s_min64(kMr, R - mb)), kbp, pp + mb * kbp, vp + (pd * sp + kb) * kNr, o + mb * dp + pd * kNr, dp,
                   int(s_min64(kNr, d - pd * kNr)), true);  // O's columns past d stay 0
  }
  for (int64_t i = 0; i < R; ++i) {
    const int64_t t = t0 + i, m = t / G, h = kh * G + t % G;
    float* dst = a.out + m * a.hq * d + h * d;
    const float* orow = o + i * dp;
    if (lrow[i] == 0.0f) {
      for (int64_t j = 0; j < d; ++j) dst[j] = 0.0f;
      continue;
    }
    const float inv = 1.0f / lrow[i];
    for (int64_t j = 0; j < d; ++j) dst[j] = orow[j] * inv;
  }
}

// ---- peak rate -----------------------------------------------------------------

// kChains independent accumulators: enough to cover FMA latency × throughput
// (4 × 2 on current cores) with room to spare, few enough for the registers.
#if defined(DGEMMA_SIMD_AVX512)
constexpr int kPeakChains = 16;
#else
constexpr int kPeakChains = 12;
#endif

static double peak_fma_impl(int64_t iters, float seed) {
  S::V acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = S::set1(seed * float(i + 1));
  const S::V a = S::set1(0.999999f), b = S::set1(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kPeakChains; ++i) acc[i] = S::fmadd(acc[i], a, b);
  S::V s = acc[0];
  for (int i = 1; i < kPeakChains; ++i) s = S::add(s, acc[i]);
  volatile float sink = S::reduce_add(s);
  (void)sink;
  return double(iters) * kPeakChains * S::kLanes * 2.0;
}

// The kernel table of this dispatch level: every entry is this translation
// unit's instantiation of the shared sources (simd-inl.h, gemm-inl.h, this
// file). The bf16 level starts from the AVX-512 table and overrides a few.
static IsaKernels level_table(CpuIsa isa) {
  IsaKernels k;
  k.isa = isa;
  k.mr = kMr;
  k.bf16_panels = kBf16Panels;
  k.pack_a = pack_a_impl;
  k.gemm = gemm_impl;
  k.gelu_glu = gelu_glu_impl;
  k.softcap = softcap_impl;
  k.rms_norm_row = rms_norm_row_impl;
  k.row_max = row_max_impl;
  k.exp_sum = exp_sum_impl;
  k.scale_round_bf16 = scale_round_bf16_impl;
  k.attention_tile = attention_tile_impl;
  k.peak_fma = peak_fma_impl;
  return k;
}
