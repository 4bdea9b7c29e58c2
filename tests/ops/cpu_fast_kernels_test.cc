// The optimized CPU kernels against the scalar reference (cpu_kernels.h), at
// every dispatch level this CPU runs (avx2, avx512, avx512bf16; the scalar
// level is the reference itself): random shapes including edge tiles (sizes
// that are not multiples of the vector width, the 32-wide panels, the 256-deep
// K blocks, the 128-key attention blocks), NaN/Inf propagation, large
// magnitudes, bit-exactness where the design promises it, and thread-count
// independence. Sizes stay small so the suite takes seconds under ASan.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "core/cpu_features.h"
#include "model/diffusion_gemma.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "support/test_rng.h"
#include "backend/cpu/cpu_levels.h"
#include "backend/cpu/int8_dot.h"
#include "backend/cpu/quant_simd.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

std::vector<CpuIsa> fast_levels() {
  std::vector<CpuIsa> v;
  for (CpuIsa l : {CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmx})
    if (int(l) <= int(detected_isa())) v.push_back(l);
  return v;
}

std::string level_name(CpuIsa l) { return std::string(isa_name(l)); }

// A weight held in `dtype` (values rounded to it), plus its fp32 values.
struct Weight {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  WeightRef ref;
};
Weight make_weight(std::vector<int64_t> shape, DType dtype, Rng& rng, float s = 0.2f) {
  Weight w;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  w.f32 = normal_values(n, rng, s);
  w.ref.name = std::string(1, 'w');  // (not = "w": GCC 12 -Wrestrict false positive, PR105329)
  w.ref.dtype = dtype;
  w.ref.shape = std::move(shape);
  if (dtype == DType::kF32) {
    w.ref.data = w.f32.data();
  } else {
    w.half.resize(size_t(n));
    for (size_t i = 0; i < size_t(n); ++i) {
      w.half[i] = dtype == DType::kBF16 ? f32_to_bf16(w.f32[i]) : f32_to_f16(w.f32[i]);
      w.f32[i] = dtype == DType::kBF16 ? bf16_to_f32(w.half[i]) : f16_to_f32(w.half[i]);
    }
    w.ref.data = w.half.data();
  }
  return w;
}
// The same values as an F32 weight.
WeightRef as_f32(const Weight& w) {
  WeightRef r = w.ref;
  r.dtype = DType::kF32;
  r.data = w.f32.data();
  return r;
}

OpCall make_call(OpKind kind, std::vector<const Tensor*> in, std::vector<const WeightRef*> w, std::vector<Tensor*> out,
                 OpAttrs a = {}) {
  OpCall c;
  c.kind = kind;
  c.in = std::move(in);
  c.w = std::move(w);
  c.out = std::move(out);
  c.attrs = a;
  return c;
}

// Runs `c` on the reference kernels (scalar level).
void run_reference(const OpCall& c) {
  static ThreadPool pool(2);
  prepare_op(c);
  switch (c.kind) {
    case OpKind::kLinear: return cpu::reference::linear(c, pool);
    case OpKind::kSoftEmbedding: return cpu::reference::soft_embedding(c, pool);
    case OpKind::kRmsNorm: return cpu::reference::rms_norm(c, pool);
    case OpKind::kAttention: return cpu::reference::attention(c, pool);
    case OpKind::kRouterTopk: return cpu::reference::router_topk(c, pool);
    case OpKind::kMoeExperts: return cpu::reference::moe_experts(c, pool);
    case OpKind::kGeluGlu: return cpu::reference::gelu_glu(c, pool);
    case OpKind::kSoftcap: return cpu::reference::softcap(c, pool);
    default: FAIL() << "no reference for " << op_name(c.kind);
  }
}

void run_on(CpuBackend& b, const OpCall& c) {
  prepare_op(c);
  b.run(c);
}

CpuBackendOptions level_options(CpuIsa l, int threads = 2, bool bf16_dot = false) {
  CpuBackendOptions o;
  o.threads = threads;
  o.isa = l;
  o.bf16_dot = bf16_dot;
  return o;
}

// |got − want| ≤ atol + rtol·|want| (per element: bound[i] when given),
// with NaN where the reference has NaN and the same infinities.
void expect_close(const std::vector<float>& want, const std::vector<float>& got, double atol, double rtol,
                  const std::string& what, const std::vector<float>* bound = nullptr) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    const float w = want[i], g = got[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::isfinite(g) && std::fabs(double(g) - w) <= (bound ? (*bound)[i] : atol) + rtol * std::fabs(w);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " reference " << w << " fast " << g;
    }
  }
}

