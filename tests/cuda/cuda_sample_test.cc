// The sample op (ops/op.h kSample) on the CUDA backend against the CPU op:
// z bit-identical (IEEE division on both), argmax identical, entropy within
// 1e-6 relative (sums in another order), the inverse-CDF draw identical;
// rows that cannot be sampled are marked, and the marks become the CPU op's
// error. Then generate() on golden A with the sample op on the device: the
// same run as on the CPU, and the same error for a NaN logit. Runs on a GPU
// or on the emulated device of a DGEMMA_CUDA=EMULATE build (see
// cuda_backend_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dgemma/error.h"
#include "generate/generate.h"
#include "generate/sampler.h"
#include "generate/golden_case.h"
#include "generate/sample_paths.h"
#include "model/diffusion_gemma.h"
#include "backend/cpu/cpu_backend.h"
#include "ops/sample_op_support.h"
#include "ops/op.h"
#include "support/test_rng.h"
#include "cpu_model.h"

#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "cuda/require_device.h"
#endif

namespace dgemma {
namespace {

#if !DGEMMA_HAVE_CUDA

TEST(CudaSample, NotBuilt) { GTEST_SKIP() << "this build has no CUDA backend (nvcc not found or DGEMMA_CUDA=OFF)"; }

#else

using testing::bits;
using testing::kNegInf;
using testing::run_sample;
using testing::SampleOut;
using testing::uniforms_tensor;

// Random rows: wide and narrow scales, optional -inf entries, exact ties.
Tensor random_logits(Rng& rng, int64_t M, int64_t V, bool neg_inf) {
  Tensor t = Tensor::f32({M, V});
  for (int64_t r = 0; r < M; ++r) {
    float* row = t.f.data() + r * V;
    for (int64_t v = 0; v < V; ++v) {
      row[v] = r % 3 == 1 ? rng.uniform_real(-0.5f, 0.5f) : rng.uniform_real(-30.f, 30.f);
      if (neg_inf && r % 3 == 2 && rng.uniform_real(0.f, 1.f) < 0.4f) row[v] = kNegInf;
    }
    if (r % 4 == 3 && V > 2) {  // a tie of the maximum
      float mx = -1.0f;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
      row[V / 3] = row[2 * V / 3] = mx + 1.0f;
    }
    row[(r * 5) % V] = std::max(row[(r * 5) % V], -1.0f);
  }
  return t;
}

// u = 0 and u near 1 probe the ends of the inverse CDF. Not u -> 1 itself:
// there the target lies in the rounding slack of the total, where the CPU's
// sequential sum and the device's chunked one may stop at different
// (positive-weight) tail indices: "same tokens up to float ties".
std::vector<double> random_uniforms(Rng& rng, int64_t M) {
  std::vector<double> u(static_cast<size_t>(M));
  for (double& x : u) x = rng.uniform_real(0.0, 1.0);
  if (M > 1) u[1] = 0.0;
  if (M > 2) u[2] = 0.999999;
  return u;
}

void expect_same(const SampleOut& cpu, const SampleOut& gpu) {
  ASSERT_EQ(cpu.z.shape, gpu.z.shape);
  for (size_t e = 0; e < cpu.z.f.size(); ++e) ASSERT_EQ(bits(cpu.z.f[e]), bits(gpu.z.f[e])) << "z element " << e;
  EXPECT_EQ(cpu.argmax.i, gpu.argmax.i);
  EXPECT_EQ(cpu.sample.i, gpu.sample.i);
  for (size_t r = 0; r < cpu.entropy.f.size(); ++r)
    EXPECT_NEAR(gpu.entropy.f[r], cpu.entropy.f[r], 1e-6 * std::max(1.0f, std::fabs(cpu.entropy.f[r]))) << "row " << r;
}

class CudaSample : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    gpu_ = std::make_unique<CudaBackend>(parse_cuda_spec(GetParam()));
  }
  bool debug() const { return parse_cuda_spec(GetParam()).debug; }
  std::unique_ptr<CudaBackend> gpu_;
  CpuBackend cpu_{2};
};

