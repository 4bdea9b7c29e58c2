// The OpenCL backend on this machine's OpenCL device (PoCL's CPU device in
// CI; docs/opencl.md §5): device selection and its errors, residency of a
// chain of ops (traffic counts, the host copy against the CPU reference), and
// the refusals. Its ops against the scalar reference are the op catalogue's
// opencl target (tests/ops/op_catalogue_test.cc). Each test makes one backend:
// PoCL builds the kernels with LLVM, from its cache after the first process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "dgemma/error.h"
#include "ops/backend.h"
#include "ops/op.h"
#include "quantize/quantized_weight.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/cl_api.h"
#include "backend/opencl/cl_runtime.h"
#include "backend/opencl/opencl_backend.h"
#include "opencl/opencl_test_support.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

using testing::error_of;

TEST(OpenClSpec, ParsesDevicesAndOptions) {
  const OpenClBackendOptions d = parse_opencl_spec("opencl");
  EXPECT_EQ(d.platform, -1);
  EXPECT_FALSE(d.debug);
  const OpenClBackendOptions o = parse_opencl_spec("opencl:1.2,debug");
  EXPECT_EQ(o.platform, 1);
  EXPECT_EQ(o.device, 2);
  EXPECT_TRUE(o.debug);
  EXPECT_TRUE(parse_opencl_spec(with_device_option("opencl", "sync")).debug);
  EXPECT_EQ(with_device_option("opencl:0.1", "debug"), "opencl:0.1,debug");
  for (const char* bad : {"opencl:", "opencl:x", "opencl:0", "opencl:0.", "opencl:-1.0", "opencl:0.0,fast"})
    EXPECT_NE(error_of([&] { parse_opencl_spec(bad); }).find("backend '" + std::string(bad) + "'"), std::string::npos)
        << bad;
  EXPECT_NE(error_of([] { parse_opencl_spec("opencl:0.0,fast"); }).find("'fast' is neither a device"),
            std::string::npos);
  // The default device: the first GPU, else the first device.
  std::vector<OpenClDeviceInfo> list(3);
  list[0].type = "cpu";
  list[1].type = "accelerator";
  list[2].type = "gpu";
  EXPECT_EQ(&default_opencl_device(list), &list[2]);
  list[2].type = "cpu";
  EXPECT_EQ(&default_opencl_device(list), &list[0]);
  EXPECT_THROW(default_opencl_device({}), Error);
  // OpenCL errors name the call, the code and the op.
  EXPECT_EQ(opencl::cl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_EQ(opencl::cl_error_name(-9999), "CL error -9999");
  EXPECT_EQ(error_of([] { opencl::cl_check(CL_INVALID_KERNEL_ARGS, "clEnqueueNDRangeKernel", "op linear"); }),
            "opencl backend: clEnqueueNDRangeKernel failed with CL_INVALID_KERNEL_ARGS (-52) in op linear");
}

TEST(OpenClDevices, SelectsByIndexAndNamesWhatExists) {
  REQUIRE_OPENCL_DEVICE(devices);
  for (const OpenClDeviceInfo& d : devices) {
    EXPECT_EQ(d.spec, "opencl:" + std::to_string(d.platform) + "." + std::to_string(d.device));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.global_mem_bytes, 0);
    EXPECT_GT(d.compute_units, 0);
    EXPECT_GT(d.max_work_group, 0);
    EXPECT_EQ(d.c_version.rfind("OpenCL C ", 0), 0u) << d.c_version;
  }
  // The last device by its indices, and the default one.
  const OpenClDeviceInfo& last = devices.back();
  std::unique_ptr<Backend> b = make_backend(last.spec + ",debug");
  EXPECT_EQ(b->name(), last.spec);
  EXPECT_TRUE(static_cast<OpenClBackend&>(*b).options().debug);
  // A device that does not exist: the error names the spec and every device there is.
  const std::string bad = "opencl:" + std::to_string(last.platform) + "." + std::to_string(last.device + 7);
  const std::string e = error_of([&] { make_backend(bad); });
  EXPECT_NE(e.find("backend '" + bad + "': OpenCL device"), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  for (const OpenClDeviceInfo& d : devices) EXPECT_NE(e.find(d.spec + " (" + d.name), std::string::npos) << e;
  EXPECT_NE(error_of([] { make_backend("opencl:99.0"); }).find("does not exist"), std::string::npos);

  // A program that does not compile: the error carries the driver's build log,
  // which names what is wrong.
  const opencl::ClDevice dev = opencl::find_device(last.platform, last.device, last.spec);
  const std::string build = error_of([&] {
    opencl::ClRuntime bad_program(dev, "__kernel void broken(__global float* x) { x[0] = no_such_name; }\n");
  });
  EXPECT_NE(build.find("clBuildProgram failed with CL_BUILD_PROGRAM_FAILURE (-11)"), std::string::npos) << build;
  EXPECT_NE(build.find("the driver's build log:"), std::string::npos) << build;
  EXPECT_NE(build.find("no_such_name"), std::string::npos) << build;
}

// rms_norm (bf16 weight) then linear (f32 weight), as the model chains them:
// the norm's output stays on the device and the product reads it there.
TEST(OpenClResidency, AChainKeepsItsIntermediateOnTheDevice) {
  REQUIRE_OPENCL_DEVICE(devices);
  OpenClBackend cl(OpenClBackendOptions{devices.back().platform, devices.back().device, false});
  const int64_t M = 5, K = 70, N = 33;
  Rng rng(7);
  Tensor x = uniform_tensor({M, K}, rng, -2, 2);
  std::vector<float> normf = uniform_values(K, rng, 0.5f, 1.5f), wf = uniform_values(N * K, rng, -0.5f, 0.5f);
  std::vector<uint16_t> norm_bf16(normf.size());
  for (size_t k = 0; k < normf.size(); ++k) norm_bf16[k] = f32_to_bf16(normf[k]);
  WeightRef norm_w{"norm", DType::kBF16, {K}, norm_bf16.data(), nullptr};
  WeightRef proj_w{"proj", DType::kF32, {N, K}, wf.data(), nullptr};

  auto chain = [&](Backend& b, Tensor& normed, Tensor& out) {
    Executor ex(b);
    OpCall norm;
    norm.kind = OpKind::kRmsNorm;
    norm.in = {&x};
    norm.w = {&norm_w};
    norm.out = {&normed};
    norm.attrs.eps = 1e-6f;
    ex.run(norm);
    OpCall proj;
    proj.kind = OpKind::kLinear;
    proj.in = {&normed};
    proj.w = {&proj_w};
    proj.out = {&out};
    ex.run(proj);
  };
  Tensor normed, out;
  chain(cl, normed, out);
  // Both outputs are on the device, the host copies stale.
  EXPECT_TRUE(normed.host_stale);
  EXPECT_TRUE(out.host_stale);
  ASSERT_TRUE(normed.device && out.device);
  EXPECT_EQ(normed.device->owner(), out.device->owner());
  DeviceTraffic t = *cl.device_traffic();
  EXPECT_EQ(t.h2d_bytes, M * K * 4) << "only x goes up: the product reads the norm's output on the device";
  EXPECT_EQ(t.d2h_bytes, 0);
  EXPECT_EQ(t.weight_h2d_bytes, K * 2 + N * K * 4);
  EXPECT_EQ(cl.cached_weight_bytes(), K * 2 + N * K * 4);
  EXPECT_EQ(t.kernel_launches, 2);

  out.ensure_host();
  EXPECT_FALSE(out.host_stale);
  EXPECT_EQ(cl.device_traffic()->d2h_bytes, M * N * 4);

  CpuBackendOptions ro;
  ro.threads = 1;
  ro.isa = CpuIsa::kScalar;
  CpuBackend cpu(ro);
  Tensor want_normed, want;
  chain(cpu, want_normed, want);
  normed.ensure_host();
  auto expect_near_all = [](const Tensor& want, const Tensor& got, const char* what) {
    ASSERT_EQ(want.shape, got.shape) << what;
    double max_ref = 0, max_diff = 0;
    for (size_t k = 0; k < want.f.size(); ++k) {
      max_ref = std::max(max_ref, std::fabs(double(want.f[k])));
      max_diff = std::max(max_diff, std::fabs(double(want.f[k]) - double(got.f[k])));
    }
    EXPECT_GT(max_ref, 0.1) << what;
    EXPECT_LE(max_diff, 1e-5 + 1e-4 * max_ref) << what;
  };
  expect_near_all(want_normed, normed, "rms_norm");
  expect_near_all(want, out, "linear");

  // Again: the weights are cached, and so is x, a small host input whose
  // bytes have not changed: nothing goes up.
  cl.reset_traffic();
  Tensor normed2, out2;
  chain(cl, normed2, out2);
  t = *cl.device_traffic();
  EXPECT_EQ(t.weight_h2d_bytes, 0);
  EXPECT_EQ(t.h2d_bytes, 0) << "x was kept on the device from the first chain";
  // x changed on the host (without host_written): its bytes differ from the
  // kept copy's, so it goes up again, and the result follows the new values.
  x.f[3] += 1.0f;
  cl.reset_traffic();
  Tensor normed3, out3;
  chain(cl, normed3, out3);
  EXPECT_EQ(cl.device_traffic()->h2d_bytes, M * K * 4);
  Tensor want_normed3, want3;
  chain(cpu, want_normed3, want3);
  out3.ensure_host();
  expect_near_all(want3, out3, "linear after x changed");
  x.f[3] -= 1.0f;
  // The output of the device is an input the device reads in place; a host
  // write drops it, and the next op uploads the new host data.
  out2.ensure_host();
  out2.host_written();
  cl.reset_traffic();
  Tensor sum;
  OpCall add;
  add.kind = OpKind::kAdd;
  add.in = {&out2, &out};
  add.out = {&sum};
  Executor(cl).run(add);
  EXPECT_EQ(cl.device_traffic()->h2d_bytes, M * N * 4) << "out2 was written on the host, out is on the device";
  sum.ensure_host();
  for (size_t k = 0; k < sum.f.size(); ++k) ASSERT_EQ(sum.f[k], out.f[k] + out2.f[k]) << k;
}

TEST(OpenClBackend, RefusesWhatItDoesNotRunYet) {
  REQUIRE_OPENCL_DEVICE(devices);
  std::unique_ptr<Backend> cl = make_backend("opencl");
  Tensor x = Tensor::f32({2, 8}), out;
  std::vector<float> wf(4 * 8, 0.25f);
  WeightRef w{"proj", DType::kF32, {4, 8}, wf.data(), nullptr};
  w.quant = std::make_shared<QuantizedWeight>();
  OpCall lin;
  lin.kind = OpKind::kLinear;
  lin.in = {&x};
  lin.w = {&w};
  lin.out = {&out};
  std::string why;
  // A quantized weight whose layout the decoders cannot read (here: empty),
  // and one in an op without a quantized kernel.
  EXPECT_FALSE(cl->supports(lin, &why));
  EXPECT_EQ(why, "weight 'proj': nf4 weight of 0x0 is empty");
  EXPECT_NE(error_of([&] { Executor(*cl).run(lin); }).find("nf4 weight of 0x0 is empty"), std::string::npos);
  OpCall norm;
  norm.kind = OpKind::kRmsNorm;
  norm.in = {&x};
  norm.w = {&w};
  norm.out = {&out};
  EXPECT_FALSE(cl->supports(norm, &why));
  EXPECT_EQ(why,
            "weight 'proj' is quantized: rms_norm does not take quantized weights on OpenCL (linear, embedding, "
            "soft_embedding and moe_experts do)");
  w.quant.reset();
  EXPECT_TRUE(cl->supports(lin, &why));
  w.dtype = DType::kF8_E4M3;
  EXPECT_TRUE(cl->supports(lin, &why)) << why;
  EXPECT_FALSE(cl->supports(norm, &why));
  EXPECT_EQ(why,
            "weight 'proj' is F8_E4M3: the OpenCL backend reads F32, BF16 and F16 weights (and F8_E4M3 in linear and "
            "embedding)");
}

// A plain weight is found again by its address, dtype and shape, but only
// while its data is the one uploaded: another weight made at the address of
// a freed one (here: the same buffer filled anew) goes up again and is used.
TEST(OpenClBackend, AWeightAtAFreedOnesAddressIsUploadedAgain) {
  REQUIRE_OPENCL_DEVICE(devices);
  std::unique_ptr<Backend> cl = make_backend("opencl");
  const int64_t M = 3, K = 40, N = 5;
  Rng rng(5);
  Tensor x = uniform_tensor({M, K}, rng, -1, 1);
  std::vector<float> wf = uniform_values(N * K, rng, -1, 1);
  WeightRef w{"proj", DType::kF32, {N, K}, wf.data(), nullptr};
  auto product = [&](Backend& b) {
    Tensor out;
    OpCall lin;
    lin.kind = OpKind::kLinear;
    lin.in = {&x};
    lin.w = {&w};
    lin.out = {&out};
    Executor(b).run(lin);
    out.ensure_host();
    return out;
  };
  CpuBackendOptions ro;
  ro.threads = 1;
  ro.isa = CpuIsa::kScalar;
  CpuBackend cpu(ro);
  const Tensor first = product(*cl);
  cl->reset_traffic();
  EXPECT_EQ(product(*cl).f, first.f);
  EXPECT_EQ(cl->device_traffic()->weight_h2d_bytes, 0) << "the same weight is not uploaded again";
  const std::vector<float> fresh = uniform_values(N * K, rng, -1, 1);
  std::copy(fresh.begin(), fresh.end(), wf.begin());
  cl->reset_traffic();
  const Tensor second = product(*cl);
  EXPECT_EQ(cl->device_traffic()->weight_h2d_bytes, N * K * 4) << "new data at the old address goes up";
  const Tensor want = product(cpu);
  ASSERT_EQ(want.f.size(), second.f.size());
  for (size_t k = 0; k < want.f.size(); ++k) EXPECT_NEAR(second.f[k], want.f[k], 1e-5) << k;
  EXPECT_NE(second.f, first.f);
}

// Token ids the host holds are checked before the launch, with the CPU's
// error; ids left on the device by an earlier op are not read back for it.
TEST(OpenClBackend, EmbeddingChecksTheIdsTheHostHolds) {
  REQUIRE_OPENCL_DEVICE(devices);
  std::unique_ptr<Backend> cl = make_backend("opencl");
  std::vector<float> table(5 * 3);
  for (size_t k = 0; k < table.size(); ++k) table[k] = float(k);
  WeightRef w{"embed_tokens", DType::kF32, {5, 3}, table.data(), nullptr};
  Tensor ids = Tensor::i32({2}), out;
  ids.i = {4, 5};
  OpCall emb;
  emb.kind = OpKind::kEmbedding;
  emb.in = {&ids};
  emb.w = {&w};
  emb.out = {&out};
  emb.attrs.scale = 2.0f;
  EXPECT_EQ(error_of([&] { Executor(*cl).run(emb); }), "embedding: token id 5 is out of range [0, 5)");
  ids.i = {4, 0};
  Executor(*cl).run(emb);
  out.ensure_host();
  EXPECT_EQ(out.f, (std::vector<float>{24, 26, 28, 0, 2, 4}));
}

#else

TEST(OpenClBackend, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend (DGEMMA_OPENCL)"; }

#endif

}  // namespace
}  // namespace dgemma