// Rounding of an fp32 dot product: a bound from Σ|x·w| (the reference run on
// absolute values), loose enough for any summation order.
std::vector<float> dot_bounds(const Tensor& x, const Weight& w, double rel) {
  Tensor ax = x;
  for (float& v : ax.f) v = std::fabs(v);
  Weight aw = w;
  for (float& v : aw.f32) v = std::fabs(v);
  WeightRef r = as_f32(aw);
  Tensor out;
  run_reference(make_call(OpKind::kLinear, {&ax}, {&r}, {&out}));
  for (float& v : out.f) v = float(v * rel + 1e-6);
  return out.f;
}

// ---- dispatch ------------------------------------------------------------------

TEST(CpuDispatch, LevelsClampToTheCpuAndScalarIsTheReference) {
  CpuBackend scalar(level_options(CpuIsa::kScalar));
  EXPECT_EQ(scalar.isa(), CpuIsa::kScalar);
  CpuBackend top(level_options(CpuIsa::kAmx));  // the highest level: clamped to what this CPU runs
  EXPECT_EQ(top.isa(), detected_isa());
  EXPECT_EQ(parse_isa("avx2"), CpuIsa::kAvx2);
  EXPECT_EQ(parse_isa("amx"), CpuIsa::kAmx);
  EXPECT_FALSE(parse_isa("sse9").has_value());
  std::printf("cpu: %s, detected level %s, default %s\n", cpu_features().brand.c_str(),
              std::string(isa_name(detected_isa())).c_str(), std::string(isa_name(default_isa())).c_str());
}

// The backend's cap selects one row of the level table for every kernel it
// runs: the dense ones, the int8-dot products and the quantized weights'
// expansion (the scalar level: the reference kernels and the portable ones).
TEST(CpuDispatch, TheCapSelectsEveryKernelOfTheLevel) {
  for (int l = 0; l <= int(detected_isa()); ++l) {
    const CpuIsa isa = CpuIsa(l);
    SCOPED_TRACE(std::string(isa_name(isa)));
    const CpuBackend b(level_options(isa, 1));
    const cpu::CpuLevelKernels& k = b.kernels();
    EXPECT_EQ(&k, &cpu::cpu_level_kernels(isa));
    EXPECT_EQ(k.isa, isa);
    EXPECT_EQ(k.dense == nullptr, isa == CpuIsa::kScalar);
    ASSERT_TRUE(k.int8_dot && k.quant);
    EXPECT_EQ(std::string(k.int8_dot->name) == "portable", isa == CpuIsa::kScalar) << k.int8_dot->name;
    EXPECT_EQ(std::string(k.quant->name) == "portable", isa == CpuIsa::kScalar) << k.quant->name;
    EXPECT_EQ(std::string(k.quant->name) == "avx512", isa >= CpuIsa::kAvx512) << k.quant->name;
  }
  EXPECT_EQ(&cpu::cpu_level_kernels(CpuIsa::kAmx), &cpu::cpu_level_kernels(detected_isa()));
}

// ---- linear --------------------------------------------------------------------

TEST(CpuFastKernels, LinearMatchesReferenceOnEdgeShapes) {
  Rng rng(1);
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},     {7, 17, 31},  {8, 32, 32}, {9, 300, 33},
                                                      {33, 513, 65}, {3, 40, 300}, {17, 257, 1}};
  for (CpuIsa l : fast_levels()) {
    CpuBackend b(level_options(l));
    for (auto [M, K, N] : shapes)
      for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
        const std::string what = level_name(l) + " linear M=" + std::to_string(M) + " K=" + std::to_string(K) +
                                 " N=" + std::to_string(N) + " " + std::string(dtype_name(dt));
        Tensor x = normal_tensor({M, K}, rng);
        Weight w = make_weight({N, K}, dt, rng);
        Tensor want, got;
        run_reference(make_call(OpKind::kLinear, {&x}, {&w.ref}, {&want}));
        run_on(b, make_call(OpKind::kLinear, {&x}, {&w.ref}, {&got}));
        const auto bound = dot_bounds(x, w, 1e-5);
        expect_close(want.f, got.f, 0, 0, what, &bound);
        // bf16/f16 weights are widened exactly: identical to the same values in fp32.
        if (dt != DType::kF32) {
          WeightRef f = as_f32(w);
          Tensor got32;
          run_on(b, make_call(OpKind::kLinear, {&x}, {&f}, {&got32}));
          EXPECT_EQ(0, std::memcmp(got.f.data(), got32.f.data(), got.f.size() * 4)) << what;
        }
      }
  }
}

