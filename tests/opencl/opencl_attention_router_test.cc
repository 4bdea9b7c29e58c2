// Attention, soft_embedding and router_topk on the OpenCL backend (docs/opencl.md
// §3) where the op catalogue's small rows do not reach: inputs that an
// earlier op left on the device read in place next to host inputs, key
// ranges and head dims longer than one work-group, and exact ties in the
// router's top-k. Each is compared with the CPU's scalar reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "ops/backend.h"
#include "ops/op.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

// The last OpenCL device of this machine (PoCL's CPU device in CI), or a skip.
#define REQUIRE_OPENCL_BACKEND(cl)                                            \
  std::string why_none;                                                       \
  const std::vector<OpenClDeviceInfo> devices = opencl_devices(&why_none);    \
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device here: " << why_none; \
  OpenClBackend cl(OpenClBackendOptions{devices.back().platform, devices.back().device, false})

// Runs `call` on the scalar CPU (the reference) into `want`, one tensor per output.
void run_reference(OpCall call, std::vector<Tensor>& want) {
  CpuBackendOptions o;
  o.threads = 2;
  o.isa = CpuIsa::kScalar;
  CpuBackend cpu(o);
  call.out.clear();
  for (Tensor& t : want) call.out.push_back(&t);
  Executor(cpu).run(call);
}

// |got - want| <= atol + rtol · max|want| element by element (the catalogue's
// tolerance for fp32 outputs), after a check that the reference is not all zero.
void expect_near(const Tensor& want, const Tensor& got, double rtol, const std::string& what) {
  ASSERT_EQ(want.shape, got.shape) << what;
  double max_ref = 0;
  for (float v : want.f) max_ref = std::max(max_ref, std::fabs(double(v)));
  EXPECT_GT(max_ref, 0.0) << what << ": the reference is all zero";
  const double bound = 1e-5 + rtol * max_ref;
  for (size_t k = 0; k < want.f.size(); ++k)
    ASSERT_LE(std::fabs(double(got.f[k]) - double(want.f[k])), bound)
        << what << " at " << k << ": got " << got.f[k] << ", want " << want.f[k];
}

Tensor ints(std::vector<int32_t> v) {
  Tensor t = Tensor::i32({int64_t(v.size())});
  t.i = std::move(v);
  return t;
}

// A KV cache that an earlier op left on the device (concat_rows appending new
// rows to the old cache, as the model's decoder does), new keys from the
// host: the attention reads the cache's buffers in place (nothing of it goes
// up again), skips its leading rows, and matches the reference.
TEST(OpenClAttention, ReadsADeviceCacheInPlaceNextToHostRows) {
  REQUIRE_OPENCL_BACKEND(cl);
  const int64_t M = 4, S = 5, Hq = 6, Hk = 2, d = 40, old_rows = 7, added = 3, C = old_rows + added, skip = 2;
  Rng rng(11);
  Tensor old_k = uniform_tensor({old_rows, Hk, d}, rng, -1, 1), old_v = uniform_tensor({old_rows, Hk, d}, rng, -1, 1);
  Tensor add_k = uniform_tensor({added, Hk, d}, rng, -1, 1), add_v = uniform_tensor({added, Hk, d}, rng, -1, 1);
  std::vector<int32_t> old_p(old_rows), add_p(added);
  std::iota(old_p.begin(), old_p.end(), -int32_t(skip));
  std::iota(add_p.begin(), add_p.end(), int32_t(old_rows - skip));
  Tensor old_pos = ints(old_p), add_pos = ints(add_p);
  Tensor cache_k, cache_v, cache_pos;
  for (auto [a, b, out] : {std::tuple{&old_k, &add_k, &cache_k}, std::tuple{&old_v, &add_v, &cache_v},
                           std::tuple{&old_pos, &add_pos, &cache_pos}}) {
    OpCall cat;
    cat.kind = OpKind::kConcatRows;
    cat.in = {a, b};
    cat.out = {out};
    Executor(cl).run(cat);
  }
  ASSERT_TRUE(cache_k.host_stale && cache_v.host_stale && cache_pos.host_stale) << "the cache stays on the device";

  Tensor q = uniform_tensor({M, Hq, d}, rng, -1, 1);
  Tensor k = uniform_tensor({S, Hk, d}, rng, -1, 1), v = uniform_tensor({S, Hk, d}, rng, -1, 1);
  const int32_t kept = int32_t(C - skip);
  std::vector<int32_t> kp(S), qp(M);
  std::iota(kp.begin(), kp.end(), kept);
  std::iota(qp.begin(), qp.end(), kept + int32_t(S - M));
  Tensor kpos = ints(kp), qpos = ints(qp);
  for (AttentionMask mask : {AttentionMask::kNone, AttentionMask::kCausalWindow, AttentionMask::kCommittedWindow}) {
    OpCall attn;
    attn.kind = OpKind::kAttention;
    attn.in = {&q, &k, &v, &qpos, &kpos, &cache_k, &cache_v, &cache_pos};
    attn.attrs.mask = mask;
    attn.attrs.window = 4;
    attn.attrs.first_canvas_pos = qp[0];
    attn.attrs.skip_rows = skip;
    Tensor got;
    attn.out = {&got};
    cl.reset_traffic();
    Executor(cl).run(attn);
    const DeviceTraffic t = *cl.device_traffic();
    // Only the host inputs go up, and only the first time: they are small, so
    // the device keeps them while their bytes stay the same.
    EXPECT_EQ(t.h2d_bytes, mask == AttentionMask::kNone ? (q.numel() + k.numel() + v.numel() + M + S) * 4 : 0)
        << "the cache is read where it lies";
    EXPECT_EQ(t.d2h_bytes, 0);
    EXPECT_EQ(t.kernel_launches, 1);
    EXPECT_TRUE(got.host_stale);
    got.ensure_host();
    // The reference reads a host copy of the same cache.
    std::vector<Tensor> want(1);
    run_reference(attn, want);
    expect_near(want[0], got, 1e-4, "attention, mask " + std::to_string(int(mask)));
  }
}

