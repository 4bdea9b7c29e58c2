// Device time per op on the OpenCL backend (Backend::set_profiling,
// docs/opencl.md §1): every op run while profiling is on comes back from
// take_profile(), in order, with its kind and layer and the device time of
// its launches; nothing is recorded while it is off.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/op.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

TEST(OpenClProfile, TimesEachOpInOrder) {
  std::string why_none;
  const std::vector<OpenClDeviceInfo> devices = opencl_devices(&why_none);
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device here: " << why_none;
  OpenClBackend cl(OpenClBackendOptions{devices.back().platform, devices.back().device, false});

  const int64_t M = 64, K = 256, N = 192;
  Rng rng(3);
  Tensor x = uniform_tensor({M, K}, rng, -1, 1);
  std::vector<float> wf = uniform_values(N * K, rng, -0.5f, 0.5f), nf = uniform_values(K, rng, 0.5f, 1.5f);
  WeightRef norm_w{"norm", DType::kF32, {K}, nf.data(), nullptr};
  WeightRef proj_w{"proj", DType::kF32, {N, K}, wf.data(), nullptr};
  auto run_chain = [&](Tensor& normed, Tensor& out, Tensor& joined) {
    Executor ex(cl);
    OpCall norm;
    norm.kind = OpKind::kRmsNorm;
    norm.layer = 3;
    norm.in = {&x};
    norm.w = {&norm_w};
    norm.out = {&normed};
    norm.attrs.eps = 1e-6f;
    ex.run(norm);
    OpCall proj;
    proj.kind = OpKind::kLinear;
    proj.layer = 4;
    proj.in = {&normed};
    proj.w = {&proj_w};
    proj.out = {&out};
    ex.run(proj);
    OpCall cat;  // copies, not kernels: timed too
    cat.kind = OpKind::kConcatRows;
    cat.in = {&out, &out};
    cat.out = {&joined};
    ex.run(cat);
  };

  ASSERT_TRUE(cl.set_profiling(true));
  Tensor a, b, c;
  run_chain(a, b, c);
  const std::vector<OpDeviceTime> times = cl.take_profile();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].kind, OpKind::kRmsNorm);
  EXPECT_EQ(times[0].layer, 3);
  EXPECT_EQ(times[1].kind, OpKind::kLinear);
  EXPECT_EQ(times[1].layer, 4);
  EXPECT_EQ(times[2].kind, OpKind::kConcatRows);
  EXPECT_EQ(times[2].layer, -1);
  for (const OpDeviceTime& t : times) {
    EXPECT_GE(t.seconds, 0.0) << op_name(t.kind);
    EXPECT_LT(t.seconds, 60.0) << op_name(t.kind);
  }
  // A 64×256×192 product takes more than a nanosecond on any device.
  EXPECT_GT(times[1].seconds, 0.0);
  EXPECT_TRUE(cl.take_profile().empty()) << "a take returns each op once";

  ASSERT_TRUE(cl.set_profiling(false));
  Tensor d, e, f;
  run_chain(d, e, f);
  EXPECT_TRUE(cl.take_profile().empty()) << "nothing is timed while profiling is off";
}

#else
TEST(OpenClProfile, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend"; }
#endif

}  // namespace
}  // namespace dgemma