TEST(CpuFastKernels, LinearIsIndependentOfThreadsAndRowBlocking) {
  Rng rng(2);
  Tensor x = normal_tensor({37, 300}, rng);
  Weight w = make_weight({70, 300}, DType::kBF16, rng);
  for (CpuIsa l : fast_levels()) {
    CpuBackend one(level_options(l, 1)), three(level_options(l, 3));
    Tensor a, b;
    run_on(one, make_call(OpKind::kLinear, {&x}, {&w.ref}, {&a}));
    run_on(three, make_call(OpKind::kLinear, {&x}, {&w.ref}, {&b}));
    EXPECT_EQ(a.f, b.f) << level_name(l);
    // Row 20 alone gives the same bits as inside the 37-row batch.
    Tensor x1 = Tensor::f32({1, 300}), c;
    std::copy(x.f.begin() + 20 * 300, x.f.begin() + 21 * 300, x1.f.begin());
    run_on(three, make_call(OpKind::kLinear, {&x1}, {&w.ref}, {&c}));
    EXPECT_EQ(0, std::memcmp(c.f.data(), a.f.data() + 20 * 70, 70 * 4)) << level_name(l);
  }
}

TEST(CpuFastKernels, LinearPropagatesNanAndInf) {
  Rng rng(3);
  Tensor x = normal_tensor({5, 40}, rng);
  x.f[2 * 40 + 5] = NAN;
  x.f[3 * 40 + 0] = INFINITY;
  Weight w = make_weight({33, 40}, DType::kBF16, rng);
  Tensor want;
  run_reference(make_call(OpKind::kLinear, {&x}, {&w.ref}, {&want}));
  for (CpuIsa l : fast_levels())
    for (bool dot : {false, true}) {
      CpuBackend b(level_options(l, 2, dot));
      Tensor got;
      run_on(b, make_call(OpKind::kLinear, {&x}, {&w.ref}, {&got}));
      for (int64_t m = 0; m < 5; ++m)
        for (int64_t n = 0; n < 33; ++n) {
          const float r = want.f[size_t(m * 33 + n)], g = got.f[size_t(m * 33 + n)];
          EXPECT_EQ(std::isnan(r), std::isnan(g)) << level_name(l) << " m=" << m << " n=" << n;
          EXPECT_EQ(std::isinf(r), std::isinf(g)) << level_name(l) << " m=" << m << " n=" << n;
        }
    }
}

