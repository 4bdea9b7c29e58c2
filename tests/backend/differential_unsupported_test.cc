// The differential checker and an op its target refuses (docs/placement.md
// §1.3 "Ops the target does not run"): reported as `unsupported` with the
// target's reason, never run on the target, and the ops after it still
// compared on the reference's outputs.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/differential_backend.h"
#include "ops/backend.h"
#include "ops/op.h"

namespace dgemma {
namespace {

// The CPU backend, refusing add.
class NoAdd : public Backend {
 public:
  std::string name() const override { return "no-add"; }
  void run(const OpCall& c) override {
    ++runs[op_name(c.kind)];
    inner_->run(c);
  }
  bool supports(const OpCall& c, std::string* why) const override {
    if (c.kind != OpKind::kAdd) return true;
    if (why) *why = "add is refused here";
    return false;
  }
  std::map<std::string_view, int> runs;

 private:
  std::unique_ptr<Backend> inner_ = make_cpu_backend(1);
};

class Recorder : public DifferentialListener {
 public:
  void on_begin(int64_t, const OpCall&) override {}
  void on_result(int64_t, const OpCall& c, const OpComparison& r) override { results.emplace_back(c.kind, r); }
  std::vector<std::pair<OpKind, OpComparison>> results;
};

TEST(DifferentialBackend, AnOpTheTargetRefusesIsUnsupported) {
  std::unique_ptr<Backend> reference = make_cpu_backend(1);
  NoAdd target;
  Recorder rec;
  DifferentialBackend diff(*reference, target, rec, DifferentialOptions{});
  Tensor a = Tensor::f32({2, 3}), b = Tensor::f32({2, 3}), sum, scaled;
  for (int k = 0; k < 6; ++k) {
    a.f[size_t(k)] = float(k);
    b.f[size_t(k)] = 0.5f;
  }
  std::vector<float> s = {2.0f};
  WeightRef w{"s", DType::kF32, {1}, s.data(), nullptr};
  Executor ex(diff);
  OpCall add;
  add.kind = OpKind::kAdd;
  add.in = {&a, &b};
  add.out = {&sum};
  ex.run(add);
  OpCall scale;
  scale.kind = OpKind::kScale;
  scale.in = {&sum};
  scale.w = {&w};
  scale.out = {&scaled};
  ex.run(scale);

  ASSERT_EQ(rec.results.size(), 2u);
  EXPECT_EQ(rec.results[0].first, OpKind::kAdd);
  EXPECT_FALSE(rec.results[0].second.ok);
  EXPECT_EQ(rec.results[0].second.failure, "unsupported");
  EXPECT_EQ(rec.results[0].second.message, "no-add does not run this op: add is refused here");
  EXPECT_EQ(target.runs["add"], 0) << "a refused op never reaches the target";
  // The model goes on with the reference's sum: the scale after it agrees.
  EXPECT_EQ(sum.f[5], 5.5f);
  EXPECT_EQ(rec.results[1].first, OpKind::kScale);
  EXPECT_TRUE(rec.results[1].second.ok) << rec.results[1].second.failure;
  EXPECT_EQ(target.runs["scale"], 1);
  EXPECT_EQ(scaled.f[5], 11.0f);
}

}  // namespace
}  // namespace dgemma
