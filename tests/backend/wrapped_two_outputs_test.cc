// The wrapping backends with moe_experts' optional second output (ops/op.h):
// the differential checker hands the target both outputs and compares both
// (a target whose second output alone is off fails on output 1), and the
// injection backend corrupts both.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/differential_backend.h"
#include "backend/inject_backend.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

// x [5, 16], each token routed to 2 of 3 experts, I = 8, F32 experts.
struct Call {
  Tensor x, idx, wts, out, acts;
  std::vector<float> gu, dn;
  WeightRef wgu, wdn;
  OpCall c;

  Call() {
    Rng r(5);
    x = uniform_tensor({5, 16}, r, -1, 1);
    idx = Tensor::i32({5, 2});
    idx.i = distinct_expert_ids(5, 3, 2, r);
    wts = uniform_tensor({5, 2}, r, 0, 1);
    gu = uniform_values(3 * 16 * 16, r, -0.5f, 0.5f);
    dn = uniform_values(3 * 16 * 8, r, -0.5f, 0.5f);
    wgu.name = "experts.gate_up_proj";
    wgu.shape = {3, 16, 16};
    wgu.data = gu.data();
    wdn.name = "experts.down_proj";
    wdn.shape = {3, 16, 8};
    wdn.data = dn.data();
    c.kind = OpKind::kMoeExperts;
    c.layer = 2;
    c.pass = Pass::kDecoder;
    c.step = 1;
    c.in = {&x, &idx, &wts};
    c.w = {&wgu, &wdn};
    c.out = {&out, &acts};
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
};

// The CPU backend, then one element of output 1 moved by `delta`.
class SkewedActs : public Backend {
 public:
  explicit SkewedActs(float delta) : delta_(delta) {}
  std::string name() const override { return "skewed"; }
  void run(const OpCall& call) override {
    cpu_.run(call);
    if (call.out.size() > 1 && call.out[1]->numel() > 0) call.out[1]->f[3] += delta_;
  }

 private:
  CpuBackend cpu_{1};
  float delta_;
};

struct Results : DifferentialListener {
  std::vector<OpComparison> seen;
  void on_begin(int64_t, const OpCall&) override {}
  void on_result(int64_t, const OpCall&, const OpComparison& r) override { seen.push_back(r); }
};

OpComparison compared(Backend& target) {
  Call call;
  CpuBackend reference(1);
  Results results;
  DifferentialBackend diff(reference, target, results, DifferentialOptions{});
  Executor(diff).run(call.c);
  EXPECT_EQ(call.acts.shape, (std::vector<int64_t>{5, 2, 8})) << "the reference's second output";
  EXPECT_EQ(results.seen.size(), 1u);
  return results.seen.empty() ? OpComparison{} : results.seen.front();
}

TEST(WrappedTwoOutputs, TheDifferentialCheckerComparesTheSecondOutput) {
  SkewedActs honest(0.0f), skewed(0.5f);
  const OpComparison ok = compared(honest);
  EXPECT_TRUE(ok.ok) << ok.failure << " on output " << ok.output;
  const OpComparison bad = compared(skewed);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.failure, "value");
  EXPECT_EQ(bad.output, 1);
}

TEST(WrappedTwoOutputs, InjectionCorruptsBothOutputs) {
  Call clean, hit;
  CpuBackend cpu(1);
  Executor(cpu).run(clean.c);
  InjectBackend inject(std::make_unique<CpuBackend>(1), parse_inject_spec("inject:moe_experts:2:decoder:1:value"));
  Executor(inject).run(hit.c);
  EXPECT_TRUE(inject.fired());
  ASSERT_EQ(hit.acts.shape, clean.acts.shape);
  for (size_t k = 0; k < clean.acts.f.size(); ++k) EXPECT_EQ(hit.acts.f[k], clean.acts.f[k] + 1000.0f) << k;
  for (size_t k = 0; k < clean.out.f.size(); ++k) EXPECT_EQ(hit.out.f[k], clean.out.f[k] + 1000.0f) << k;
}

}  // namespace
}  // namespace dgemma