// bf16_dot: the activations are rounded to bf16, the products are exact, only
// the fp32 summation order (and denormal flushing) differs from a reference
// run on pre-rounded activations. Both dot levels: vdpbf16ps (AVX512_BF16)
// and the AMX tiles, with shapes off the tiles (rows past 16 and 32, a last k
// tile of fewer than 32, columns past a panel).
TEST(CpuFastKernels, LinearBf16DotRoundsOnlyTheActivations) {
  if (int(detected_isa()) < int(CpuIsa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16";
  for (CpuIsa level : {CpuIsa::kAvx512Bf16, CpuIsa::kAmx}) {
    if (int(level) > int(detected_isa())) continue;
    SCOPED_TRACE(level_name(level));
    Rng rng(4);
    CpuBackend b(level_options(level, 2, true));
    ASSERT_TRUE(b.bf16_dot());
    ASSERT_EQ(b.isa(), level);
    for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{
             {1, 1, 1}, {9, 301, 33}, {16, 512, 64}, {5, 2, 70}, {33, 96, 40}, {47, 1000, 97}, {70, 64, 32}}) {
      Tensor x = normal_tensor({M, K}, rng);
      Weight w = make_weight({N, K}, DType::kBF16, rng);
      Tensor xr = x;
      for (float& v : xr.f) v = round_bf16(v);
      Tensor want, got;
      run_reference(make_call(OpKind::kLinear, {&xr}, {&w.ref}, {&want}));
      run_on(b, make_call(OpKind::kLinear, {&x}, {&w.ref}, {&got}));
      const auto bound = dot_bounds(xr, w, 1e-5);
      expect_close(want.f, got.f, 0, 0, "bf16 dot K=" + std::to_string(K), &bound);
    }
  }
}

// ---- elementwise -----------------------------------------------------------------

TEST(CpuFastKernels, GeluGluAndSoftcapIncludingLargeMagnitudes) {
  Rng rng(5);
  Tensor g = normal_tensor({3, 37}, rng, 3.0f), u = normal_tensor({3, 37}, rng);
  const float specials[] = {40, -40, 1e4f, -1e4f, 1e30f, -1e30f, INFINITY, NAN, 0.0f, -0.0f, 1e-5f, -5.0f, 8.0f, -8.5f};
  for (size_t i = 0; i < std::size(specials); ++i) g.f[i * 7 % g.f.size()] = specials[i];
  Tensor want;
  run_reference(make_call(OpKind::kGeluGlu, {&g, &u}, {}, {&want}));
  OpAttrs ca;
  ca.cap = 30.0f;
  Tensor x = normal_tensor({2, 45}, rng, 40.0f);
  for (size_t i = 0; i < std::size(specials); ++i) x.f[i * 5] = specials[i];
  Tensor want_cap;
  run_reference(make_call(OpKind::kSoftcap, {&x}, {}, {&want_cap}, ca));
  for (CpuIsa l : fast_levels()) {
    CpuBackend b(level_options(l));
    Tensor got, got_cap;
    run_on(b, make_call(OpKind::kGeluGlu, {&g, &u}, {}, {&got}));
    expect_close(want.f, got.f, 2e-6, 2e-6, level_name(l) + " gelu_glu");
    for (size_t i = 0; i < got.f.size(); ++i)
      if (std::isfinite(g.f[i]) && std::isfinite(u.f[i])) {
        EXPECT_FALSE(std::isnan(got.f[i])) << level_name(l) << " gelu(" << g.f[i] << ")";
      }
    run_on(b, make_call(OpKind::kSoftcap, {&x}, {}, {&got_cap}, ca));
    // ±inf saturate to ±30 within the approximation (reference: exactly 30).
    for (size_t i = 0; i < x.f.size(); ++i)
      if (std::isinf(x.f[i])) got_cap.f[i] = want_cap.f[i];
    expect_close(want_cap.f, got_cap.f, 1e-5, 2e-6, level_name(l) + " softcap");
  }
}

TEST(CpuFastKernels, RmsNormWithAndWithoutScale) {
  Rng rng(6);
  for (int64_t D : {1, 7, 16, 33, 300}) {
    Tensor x = normal_tensor({5, D}, rng, 2.0f);
    std::fill(x.f.begin(), x.f.begin() + D, 0.0f);  // RMSNorm(0) = 0
    Weight w = make_weight({D}, DType::kBF16, rng, 1.0f);
    OpAttrs a;
    a.eps = 1e-6f;
    Tensor want_w, want;
    run_reference(make_call(OpKind::kRmsNorm, {&x}, {&w.ref}, {&want_w}, a));
    run_reference(make_call(OpKind::kRmsNorm, {&x}, {}, {&want}, a));
    for (CpuIsa l : fast_levels()) {
      CpuBackend b(level_options(l));
      Tensor got_w, got;
      run_on(b, make_call(OpKind::kRmsNorm, {&x}, {&w.ref}, {&got_w}, a));
      run_on(b, make_call(OpKind::kRmsNorm, {&x}, {}, {&got}, a));
      expect_close(want_w.f, got_w.f, 1e-6, 2e-6, level_name(l) + " rms_norm D=" + std::to_string(D));
      expect_close(want.f, got.f, 1e-6, 2e-6, level_name(l) + " rms_norm noscale D=" + std::to_string(D));
    }
  }
}

// ---- attention -------------------------------------------------------------------

struct AttnCase {
  int64_t M, S, Hq, Hk, d;
  AttentionMask mask;
  int window;
  bool decoder;  // queries are the last M of S positions (encoder) or canvas after a cache
};

// Bit for bit (NaN included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_attention(const AttnCase& ac, Rng& rng, const std::string& tag, bool nan_key = false) {
  Tensor q = normal_tensor({ac.M, ac.Hq, ac.d}, rng, 0.5f), k = normal_tensor({ac.S, ac.Hk, ac.d}, rng, 0.5f),
         v = normal_tensor({ac.S, ac.Hk, ac.d}, rng);
  Tensor qpos = Tensor::i32({ac.M}), kpos = Tensor::i32({ac.S});
  for (int64_t s = 0; s < ac.S; ++s) kpos.i[size_t(s)] = int32_t(s + 3);
  for (int64_t m = 0; m < ac.M; ++m) qpos.i[size_t(m)] = int32_t(ac.S - ac.M + m + 3);
  if (ac.decoder && ac.M > 2) qpos.i[0] = 0;  // a query that sees no key under a causal mask
  if (nan_key) k.f[size_t((ac.S / 2 * ac.Hk) * ac.d + 1)] = NAN;
  OpAttrs a;
  a.mask = ac.mask;
  a.window = ac.window;
  a.first_canvas_pos = ac.S - ac.M + 3;
  Tensor want;
  run_reference(make_call(OpKind::kAttention, {&q, &k, &v, &qpos, &kpos}, {}, {&want}, a));
  // The same keys as a cache segment and new rows (ops/op.h attention_keys):
  // the cache holds 3 rows that skip_rows leaves out (junk: a value that
  // leaked in would show), then keys [0, split); the new rows are the rest.
  const int64_t split = ac.S / 3, skip = 3, row = ac.Hk * ac.d;
  Tensor ck = normal_tensor({skip + split, ac.Hk, ac.d}, rng, 9.0f),
         cv = normal_tensor({skip + split, ac.Hk, ac.d}, rng, 9.0f);
  Tensor cpos = Tensor::i32({skip + split}), nk = Tensor::f32({ac.S - split, ac.Hk, ac.d}),
         nv = Tensor::f32({ac.S - split, ac.Hk, ac.d}), npos = Tensor::i32({ac.S - split});
  std::copy_n(k.f.begin(), split * row, ck.f.begin() + skip * row);
  std::copy_n(v.f.begin(), split * row, cv.f.begin() + skip * row);
  std::copy_n(k.f.begin() + split * row, (ac.S - split) * row, nk.f.begin());
  std::copy_n(v.f.begin() + split * row, (ac.S - split) * row, nv.f.begin());
  for (int64_t s = 0; s < skip; ++s) cpos.i[size_t(s)] = int32_t(ac.S + 100);  // visible under every mask
  std::copy_n(kpos.i.begin(), split, cpos.i.begin() + skip);
  std::copy_n(kpos.i.begin() + split, ac.S - split, npos.i.begin());
  OpAttrs sa = a;
  sa.skip_rows = skip;
  const std::vector<const Tensor*> split_in = {&q, &nk, &nv, &qpos, &npos, &ck, &cv, &cpos};
  Tensor want_split;
  run_reference(make_call(OpKind::kAttention, split_in, {}, {&want_split}, sa));
  EXPECT_TRUE(same_bits(want.f, want_split.f)) << "reference, cache segment " << tag;
  for (CpuIsa l : fast_levels()) {
    CpuBackend b(level_options(l, 3));
    Tensor got, got_split;
    run_on(b, make_call(OpKind::kAttention, {&q, &k, &v, &qpos, &kpos}, {}, {&got}, a));
    expect_close(want.f, got.f, 2e-5, 1e-4, level_name(l) + " " + tag);
    run_on(b, make_call(OpKind::kAttention, split_in, {}, {&got_split}, sa));
    EXPECT_TRUE(same_bits(got.f, got_split.f)) << level_name(l) << " cache segment " << tag;
  }
}

