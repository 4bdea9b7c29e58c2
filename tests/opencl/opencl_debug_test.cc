// The OpenCL backend's debug mode (docs/opencl.md §4): guard zones around
// every buffer of an op, checked after it; outputs that hold NaN until a
// kernel writes them; an output holding NaN or an infinity fails the op. The
// faults come from test-only kernel programs (ClRuntime's `source`) that
// stand in for the real `add` kernel: one writes past its output's end, one
// before its start, one writes nothing, one writes an infinity.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "ops/backend.h"
#include "ops/op.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/cl_device_data.h"
#include "backend/opencl/cl_op.h"
#include "backend/opencl/cl_runtime.h"
#include "backend/opencl/cl_weights.h"
#include "backend/opencl/opencl_backend.h"
#include "opencl/opencl_test_support.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

using testing::error_of;

// A program whose `add` has the real kernel's arguments (kernels_rows.cl) and
// the body given.
std::string add_program(const std::string& body) {
  return "__kernel void add(__global const float* a, __global const float* b, __global float* out, int n) {\n"
         "  const int g = get_global_id(0);\n" +
         body + "\n}\n";
}

class OpenClDebug : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const std::vector<OpenClDeviceInfo> devices = opencl_devices(&why);
    if (devices.empty()) GTEST_SKIP() << "no OpenCL device here: " << why;
    device_ = opencl::find_device(devices.back().platform, devices.back().device, devices.back().spec);
    for (int64_t k = 0; k < 2 * 37; ++k) {
      a_.f.push_back(float(k) * 0.5f);
      b_.f.push_back(1.0f - float(k));
    }
    a_.shape = b_.shape = {2, 37};
  }

  // Runs add(a, b) in layer 3's "mlp.residual", decoder pass, step 2, through
  // a runtime built from `source` (nullptr: the real kernels) in the debug
  // mode or not. The output is read back to out_.
  void run_add(const char* source, bool debug, bool device_outputs = false) {
    auto rt = std::make_shared<opencl::ClRuntime>(device_, source);
    rt->debug = debug;
    opencl::WeightCache weights(rt);
    OpCall c;
    c.kind = OpKind::kAdd;
    c.site = "mlp.residual";
    c.layer = 3;
    c.pass = Pass::kDecoder;
    c.step = 2;
    c.in = {&a_, &b_};
    c.out = {&out_};
    c.device_outputs = device_outputs;
    prepare_op(c);
    opencl::ClOp op(rt, weights, c);
    opencl::run_op(op);
    op.finish(debug);
  }

  opencl::ClDevice device_;
  Tensor a_ = Tensor::f32({0}), b_ = Tensor::f32({0}), out_;
};

constexpr const char* kWhere = "op add (mlp.residual) in layer 3, decoder pass, step 2";

TEST_F(OpenClDebug, TheRealKernelsPassTheGuards) {
  run_add(nullptr, true);
  ASSERT_EQ(out_.f.size(), a_.f.size());
  for (size_t k = 0; k < out_.f.size(); ++k) ASSERT_EQ(out_.f[k], a_.f[k] + b_.f[k]) << k;
  // The output's device data is the guarded buffer's usable part, and it
  // carries the guard zones for the next op's check.
  ASSERT_TRUE(out_.device);
  const auto& d = static_cast<const opencl::ClDeviceData&>(*out_.device);
  EXPECT_NE(d.guarded().parent, nullptr);
  EXPECT_EQ(d.guarded().bytes, a_.f.size() * 4);
  EXPECT_GE(d.guarded().guard, 256u);
  // Without the debug mode: a plain buffer.
  run_add(nullptr, false);
  EXPECT_EQ(static_cast<const opencl::ClDeviceData&>(*out_.device).guarded().parent, nullptr);
}