TEST_P(CudaSample, MatchesTheCpuOp) {
  // Debug mode fails any op whose output holds non-finite values (an input
  // -inf gives a -inf in z), so it gets finite rows only.
  const bool neg_inf = !debug();
  const int64_t shapes[][2] = {{1, 1}, {5, 7}, {9, 300}, {7, 4099}, {3, 70000}};
  for (int s = 0; s < 5; ++s) {
    Rng rng(uint32_t(40 + s));
    const int64_t M = shapes[s][0], V = shapes[s][1];
    SCOPED_TRACE(std::string("[") + std::to_string(M) + ", " + std::to_string(V) + "]");
    const Tensor logits = random_logits(rng, M, V, neg_inf);
    const Tensor u = uniforms_tensor(random_uniforms(rng, M));
    const float T = s % 2 ? 0.8f : 0.40833334f;
    expect_same(run_sample(cpu_, logits, u, T), run_sample(*gpu_, logits, u, T));
    // No draw: sample -1, the rest unchanged.
    const Tensor none = Tensor::i32({0, 2});
    const SampleOut nd = run_sample(*gpu_, logits, none, T);
    EXPECT_EQ(nd.sample.i, std::vector<int32_t>(size_t(M), -1));
    expect_same(run_sample(cpu_, logits, none, T), nd);
  }
}

// u -> 1: the target is at (or, by rounding, past) the device's own total;
// the draw is still a positive-weight index (the last one when nothing
// exceeds the target), and deterministic run to run.
TEST_P(CudaSample, DrawAtTheTopOfTheCdfNeverPicksAZeroWeight) {
  const int64_t V = 5000;
  Rng rng(9);
  Tensor logits = uniform_tensor({2, V}, rng, -20.f, 20.f);
  for (int64_t v = V - 10; v < V; ++v) logits.f[size_t(V + v)] = debug() ? -1e30f : kNegInf;  // zero weight
  const Tensor u = uniforms_tensor({std::nextafter(1.0, 0.0), std::nextafter(1.0, 0.0)});
  const SampleOut first = run_sample(*gpu_, logits, u, 0.7f);
  const SampleOut again = run_sample(*gpu_, logits, u, 0.7f);
  EXPECT_EQ(first.sample.i, again.sample.i);
  for (int64_t r = 0; r < 2; ++r) {
    const float* z = first.z.f.data() + r * V;
    const float mx = *std::max_element(z, z + V);
    const int32_t s = first.sample.i[size_t(r)];
    ASSERT_GE(s, 0);
    EXPECT_GT(std::exp(z[s] - mx), 0.0f) << "zero-weight index " << s << " in row " << r;
  }
  EXPECT_LT(first.sample.i[1], V - 10);
}