TEST(CpuFastKernels, AttentionMatchesReferenceForAllMasks) {
  Rng rng(7);
  const std::vector<AttnCase> cases = {
      {1, 1, 1, 1, 8, AttentionMask::kNone, 0, false},
      {5, 33, 4, 2, 24, AttentionMask::kNone, 0, true},
      {30, 130, 4, 2, 16, AttentionMask::kCausalWindow, 0, false},
      {30, 130, 4, 2, 16, AttentionMask::kCausalWindow, 7, true},
      {25, 300, 16, 2, 8, AttentionMask::kCausalWindow, 100, false},
      {9, 140, 2, 2, 40, AttentionMask::kCommittedWindow, 50, true},
      {4, 70, 16, 8, 256, AttentionMask::kNone, 0, true},
      {3, 40, 16, 2, 512, AttentionMask::kCausalWindow, 0, false},
  };
  for (const auto& ac : cases)
    check_attention(ac, rng,
                    "attention M=" + std::to_string(ac.M) + " S=" + std::to_string(ac.S) +
                        " Hq=" + std::to_string(ac.Hq) + " Hk=" + std::to_string(ac.Hk) + " d=" + std::to_string(ac.d) +
                        " mask=" + std::to_string(int(ac.mask)) + " W=" + std::to_string(ac.window));
}

