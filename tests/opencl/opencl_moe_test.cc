// The routed experts (ops/op.h kMoeExperts) on the OpenCL backend
// (docs/opencl.md §3): the routing left on the device by the op before is
// grouped there and never read back (traffic counts), with both outputs equal
// to the CPU's scalar reference, experts with several row tiles, a repeated
// expert, and an index out of range on the device making its token's row NaN.
// The catalogue's rows (tests/ops/op_catalogue_test.cc) cover the dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "ops/backend.h"
#include "ops/op.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#include "opencl/opencl_test_support.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

// One MoE layer's inputs: x, the routing in two parts of rows (as two
// producers would leave it), bf16 expert weights.
struct Layer {
  int64_t M, H, I, E, k;
  Tensor x, idx_a, idx_b, wts_a, wts_b;
  std::vector<uint16_t> gu, down;
  WeightRef gu_w, down_w;

  Layer(int64_t M_, int64_t H_, int64_t I_, int64_t E_, int64_t k_, uint32_t seed) : M(M_), H(H_), I(I_), E(E_), k(k_) {
    Rng rng(seed);
    x = uniform_tensor({M, H}, rng, -1, 1);
    const int64_t Ma = M / 2;
    idx_a = Tensor::i32({Ma, k});
    idx_b = Tensor::i32({M - Ma, k});
    wts_a = uniform_tensor({Ma, k}, rng, 0, 1);
    wts_b = uniform_tensor({M - Ma, k}, rng, 0, 1);
    for (int64_t m = 0; m < M; ++m) {  // k distinct experts, in no particular order
      std::vector<int32_t> all(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) all[size_t(e)] = int32_t(e);
      for (int64_t j = 0; j < k; ++j) std::swap(all[size_t(j)], all[size_t(rng.uniform_int(j, E - 1))]);
      int32_t* row = (m < Ma ? idx_a.i.data() + m * k : idx_b.i.data() + (m - Ma) * k);
      std::copy(all.begin(), all.begin() + k, row);
    }
    idx_a.i[1] = idx_a.i[0];  // token 0 routed twice to one expert (the op allows it)
    gu.resize(size_t(E * 2 * I * H));
    down.resize(size_t(E * H * I));
    for (uint16_t& v : gu) v = f32_to_bf16(rng.uniform_real(-0.5f, 0.5f));
    for (uint16_t& v : down) v = f32_to_bf16(rng.uniform_real(-0.5f, 0.5f));
    gu_w = WeightRef{"experts.gate_up_proj", DType::kBF16, {E, 2 * I, H}, gu.data(), nullptr};
    down_w = WeightRef{"experts.down_proj", DType::kBF16, {E, H, I}, down.data(), nullptr};
  }

  // The routing's host copies, whole.
  Tensor idx() const {
    Tensor t = Tensor::i32({M, k});
    std::copy(idx_a.i.begin(), idx_a.i.end(), t.i.begin());
    std::copy(idx_b.i.begin(), idx_b.i.end(), t.i.begin() + idx_a.numel());
    return t;
  }
  Tensor wts() const {
    Tensor t = Tensor::f32({M, k});
    std::copy(wts_a.f.begin(), wts_a.f.end(), t.f.begin());
    std::copy(wts_b.f.begin(), wts_b.f.end(), t.f.begin() + wts_a.numel());
    return t;
  }

  void run_experts(Executor& ex, const Tensor& idx, const Tensor& wts, Tensor& out, Tensor& acts) const {
    OpCall c;
    c.kind = OpKind::kMoeExperts;
    c.site = "experts";
    c.layer = 0;
    c.in = {&x, &idx, &wts};
    c.w = {&gu_w, &down_w};
    c.out = {&out, &acts};
    ex.run(c);
  }

  // The CPU's scalar reference on the whole routing.
  void reference(Tensor& out, Tensor& acts, const Tensor& idx) const {
    CpuBackendOptions o;
    o.threads = 1;
    o.isa = CpuIsa::kScalar;
    CpuBackend cpu(o);
    Executor ex(cpu);
    const Tensor w = wts();
    run_experts(ex, idx, w, out, acts);
  }
};

// The concatenation of two parts of the routing on the device: its output
// stays there, as a router's would.
void concat_on_device(Executor& ex, const Tensor& a, const Tensor& b, Tensor& out) {
  OpCall c;
  c.kind = OpKind::kConcatRows;
  c.in = {&a, &b};
  c.out = {&out};
  ex.run(c);
  ASSERT_TRUE(out.host_stale && out.device);
}