TEST_P(CudaSample, BadRowsAreMarkedAndReportedAsOnTheCpu) {
  if (debug()) GTEST_SKIP() << "debug mode rejects the non-finite inputs themselves";
  Rng rng(3);
  Tensor logits = uniform_tensor({5, 40}, rng, -5.f, 5.f);
  logits.f[1 * 40 + 33] = std::numeric_limits<float>::infinity();
  logits.f[1 * 40 + 12] = std::nanf("");
  for (int v = 0; v < 40; ++v) logits.f[size_t(3 * 40 + v)] = kNegInf;
  logits.f[4 * 40 + 39] = 3e38f;  // finite, but +inf once divided by T
  const Tensor u = uniforms_tensor({0.5, 0.5, 0.5, 0.5, 0.5});
  const SampleOut o = run_sample(*gpu_, logits, u, 0.5f);
  EXPECT_EQ(o.argmax.i[1], bad_row_mark(12));  // the first bad logit of the row
  EXPECT_EQ(o.argmax.i[3], bad_row_mark(-1));
  EXPECT_EQ(o.argmax.i[4], bad_row_mark(39));
  for (int r : {1, 3, 4}) {
    EXPECT_TRUE(std::isnan(o.entropy.f[size_t(r)])) << r;
    EXPECT_EQ(o.sample.i[size_t(r)], -1) << r;
  }
  for (int r : {0, 2}) EXPECT_GE(o.argmax.i[size_t(r)], 0) << r;
  // The marks name the same row and logit as the CPU op's error, row by row.
  const std::string where = sample_op_where("sample", 4);
  auto cpu_error = [&](const Tensor& x) {
    try {
      run_sample(cpu_, x, u, 0.5f, 4);
    } catch (const BadLogitsRow& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto gpu_error = [&](const Tensor& x) {
    const SampleOut m = run_sample(*gpu_, x, u, 0.5f, 4);
    try {
      throw_marked_row(m.argmax.i, m.z.f.data(), x.dim(1), where);
    } catch (const BadLogitsRow& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Each time the lowest bad row is reported; repaired, the next one is.
  Tensor x = logits;
  const std::pair<int64_t, const char*> expected[] = {
      {1, " row 1: logit 12 is nan"}, {3, " row 3: every logit is -inf"}, {4, " row 4: logit 39 is inf"}};
  for (const auto& [row, reason] : expected) {
    EXPECT_EQ(cpu_error(x), where + reason);
    EXPECT_EQ(gpu_error(x), where + reason);
    for (int v = 0; v < 40; ++v) x.f[size_t(row * 40 + v)] = 0.0f;
  }
  EXPECT_EQ(cpu_error(x), "no error");
  EXPECT_EQ(gpu_error(x), "no error");
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaSample, ::testing::Values("cuda", "cuda:sync", "cuda:debug"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// ---- generate() with the sample op on the device ---------------------------------

GenerationConfig golden_config(bool greedy, int64_t canvases) {
  GenerationConfig c = load_generation_config(testing::golden_a_dir() + "/generation_config.json").config;
  c.max_new_tokens = 16 * canvases;
  c.entropy_bound = 12.0;  // several positions accepted per step
  c.eos_token_ids = {};
  c.greedy = greedy;
  return c;
}

const std::vector<int32_t> kPrompt = {2, 105, 17, 300, 41, 7, 99};

struct DeviceRun {
  GenerationResult result;
  std::unique_ptr<testing::FullRecorder> recorder;
};

// Golden A on the CPU; the sample op on `sampler` (null: the CPU too).
DeviceRun run_golden(Backend* sampler, bool greedy, uint64_t seed) {
  ModelOptions o;
  o.load_threads = 2;
  auto model = test::load_on_cpu(testing::golden_a_dir(), o);
  CpuBackend cpu(2);
  testing::RoutingBackend routing(cpu, sampler);
  model->set_backend(routing);
  DeviceRun r;
  r.recorder = std::make_unique<testing::FullRecorder>(model->canvas_length() * model->vocab_size());
  RandomDraws draws(seed);
  r.result = generate(*model, kPrompt, golden_config(greedy, 3), draws, r.recorder.get());
  EXPECT_EQ(routing.samples, r.result.decoder_forwards);
  return r;
}

// Same decisions and tokens (the seed's run has no near-ties); entropies
// within rounding of the sums.
void expect_same_run(const DeviceRun& cpu, const DeviceRun& gpu) {
  EXPECT_EQ(cpu.result.sequences, gpu.result.sequences);
  EXPECT_EQ(cpu.result.steps_per_canvas, gpu.result.steps_per_canvas);
  EXPECT_EQ(cpu.result.converged, gpu.result.converged);
  ASSERT_EQ(cpu.recorder->steps.size(), gpu.recorder->steps.size());
  for (size_t k = 0; k < cpu.recorder->steps.size(); ++k) {
    const testing::FullStep &a = cpu.recorder->steps[k], &b = gpu.recorder->steps[k];
    SCOPED_TRACE(std::string("step event ") + std::to_string(k));
    EXPECT_EQ(a.canvas_in, b.canvas_in);
    EXPECT_EQ(a.sampled, b.sampled);
    EXPECT_EQ(a.argmax, b.argmax);
    EXPECT_EQ(a.accepted, b.accepted);
    EXPECT_EQ(a.canvas_out, b.canvas_out);
    EXPECT_TRUE(a.processed_logits == b.processed_logits) << "z differs";
    for (size_t i = 0; i < a.entropy.size(); ++i) {
      const float x = std::bit_cast<float>(a.entropy[i]), y = std::bit_cast<float>(b.entropy[i]);
      EXPECT_NEAR(y, x, 1e-6 * std::max(1.0f, std::fabs(x))) << "position " << i;
    }
  }
}

TEST(CudaSampleGenerate, SeededRunMatchesTheCpu) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  expect_same_run(run_golden(nullptr, false, 11), run_golden(&gpu, false, 11));
}

TEST(CudaSampleGenerate, GreedyRunMatchesTheCpu) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  expect_same_run(run_golden(nullptr, true, 5), run_golden(&gpu, true, 5));
}

// A NaN logit: the device marks the row, the model reports it; generate()
// says the same as with the CPU op and as on its host path.
TEST(CudaSampleGenerate, BadRowIsTheSameErrorAsOnTheCpu) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  auto error_with = [](Backend* sampler) {
    ModelOptions o;
    o.load_threads = 2;
    auto model = test::load_on_cpu(testing::golden_a_dir(), o);
    CpuBackend cpu(2);
    testing::RoutingBackend routing(cpu, sampler);
    routing.nan_step = 1;
    routing.nan_row = 9;
    routing.nan_logit = 77;
    model->set_backend(routing);
    RandomDraws draws(1);
    try {
      generate(*model, kPrompt, golden_config(false, 1), draws);
    } catch (const BadLogitsRow& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string want = "generate: canvas 0 step 1 row 9: logit 77 is nan";
  EXPECT_EQ(error_with(nullptr), want);
  EXPECT_EQ(error_with(&gpu), want);
}

// The whole model on the device (every op, sample included; z goes back into
// the next pass's self-conditioning there). Its logits differ from the CPU's
// by rounding, which self-conditioning amplifies step by step (generate/
// recorded_self_conditioning.h), so only the first step, which has no
// self-conditioning, is pinned to the CPU's decisions.
TEST(CudaSampleGenerate, WholeModelOnTheDevice) {
  REQUIRE_CUDA_DEVICE();
  ModelOptions o;
  o.load_threads = 2;
  auto cpu_model = test::load_on_cpu(testing::golden_a_dir(), o);
  auto gpu_model = test::load_on_cpu(testing::golden_a_dir(), o);
  CudaBackend gpu;
  testing::RoutingBackend counting(gpu, nullptr);
  gpu_model->set_backend(counting);
  GenerationConfig config = golden_config(false, 1);
  config.max_denoising_steps = 3;
  config.confidence_threshold = 1e-9;  // never confident: run every step
  const int64_t lv = cpu_model->canvas_length() * cpu_model->vocab_size();
  testing::FullRecorder want(lv), got(lv);
  RandomDraws a(5), b(5);
  generate(*cpu_model, kPrompt, config, a, &want);
  const GenerationResult r = generate(*gpu_model, kPrompt, config, b, &got);
  EXPECT_EQ(r.decoder_forwards, 3);
  EXPECT_EQ(counting.samples, 3);
  ASSERT_EQ(got.steps.size(), 3u);
  ASSERT_EQ(want.steps.size(), 3u);
  const testing::FullStep &x = want.steps[0], &y = got.steps[0];
  EXPECT_EQ(y.argmax, x.argmax);
  EXPECT_EQ(y.sampled, x.sampled);
  EXPECT_EQ(y.accepted, x.accepted);
  EXPECT_EQ(y.canvas_out, x.canvas_out);
  for (size_t i = 0; i < x.entropy.size(); ++i)
    EXPECT_NEAR(std::bit_cast<float>(y.entropy[i]), std::bit_cast<float>(x.entropy[i]), 1e-4) << i;
  for (const testing::FullStep& s : got.steps)
    for (size_t i = 0; i < s.argmax.size(); ++i) EXPECT_GE(s.argmax[i], 0);
}

#endif  // DGEMMA_HAVE_CUDA

}  // namespace
}  // namespace dgemma