TEST(CpuFastKernels, AttentionPropagatesNanFromVisibleKeys) {
  Rng rng(8);
  check_attention({6, 50, 4, 2, 16, AttentionMask::kCausalWindow, 0, false}, rng, "nan key causal", true);
  check_attention({6, 50, 4, 2, 16, AttentionMask::kNone, 0, true}, rng, "nan key none", true);
}

// The dot mode's attention (AttnArgs::round_bf16, the CUDA tensor-core
// attention's rounding points): Q, K and V are rounded to bf16, so inputs
// already rounded give the same bits; and the probabilities are rounded for
// P·V while the sums take them unrounded, so on bf16 inputs the result
// differs from the exact mode's, by at most one bf16 step of each
// probability (2^-8 relative: at most 2^-8 of the largest |v|).
TEST(CpuFastKernels, AttentionBf16DotRoundsQKVAndProbabilities) {
  CpuBackend dot(level_options(CpuIsa::kAvx512Bf16, 2, true)), exact(level_options(CpuIsa::kAvx512Bf16, 2, false));
  if (!dot.bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512_BF16: the CPU has no dot mode";
  Rng rng(9);
  const int64_t M = 5, S = 300, Hq = 4, Hk = 2, d = 48;  // S over one key block (128)
  Tensor q = normal_tensor({M, Hq, d}, rng, 0.5f), k = normal_tensor({S, Hk, d}, rng, 0.5f),
         v = normal_tensor({S, Hk, d}, rng);
  Tensor qpos = Tensor::i32({M}), kpos = Tensor::i32({S});
  for (int64_t s = 0; s < S; ++s) kpos.i[size_t(s)] = int32_t(s);
  for (int64_t m = 0; m < M; ++m) qpos.i[size_t(m)] = int32_t(S - M + m);
  OpAttrs a;
  a.mask = AttentionMask::kCausalWindow;
  Tensor rq = q, rk = k, rv = v;
  for (Tensor* t : {&rq, &rk, &rv})
    for (float& x : t->f) x = round_bf16(x);
  Tensor got, got_rounded, exact_rounded;
  run_on(dot, make_call(OpKind::kAttention, {&q, &k, &v, &qpos, &kpos}, {}, {&got}, a));
  run_on(dot, make_call(OpKind::kAttention, {&rq, &rk, &rv, &qpos, &kpos}, {}, {&got_rounded}, a));
  run_on(exact, make_call(OpKind::kAttention, {&rq, &rk, &rv, &qpos, &kpos}, {}, {&exact_rounded}, a));
  EXPECT_TRUE(same_bits(got.f, got_rounded.f)) << "Q, K or V not rounded to bf16 in the dot mode";
  EXPECT_FALSE(same_bits(got_rounded.f, exact_rounded.f)) << "the probabilities were not rounded";
  float vmax = 0.0f;
  for (float x : rv.f) vmax = std::max(vmax, std::fabs(x));
  expect_close(exact_rounded.f, got_rounded.f, std::ldexp(double(vmax), -8), 0.0, "dot mode against exact");
}

// ---- router and experts ------------------------------------------------------------

TEST(CpuFastKernels, RouterTopkMatchesReference) {
  Rng rng(9);
  for (auto [M, H, E, K] : std::vector<std::array<int64_t, 4>>{{1, 8, 4, 1}, {20, 144, 8, 3}, {9, 300, 40, 8}}) {
    Tensor x = normal_tensor({M, H}, rng, 3.0f);
    Weight scale = make_weight({H}, DType::kBF16, rng, 1.0f), proj = make_weight({E, H}, DType::kBF16, rng, 1.0f),
           pes = make_weight({E}, DType::kBF16, rng, 1.0f);
    OpAttrs a;
    a.eps = 1e-6f;
    a.top_k = int(K);
    Tensor idx, w;
    run_reference(make_call(OpKind::kRouterTopk, {&x}, {&scale.ref, &proj.ref, &pes.ref}, {&idx, &w}, a));
    for (CpuIsa l : fast_levels()) {
      CpuBackend b(level_options(l));
      Tensor gidx, gw;
      run_on(b, make_call(OpKind::kRouterTopk, {&x}, {&scale.ref, &proj.ref, &pes.ref}, {&gidx, &gw}, a));
      EXPECT_EQ(idx.i, gidx.i) << level_name(l) << " E=" << E;
      expect_close(w.f, gw.f, 1e-6, 1e-5, level_name(l) + " router weights");
    }
  }
}

TEST(CpuFastKernels, MoeExpertsMatchReferenceAndBf16IsExact) {
  Rng rng(10);
  struct Case {
    int64_t M, H, I, E, K;
  };
  for (const Case& cs : {Case{1, 8, 4, 2, 1}, Case{13, 40, 24, 6, 2}, Case{40, 300, 50, 12, 4}, Case{3, 33, 20, 5, 5}})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Tensor x = normal_tensor({cs.M, cs.H}, rng);
      Tensor idx = Tensor::i32({cs.M, cs.K}), w = Tensor::f32({cs.M, cs.K});
      for (int64_t m = 0; m < cs.M; ++m) {
        std::vector<int32_t> perm(size_t(cs.E));
        for (int32_t e = 0; e < cs.E; ++e) perm[size_t(e)] = e;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int64_t k = 0; k < cs.K; ++k) {
          idx.i[size_t(m * cs.K + k)] = perm[size_t(k)];
          w.f[size_t(m * cs.K + k)] = 0.1f + std::fabs(rng.normal());
        }
      }
      Weight gu = make_weight({cs.E, 2 * cs.I, cs.H}, dt, rng, 0.3f),
             dn = make_weight({cs.E, cs.H, cs.I}, dt, rng, 0.3f);
      Tensor want;
      run_reference(make_call(OpKind::kMoeExperts, {&x, &idx, &w}, {&gu.ref, &dn.ref}, {&want}));
      // Outputs are sums of terms far larger than some of them (cancellation):
      // bound the error by the output scale.
      double scale = 0;
      for (float v : want.f) scale = std::max(scale, double(std::fabs(v)));
      const std::string what =
          "moe M=" + std::to_string(cs.M) + " H=" + std::to_string(cs.H) + " " + std::string(dtype_name(dt));
      for (CpuIsa l : fast_levels()) {
        CpuBackend b(level_options(l, 3));
        Tensor got;
        run_on(b, make_call(OpKind::kMoeExperts, {&x, &idx, &w}, {&gu.ref, &dn.ref}, {&got}));
        expect_close(want.f, got.f, 1e-5 * scale, 1e-5, level_name(l) + " " + what);
        if (dt == DType::kBF16) {
          WeightRef gu32 = as_f32(gu), dn32 = as_f32(dn);
          Tensor got32;
          run_on(b, make_call(OpKind::kMoeExperts, {&x, &idx, &w}, {&gu32, &dn32}, {&got32}));
          EXPECT_EQ(got.f, got32.f) << level_name(l) << " " << what;
        }
      }
      if (dt == DType::kBF16 && int(detected_isa()) >= int(CpuIsa::kAvx512Bf16)) {
        CpuBackend b(level_options(detected_isa(), 2, true));
        Tensor got;
        run_on(b, make_call(OpKind::kMoeExperts, {&x, &idx, &w}, {&gu.ref, &dn.ref}, {&got}));
        // Activations (x and gelu·up) rounded to bf16: ~2^-9 relative per term.
        expect_close(want.f, got.f, 0.03 * scale, 0.02, "bf16 dot " + what);
      }
    }
}