TEST_F(OpenClDebug, AWritePastTheEndNamesTheOpTheOutputAndTheSide) {
  const std::string src = add_program("  if (g < n) out[g] = a[g] + b[g];\n  if (g == 0) out[n + 1] = 42.0f;");
  const std::string e = error_of([&] { run_add(src.c_str(), true); });
  EXPECT_EQ(e, "opencl backend (debug): " + std::string(kWhere) +
                   " wrote past the end of output 0 (bytes 4..7 after it overwritten)");
  // The same kernel outside the debug mode: nothing checks (the write lands
  // in whatever follows the buffer, as on a real device).
  EXPECT_EQ(error_of([&] { run_add(src.c_str(), false); }), "(no error)");
}

TEST_F(OpenClDebug, AWriteBeforeTheStartIsReportedToo) {
  const std::string src = add_program("  if (g < n) out[g] = a[g] + b[g];\n  if (g == 0) out[-1] = 1.0f;");
  const std::string e = error_of([&] { run_add(src.c_str(), true); });
  EXPECT_EQ(e, "opencl backend (debug): " + std::string(kWhere) +
                   " wrote before the start of output 0 (bytes 0..3 before it overwritten)");
}

TEST_F(OpenClDebug, AWriteThroughAnInputIsReported) {
  const std::string src =
      add_program("  if (g < n) out[g] = a[g] + b[g];\n  if (g == 0) ((__global float*)b)[n] = 3.0f;");
  const std::string e = error_of([&] { run_add(src.c_str(), true); });
  EXPECT_EQ(e, "opencl backend (debug): " + std::string(kWhere) +
                   " wrote past the end of input 1 (bytes 0..3 after it overwritten)");
}

TEST_F(OpenClDebug, AnOutputNoKernelWroteHoldsNaN) {
  const std::string src = add_program("  if (g < n / 2) out[g] = a[g] + b[g];");
  const std::string e = error_of([&] { run_add(src.c_str(), true); });
  EXPECT_EQ(e, "opencl backend (debug): output 0 of " + std::string(kWhere) + " holds NaN at element " +
                   std::to_string(a_.f.size() / 2) + " of " + std::to_string(a_.f.size()) +
                   " (no fp32 input holds one: it is born in this op)");
}

TEST_F(OpenClDebug, AnInfinityFromAnInputIsTracedToIt) {
  a_.f[5] = INFINITY;
  const std::string e = error_of([&] { run_add(nullptr, true); });
  EXPECT_EQ(e, "opencl backend (debug): output 0 of " + std::string(kWhere) +
                   " holds an infinity at element 5 of 74 (input 0 already holds one: it comes from an earlier op)");
}

// The spec's debug option reaches the backend's runtime: a chain of the real
// kernels runs there, its intermediate guarded on the device, with the same
// results as without it.
TEST_F(OpenClDebug, TheBackendsDebugOptionGuardsItsOps) {
  OpenClBackendOptions o;
  o.debug = true;
  OpenClBackend cl(o);
  OpenClBackend plain{OpenClBackendOptions{}};
  auto chain = [&](Backend& be) {
    Tensor sum, scaled;
    std::vector<float> s = {0.25f};
    WeightRef w{"s", DType::kF32, {1}, s.data(), nullptr};
    Executor ex(be);
    OpCall add;
    add.kind = OpKind::kAdd;
    add.in = {&a_, &b_};
    add.out = {&sum};
    ex.run(add);
    EXPECT_TRUE(sum.host_stale);
    OpCall scale;
    scale.kind = OpKind::kScale;
    scale.in = {&sum};
    scale.w = {&w};
    scale.out = {&scaled};
    ex.run(scale);
    scaled.ensure_host();
    return scaled.f;
  };
  const std::vector<float> guarded = chain(cl), unguarded = chain(plain);
  ASSERT_EQ(guarded.size(), a_.f.size());
  EXPECT_EQ(guarded, unguarded);
  EXPECT_EQ(guarded[3], (a_.f[3] + b_.f[3]) * 0.25f);
}

#else

TEST(OpenClDebug, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend (DGEMMA_OPENCL)"; }

#endif

}  // namespace
}  // namespace dgemma