// More keys than a work-group has work-items (several tiles, the last one
// partial), a head dim of 512 (two output elements per work-item, as the
// model's full layers have), grouped heads, and a query before every key
// (a zero row under the causal mask).
TEST(OpenClAttention, LongKeyRangesAndWideHeadsMatchTheReference) {
  REQUIRE_OPENCL_BACKEND(cl);
  const int64_t M = 3, S = 1000, Hq = 4, Hk = 2, d = 512, C = 300, skip = 37;
  Rng rng(12);
  Tensor q = uniform_tensor({M, Hq, d}, rng, -0.2f, 0.2f);
  Tensor k = uniform_tensor({S, Hk, d}, rng, -0.2f, 0.2f), v = uniform_tensor({S, Hk, d}, rng, -1, 1);
  Tensor ck = uniform_tensor({C, Hk, d}, rng, -0.2f, 0.2f), cv = uniform_tensor({C, Hk, d}, rng, -1, 1);
  const int32_t kept = int32_t(C - skip);
  std::vector<int32_t> cp(C), kp(S);
  std::iota(cp.begin(), cp.end(), -int32_t(skip));
  std::iota(kp.begin(), kp.end(), kept);
  const int32_t last = kept + int32_t(S) - 1;
  Tensor cpos = ints(cp), kpos = ints(kp), qpos = ints({-int32_t(skip) - 5, last - 400, last});
  struct Case {
    AttentionMask mask;
    int window;
    bool cache;
  };
  for (const Case& cs :
       {Case{AttentionMask::kNone, 0, true}, Case{AttentionMask::kCausalWindow, 0, true},
        Case{AttentionMask::kCausalWindow, 700, false}, Case{AttentionMask::kCommittedWindow, 300, true}}) {
    OpCall attn;
    attn.kind = OpKind::kAttention;
    attn.in = {&q, &k, &v, &qpos, &kpos};
    if (cs.cache) {
      attn.in.insert(attn.in.end(), {&ck, &cv, &cpos});
      attn.attrs.skip_rows = skip;
    }
    attn.attrs.mask = cs.mask;
    attn.attrs.window = cs.window;
    attn.attrs.first_canvas_pos = last - 200;
    Tensor got;
    attn.out = {&got};
    Executor(cl).run(attn);
    got.ensure_host();
    std::vector<Tensor> want(1);
    run_reference(attn, want);
    const std::string what = "mask " + std::to_string(int(cs.mask)) + " window " + std::to_string(cs.window);
    expect_near(want[0], got, 1e-4, what);
    if (cs.mask == AttentionMask::kCausalWindow) {  // query 0 precedes every key: it sees none
      for (int64_t j = 0; j < Hq * d; ++j) ASSERT_EQ(got.f[size_t(j)], 0.0f) << what << " at " << j;
    }
  }
}

