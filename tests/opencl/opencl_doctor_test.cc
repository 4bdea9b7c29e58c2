// The differential checker with the OpenCL backend underneath
// (docs/placement.md §1.3, docs/opencl.md §4): a fault injected into an
// OpenCL op ("inject:...@opencl:P.D") is named by the checker with its op,
// layer, pass and step, for each fault kind; the OpenCL ops around it agree
// with the CPU reference; `doctor` on golden A agrees op by op, in the plain
// and the debug mode, and names faults injected into the model's OpenCL ops.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/differential_backend.h"
#include "backend/inject_backend.h"
#include "dgemma/error.h"
#include "doctor/doctor.h"
#include "ops/backend.h"
#include "ops/op.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

// The device CI tests on (the last one listed: PoCL's where it is
// installed), or "" with the reason in `why`. Looked up in a child process:
// `doctor` forks its checked run, and an OpenCL driver started in this
// process would not work in the fork (backend_factory.h check_backend_name).
std::string opencl_spec(std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = "pipe failed";
    return "";
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string reason;
    const std::vector<OpenClDeviceInfo> devices = opencl_devices(&reason);
    const std::string line = devices.empty() ? "-" + reason : devices.back().spec;
    _exit(::write(fds[1], line.data(), line.size()) == ssize_t(line.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string line;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) line.append(buf, size_t(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  if (line.empty() || line[0] == '-') {
    *why = line.empty() ? "the device lookup failed" : line.substr(1);
    return "";
  }
  return line;
}

struct Recorded {
  OpKind op;
  int layer;
  Pass pass;
  int step;
  OpComparison result;
};

class Recorder : public DifferentialListener {
 public:
  void on_begin(int64_t, const OpCall&) override {}
  void on_result(int64_t, const OpCall& c, const OpComparison& r) override {
    results.push_back({c.kind, c.layer, c.pass, c.step, r});
  }
  std::vector<Recorded> results;
};

// Two passes of a small layer (norm, two products, the residual add) over
// three layers, through `backend` (the checker).
void run_layers(Backend& backend) {
  Rng rng(11);
  const int64_t M = 6, K = 40, N = 24;
  std::vector<float> norm_w = uniform_values(K, rng, 0.5f, 1.5f), up = uniform_values(N * K, rng, -0.3f, 0.3f),
                     down = uniform_values(K * N, rng, -0.3f, 0.3f);
  WeightRef wn{"norm", DType::kF32, {K}, norm_w.data(), nullptr};
  WeightRef wu{"up", DType::kF32, {N, K}, up.data(), nullptr};
  WeightRef wd{"down", DType::kF32, {K, N}, down.data(), nullptr};
  Executor ex(backend);
  for (Pass pass : {Pass::kEncoder, Pass::kDecoder}) {
    Tensor h = uniform_tensor({M, K}, rng, -1, 1);
    for (int layer = 0; layer < 3; ++layer) {
      auto at = [&](OpCall& c, const char* site) {
        c.site = site;
        c.layer = layer;
        c.pass = pass;
        c.step = pass == Pass::kDecoder ? 1 : 0;
      };
      Tensor normed, mid, out, next;
      OpCall norm;
      norm.kind = OpKind::kRmsNorm;
      norm.in = {&h};
      norm.w = {&wn};
      norm.out = {&normed};
      norm.attrs.eps = 1e-6f;
      at(norm, "norm");
      ex.run(norm);
      OpCall a;
      a.kind = OpKind::kLinear;
      a.in = {&normed};
      a.w = {&wu};
      a.out = {&mid};
      at(a, "mlp.up_proj");
      ex.run(a);
      OpCall b;
      b.kind = OpKind::kLinear;
      b.in = {&mid};
      b.w = {&wd};
      b.out = {&out};
      at(b, "mlp.down_proj");
      ex.run(b);
      OpCall add;
      add.kind = OpKind::kAdd;
      add.in = {&h, &out};
      add.out = {&next};
      at(add, "residual");
      ex.run(add);
      h = next;
    }
  }
}

class OpenClInjection : public ::testing::TestWithParam<const char*> {};

TEST_P(OpenClInjection, TheCheckerNamesTheFaultyOpenClOp) {
  std::string why;
  const std::string device = opencl_spec(&why);
  if (device.empty()) GTEST_SKIP() << "no OpenCL device here: " << why;
  const std::string kind = GetParam();
  const std::string spec = "inject:linear:1:decoder:1:" + kind + ":mlp.down_proj@" + device;
  std::unique_ptr<Backend> target = make_backend(spec, 1);
  EXPECT_EQ(target->name(), "inject(" + device + ")");
  std::unique_ptr<Backend> reference = make_cpu_backend(1);
  Recorder rec;
  DifferentialBackend diff(*reference, *target, rec, DifferentialOptions{});
  run_layers(diff);
  ASSERT_EQ(rec.results.size(), 2u * 3 * 4);
  int failures = 0;
  for (const Recorded& r : rec.results) {
    // Decoder pass, layer 1, its second product (after the encoder's 3 x 4 ops).
    const bool injected = &r == &rec.results[4 * 3 + 4 * 1 + 2];
    if (injected) {
      EXPECT_EQ(r.op, OpKind::kLinear);
    }
    if (!injected) {
      EXPECT_TRUE(r.result.ok) << op_name(r.op) << " layer " << r.layer << " " << pass_name(r.pass) << ": "
                               << r.result.failure << " " << r.result.message;
      continue;
    }
    ++failures;
    EXPECT_FALSE(r.result.ok);
    EXPECT_EQ(r.result.failure, kind);
  }
  EXPECT_EQ(failures, 1);
  EXPECT_TRUE(static_cast<InjectBackend&>(*target).fired());
}

INSTANTIATE_TEST_SUITE_P(Kinds, OpenClInjection, ::testing::Values("value", "nan", "oob"));

TEST(OpenClInjectionSpec, TheBackendAfterTheAt) {
  EXPECT_EQ(parse_inject_spec("inject:rope:0:encoder:0:nan").inner, "cpu");
  const InjectSpec s = parse_inject_spec("inject:linear:2:decoder:1:value:self_attn.q_proj@opencl:0.0,debug");
  EXPECT_EQ(s.inner, "opencl:0.0,debug");
  EXPECT_EQ(s.site, "self_attn.q_proj");
  EXPECT_EQ(s.layer, 2);
  for (const char* bad : {"inject:add:0:encoder:0:value@", "inject:add:0:encoder:0:value@inject:add:0:encoder:0:nan"})
    EXPECT_THROW(parse_inject_spec(bad), Error) << bad;
  // The inner backend's own errors come through.
  EXPECT_THROW(make_backend("inject:add:0:encoder:0:value@opencl:99.0"), Error);
  EXPECT_THROW(check_backend_name("inject:add:0:encoder:0:value@opencl:x"), Error);
  check_backend_name("inject:add:0:encoder:0:value@opencl:99.0");  // parsed only: no device looked up
}

// The doctor forks its checked run, which cannot use OpenCL once this
// process started a driver: ctest runs each test in a process of its own.
#define REQUIRE_FRESH_PROCESS()                                                                               \
  if (opencl_started_in_this_process())                                                                       \
  GTEST_SKIP() << "an earlier test of this process started OpenCL, which a forked doctor cannot use; run it " \
                  "alone (--gtest_filter), as ctest does"

TEST(OpenClDoctor, GoldenAAgreesOpByOp) {
  REQUIRE_FRESH_PROCESS();
  std::string why;
  const std::string device = opencl_spec(&why);
  if (device.empty()) GTEST_SKIP() << "no OpenCL device here: " << why;
  for (const std::string& spec : {device, device + ",debug"}) {
    DoctorOptions o;
    o.model_dir = kGolden;
    o.backend = spec;
    o.threads = 1;
    o.steps = 2;  // the second step self-conditions: soft_embedding
    const DoctorReport r = run_doctor(o);
    EXPECT_EQ(r.child_status, "exited 0") << spec;
    EXPECT_FALSE(r.first_failure.has_value())
        << spec << ": " << r.first_failure->op << " layer " << r.first_failure->layer << " " << r.first_failure->kind
        << " " << r.first_failure->message;
    EXPECT_EQ(r.ops_unsupported, 0) << spec;
    // Every op of the vocabulary ran on OpenCL and was compared: golden A has
    // a vision tower, so the doctor's prompt carries a picture (docs/model.md §7).
    EXPECT_EQ(int(r.per_op.size()), kNumOpKinds) << spec;
    for (const auto& [op, st] : r.per_op) EXPECT_GT(st.count, 0) << spec << " " << op;
  }
}

TEST(OpenClDoctor, NamesAFaultInjectedIntoAnOpenClOpOfTheModel) {
  REQUIRE_FRESH_PROCESS();
  std::string why;
  const std::string device = opencl_spec(&why);
  if (device.empty()) GTEST_SKIP() << "no OpenCL device here: " << why;
  // A product, an attention and the experts, each with its own fault kind.
  struct Case {
    const char* spec;
    const char *op, *site;
    int layer;
    const char* pass;
    int step;
    const char* kind;
  };
  for (const Case& c :
       {Case{"inject:linear:0:encoder:0:value:self_attn.k_proj", "linear", "self_attn.k_proj", 0, "encoder", 0,
             "value"},
        Case{"inject:attention:1:decoder:1:nan", "attention", "self_attn.attention", 1, "decoder", 1, "nan"},
        Case{"inject:moe_experts:3:decoder:0:oob", "moe_experts", "", 3, "decoder", 0, "oob"}}) {
    DoctorOptions o;
    o.model_dir = kGolden;
    o.backend = std::string(c.spec) + "@" + device;
    o.threads = 1;
    o.steps = 2;
    const DoctorReport r = run_doctor(o);
    ASSERT_TRUE(r.first_failure.has_value()) << o.backend;
    const OpFailure& f = *r.first_failure;
    EXPECT_EQ(f.op, c.op) << o.backend;
    if (*c.site) {
      EXPECT_EQ(f.site, c.site) << o.backend;
    }
    EXPECT_EQ(f.layer, c.layer) << o.backend;
    EXPECT_EQ(f.pass, c.pass) << o.backend;
    EXPECT_EQ(f.step, c.step) << o.backend;
    EXPECT_EQ(f.kind, c.kind) << o.backend;
  }
}

// Once this process has started OpenCL, the doctor says why it cannot check
// an OpenCL target rather than hanging in its child.
TEST(OpenClDoctor, RefusesOnceThisProcessStartedOpenCl) {
  std::string why;
  if (opencl_devices(&why).empty()) GTEST_SKIP() << "no OpenCL device here: " << why;
  ASSERT_TRUE(opencl_started_in_this_process());
  DoctorOptions o;
  o.model_dir = kGolden;
  for (const char* spec : {"opencl", "inject:add:0:encoder:0:value@opencl:0.0"}) {
    o.backend = spec;
    try {
      run_doctor(o);
      ADD_FAILURE() << spec << ": the doctor ran";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "doctor: --backend " + std::string(spec) +
                                           ": this process has already started an OpenCL driver, which does not "
                                           "work in the forked child that runs the check; run the doctor from a "
                                           "process that has not used OpenCL");
    }
  }
  o.backend = "cpu";  // other targets are not affected
  o.steps = 1;
  o.threads = 1;
  EXPECT_FALSE(run_doctor(o).first_failure.has_value());
}

#else

TEST(OpenClInjection, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend (DGEMMA_OPENCL)"; }

#endif

}  // namespace
}  // namespace dgemma