// Per row of `want` (or only the rows `rows_to_check` marks), the largest
// difference relative to the row's largest value.
void expect_close(const Tensor& want, const Tensor& got, int64_t row_len, const char* what,
                  const std::vector<bool>& skip_rows = {}) {
  ASSERT_EQ(want.shape, got.shape) << what;
  double max_ref = 0, max_diff = 0;
  for (size_t q = 0; q < want.f.size(); ++q) {
    const size_t row = q / size_t(row_len);
    if (row < skip_rows.size() && skip_rows[row]) continue;
    ASSERT_FALSE(std::isnan(got.f[q])) << what << " element " << q;
    max_ref = std::max(max_ref, std::fabs(double(want.f[q])));
    max_diff = std::max(max_diff, std::fabs(double(want.f[q]) - double(got.f[q])));
  }
  EXPECT_GT(max_ref, 0.01) << what;
  EXPECT_LE(max_diff, 1e-6 * max_ref) << what;
}

// M = 70 with E = 4 gives each expert several row tiles; M = 5 with E = 8
// leaves experts without rows.
TEST(OpenClMoe, RoutingLeftOnTheDeviceIsGroupedThereAndNeverReadBack) {
  std::unique_ptr<OpenClBackend> cl = testing::make_test_backend();
  if (!cl) GTEST_SKIP() << "no OpenCL device here";
  struct Shape {
    int64_t M, H, I, E, k;
  };
  for (const Shape s : {Shape{70, 40, 24, 4, 2}, Shape{5, 33, 20, 8, 3}, Shape{33, 64, 36, 6, 4}}) {
    const std::string what = "M " + std::to_string(s.M) + " E " + std::to_string(s.E);
    const Layer L(s.M, s.H, s.I, s.E, s.k, uint32_t(s.M * 100 + s.E));
    Executor ex(*cl);
    Tensor idx, wts, out, acts;
    concat_on_device(ex, L.idx_a, L.idx_b, idx);
    concat_on_device(ex, L.wts_a, L.wts_b, wts);
    cl->release_weight_copies();
    cl->reset_traffic();
    L.run_experts(ex, idx, wts, out, acts);
    const DeviceTraffic t = *cl->device_traffic();
    EXPECT_EQ(t.d2h_bytes, 0) << what << ": nothing read back";
    EXPECT_EQ(t.h2d_bytes, s.M * s.H * 4) << what << ": only x goes up, the routing is read where it lies";
    EXPECT_EQ(t.weight_h2d_bytes, (s.E * 2 * s.I * s.H + s.E * s.H * s.I) * 2) << what;
    EXPECT_EQ(t.kernel_launches, 5) << what << ": route, gate/up, down, combine, slot activations";
    EXPECT_TRUE(out.host_stale && acts.host_stale) << what;

    Tensor want, want_acts;
    L.reference(want, want_acts, L.idx());
    ensure_host({&out, &acts});
    expect_close(want, out, s.H, ("output, " + what).c_str());
    expect_close(want_acts, acts, s.I, ("activations, " + what).c_str());
  }
}

// An index out of range cannot be checked on the host while it lies on the
// device: its slot gets no row, the token's output row and that slot's
// activations are NaN, and the other tokens are computed as usual.
TEST(OpenClMoe, AnIndexOutOfRangeOnTheDeviceMakesItsTokenNaN) {
  std::unique_ptr<OpenClBackend> cl = testing::make_test_backend();
  if (!cl) GTEST_SKIP() << "no OpenCL device here";
  Layer L(9, 24, 16, 5, 2, 77);
  const Tensor valid = L.idx();
  L.idx_b.i[3] = int32_t(L.E);  // token Ma + 1, slot 1
  const int64_t bad_token = L.M / 2 + 1;
  Executor ex(*cl);
  Tensor idx, wts, out, acts;
  concat_on_device(ex, L.idx_a, L.idx_b, idx);
  concat_on_device(ex, L.wts_a, L.wts_b, wts);
  L.run_experts(ex, idx, wts, out, acts);
  ensure_host({&out, &acts});
  for (int64_t h = 0; h < L.H; ++h) EXPECT_TRUE(std::isnan(out.f[size_t(bad_token * L.H + h)])) << h;
  for (int64_t i = 0; i < L.I; ++i) {
    EXPECT_TRUE(std::isnan(acts.f[size_t((bad_token * L.k + 1) * L.I + i)])) << i;
    EXPECT_FALSE(std::isnan(acts.f[size_t((bad_token * L.k + 0) * L.I + i)])) << i;
  }
  Tensor want, want_acts;
  L.reference(want, want_acts, valid);  // the other tokens' rows do not depend on it
  std::vector<bool> skip(static_cast<size_t>(L.M), false), skip_slots(static_cast<size_t>(L.M * L.k), false);
  skip[size_t(bad_token)] = true;
  skip_slots[size_t(bad_token * L.k + 1)] = true;
  expect_close(want, out, L.H, "other tokens", skip);
  expect_close(want_acts, acts, L.I, "other slots", skip_slots);
}

#else

TEST(OpenClMoe, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend (DGEMMA_OPENCL)"; }

#endif

}  // namespace
}  // namespace dgemma