// ---- soft embedding -------------------------------------------------------------

// {20, 601, 300}: an odd V (the last k pair has no second row) and H over
// kNcPanels panels with a partial last one (blocked packing of B rows).
TEST(CpuFastKernels, SoftEmbeddingMatchesReference) {
  Rng rng(11);
  for (auto [M, V, H] : std::vector<std::array<int64_t, 3>>{{1, 3, 2}, {5, 100, 40}, {3, 9000, 33}, {20, 601, 300}})
    for (DType dt : {DType::kF32, DType::kBF16})
      for (const bool bf16_run : {false, true}) {
        Tensor logits = normal_tensor({M, V}, rng, 4.0f);
        Weight table = make_weight({V, H}, dt, rng, 1.0f);
        OpAttrs a;
        a.scale = 2.5f;
        a.round_to_bf16 = bf16_run;
        Tensor want;
        run_reference(make_call(OpKind::kSoftEmbedding, {&logits}, {&table.ref}, {&want}, a));
        for (CpuIsa l : fast_levels()) {
          CpuBackend b(level_options(l));
          Tensor got;
          run_on(b, make_call(OpKind::kSoftEmbedding, {&logits}, {&table.ref}, {&got}, a));
          // In a bf16 run a probability may round to the neighbouring bf16
          // value when its fp32 sum differs in the last bit (relative 2^-8).
          const double tol = bf16_run ? 5e-3 : 1e-5;
          expect_close(want.f, got.f, tol, tol,
                       level_name(l) + " soft_embedding V=" + std::to_string(V) + " " + std::string(dtype_name(dt)) +
                           (bf16_run ? " bf16 run" : " fp32 run"));
        }
      }
}