// Experts whose projection rows are equal have equal probabilities: the
// top-k takes the lower index first, as the reference (and torch.topk) does.
// The weights are in three dtypes (scale f16, projection bf16, per-expert
// scale f32), and both outputs stay on the device.
TEST(OpenClRouter, BreaksTiesByTheLowerIndex) {
  REQUIRE_OPENCL_BACKEND(cl);
  const int64_t M = 3, H = 300, E = 7;
  Rng rng(13);
  Tensor x = uniform_tensor({M, H}, rng, -2, 2);
  std::vector<float> row_a = uniform_values(H, rng, -1, 1), row_b = uniform_values(H, rng, -1, 1);
  std::vector<float> row_c = uniform_values(H, rng, -1, 1);
  // Experts 1, 3 and 6 share row a, experts 0 and 4 row b; 2 and 5 are row c.
  const std::vector<const std::vector<float>*> rows = {&row_b, &row_a, &row_c, &row_a, &row_b, &row_c, &row_a};
  std::vector<uint16_t> proj(size_t(E * H));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h) proj[size_t(e * H + h)] = f32_to_bf16((*rows[size_t(e)])[size_t(h)]);
  std::vector<uint16_t> scale(static_cast<size_t>(H));
  const std::vector<float> scale_f = uniform_values(H, rng, 0.5f, 1.5f);
  for (int64_t h = 0; h < H; ++h) scale[size_t(h)] = f32_to_f16(scale_f[size_t(h)]);
  const std::vector<float> pes = uniform_values(E, rng, 0.5f, 2.0f);
  WeightRef w_scale{"router.scale", DType::kF16, {H}, scale.data(), nullptr};
  WeightRef w_proj{"router.proj", DType::kBF16, {E, H}, proj.data(), nullptr};
  WeightRef w_pes{"router.per_expert_scale", DType::kF32, {E}, pes.data(), nullptr};
  for (int top_k : {1, 3, 5, 7}) {
    OpCall r;
    r.kind = OpKind::kRouterTopk;
    r.in = {&x};
    r.w = {&w_scale, &w_proj, &w_pes};
    r.attrs.eps = 1e-6f;
    r.attrs.top_k = top_k;
    Tensor idx, wts;
    r.out = {&idx, &wts};
    Executor(cl).run(r);
    EXPECT_TRUE(idx.host_stale && wts.host_stale) << "both outputs stay on the device";
    ensure_host({&idx, &wts});
    std::vector<Tensor> want(2);
    run_reference(r, want);
    ASSERT_EQ(want[0].i, idx.i) << "top_k " << top_k;
    expect_near(want[1], wts, 1e-4, "router weights, top_k " + std::to_string(top_k));
    // The expected order from the construction: the groups by their logit
    // (computed here in double; the three rows' logits are far apart), each
    // group's experts in ascending index order.
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x.f.data() + m * H;
      double ss = 0;
      for (int64_t h = 0; h < H; ++h) ss += double(xr[h]) * xr[h];
      const double inv = 1.0 / std::sqrt(ss / double(H) + 1e-6);
      auto logit = [&](const std::vector<float>* row) {
        double s = 0;
        for (int64_t h = 0; h < H; ++h)
          s +=
              double(xr[h]) * inv * f16_to_f32(scale[size_t(h)]) / std::sqrt(double(H)) * round_bf16((*row)[size_t(h)]);
        return s;
      };
      std::vector<const std::vector<float>*> groups = {&row_a, &row_b, &row_c};
      std::sort(groups.begin(), groups.end(), [&](auto* a, auto* b) { return logit(a) > logit(b); });
      std::vector<int32_t> expected;
      for (const std::vector<float>* g : groups)
        for (int32_t e = 0; e < int32_t(E); ++e)
          if (rows[size_t(e)] == g) expected.push_back(e);
      expected.resize(size_t(top_k));
      EXPECT_EQ(std::vector<int32_t>(idx.i.begin() + m * top_k, idx.i.begin() + (m + 1) * top_k), expected)
          << "row " << m << ", top_k " << top_k;
    }
  }
}

// Logits that an earlier op left on the device (a product), a vocabulary
// longer than a work-group and not a multiple of the product's tile, an f16
// table, in an fp32 and a bf16 run.
TEST(OpenClSoftEmbedding, ReadsDeviceLogitsOverALongVocabulary) {
  REQUIRE_OPENCL_BACKEND(cl);
  const int64_t M = 5, K = 24, V = 1003, H = 70;
  Rng rng(14);
  Tensor hidden = uniform_tensor({M, K}, rng, -1, 1);
  const std::vector<float> head = uniform_values(V * K, rng, -1, 1);
  WeightRef w_head{"lm_head", DType::kF32, {V, K}, head.data(), nullptr};
  std::vector<uint16_t> table(size_t(V * H));
  const std::vector<float> table_f = uniform_values(V * H, rng, -1, 1);
  for (size_t i = 0; i < table.size(); ++i) table[i] = f32_to_f16(table_f[i]);
  WeightRef w_table{"embed_tokens", DType::kF16, {V, H}, table.data(), nullptr};
  Tensor logits;
  OpCall lin;
  lin.kind = OpKind::kLinear;
  lin.in = {&hidden};
  lin.w = {&w_head};
  lin.out = {&logits};
  Executor(cl).run(lin);
  ASSERT_TRUE(logits.host_stale);
  for (bool bf16_run : {false, true}) {
    OpCall se;
    se.kind = OpKind::kSoftEmbedding;
    se.in = {&logits};
    se.w = {&w_table};
    se.attrs.scale = 2.5f;
    se.attrs.round_to_bf16 = bf16_run;
    Tensor got;
    se.out = {&got};
    cl.reset_traffic();
    Executor(cl).run(se);
    EXPECT_EQ(cl.device_traffic()->h2d_bytes, 0) << "the logits are read on the device";
    got.ensure_host();
    std::vector<Tensor> want(1);
    run_reference(se, want);  // the logits' host copy, brought back by the reference's run
    expect_near(want[0], got, bf16_run ? 1e-2 : 1e-4, bf16_run ? "bf16 run" : "fp32 run");
  }
}

#else

TEST(OpenClAttention, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend (DGEMMA_OPENCL)"; }

#endif

}  // namespace
}  // namespace dgemma