// Rows whose probability sits on a few tokens are summed sparsely, within
// 1e-6 relative of the dense product (fast_soft_embedding.cc); flat rows stay
// dense and are identical to the dense-only path; a mix is scattered back
// to the right rows.
TEST(CpuFastKernels, SoftEmbeddingSparseRowsMatchTheDenseProduct) {
  Rng rng(12);
  const int64_t M = 9, V = 5000, H = 48;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const bool bf16_run : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (bf16_run ? " bf16 run" : " fp32 run"));
      Tensor logits = normal_tensor({M, V}, rng, 2.0f);
      // Rows 0, 3, 4, 8 peaked: up to 5 tokens 60-70 nats above the rest.
      for (const int64_t m : {0, 3, 4, 8})
        for (int64_t k = 0; k <= m % 5; ++k) logits.f[size_t(m * V + (k * 977 + m * 31) % V)] = 60.0f + float(k * 2);
      Weight table = make_weight({V, H}, dt, rng, 1.0f);
      OpAttrs a;
      a.scale = 3.0f;
      a.round_to_bf16 = bf16_run;
      for (CpuIsa l : fast_levels()) {
        CpuBackendOptions dense_only = level_options(l), sparse = level_options(l);
        dense_only.sparse_self_conditioning = false;
        CpuBackend bd(dense_only), bs(sparse);
        Tensor want, got;
        run_on(bd, make_call(OpKind::kSoftEmbedding, {&logits}, {&table.ref}, {&want}, a));
        run_on(bs, make_call(OpKind::kSoftEmbedding, {&logits}, {&table.ref}, {&got}, a));
        const SoftEmbeddingStats st = bs.soft_embedding_stats();
        EXPECT_EQ(st.rows_sparse, 4) << level_name(l);
        EXPECT_EQ(st.rows_dense, M - 4) << level_name(l);
        EXPECT_EQ(st.kept_max, 5) << level_name(l);
        EXPECT_EQ(bd.soft_embedding_stats().calls, 0);
        for (int64_t m = 0; m < M; ++m) {
          const bool peaked = m == 0 || m == 3 || m == 4 || m == 8;
          double n2 = 0, e2 = 0;
          for (int64_t h = 0; h < H; ++h) {
            const double w = want.f[size_t(m * H + h)], g = got.f[size_t(m * H + h)];
            n2 += w * w;
            e2 += (w - g) * (w - g);
            if (!peaked) {
              ASSERT_EQ(w, g) << "dense row " << m << " h " << h;
            }
          }
          EXPECT_LE(std::sqrt(e2), 2e-6 * std::sqrt(n2)) << level_name(l) << " row " << m;
        }
      }
    }
}

// ---- whole model ---------------------------------------------------------------------

// Every level on golden config A (fp32 weights) against the scalar level:
// encoder + decoder without and with self-conditioning.
TEST(CpuFastKernels, EveryLevelMatchesTheScalarModelOnGoldenA) {
  const std::string dir = std::string(DGEMMA_TEST_DATA) + "/golden_a";
  auto run = [&](CpuIsa level, std::vector<float>& first, std::vector<float>& second) {
    auto m = test::load_on_cpu(dir);
    CpuBackend b(level_options(level));
    m->set_backend(b);
    std::vector<int32_t> prompt(40);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 37 + 11) % 512);
    m->encode(prompt);
    std::vector<int32_t> canvas(size_t(m->canvas_length()));
    for (size_t i = 0; i < canvas.size(); ++i) canvas[i] = int32_t((i * 13 + 5) % 512);
    first.resize(size_t(m->canvas_length() * m->vocab_size()));
    second.resize(first.size());
    m->decode(canvas.data(), nullptr, first.data());
    m->decode(canvas.data(), first.data(), second.data());
  };
  std::vector<float> r1, r2;
  run(CpuIsa::kScalar, r1, r2);
  for (CpuIsa l : fast_levels()) {
    std::vector<float> f1, f2;
    run(l, f1, f2);
    expect_close(r1, f1, 1e-3, 0, level_name(l) + " golden A logits");
    expect_close(r2, f2, 1e-3, 0, level_name(l) + " golden A self-conditioned logits");
  }
}

}  // namespace
}  // namespace dgemma
