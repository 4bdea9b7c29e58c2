// The sample op (ops/op.h kSample) on the OpenCL backend against the CPU op
// (docs/opencl.md §3): the processed logits, the argmax, the entropy and the
// draw bit for bit, over many seeds, steps, positions and temperatures with
// the uniforms of generate()'s Philox draws (generate/draws.h RandomDraws);
// the ends of the CDF; rows that cannot be sampled marked and reported with
// the CPU's error; outputs left on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "dgemma/error.h"
#include "generate/draws.h"
#include "ops/backend.h"
#include "ops/op.h"
#include "ops/row_sampling.h"
#include "ops/sample_op_support.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#include "opencl/opencl_test_support.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

using testing::bits;
using testing::kNegInf;
using testing::run_sample;
using testing::SampleOut;
using testing::uniforms_tensor;

#define REQUIRE_OPENCL_FP64(cl)                                                       \
  std::unique_ptr<OpenClBackend> cl = testing::make_test_backend(/*need_fp64=*/true); \
  if (!cl) GTEST_SKIP() << "no OpenCL device with fp64 here"

std::unique_ptr<CpuBackend> scalar_cpu() {
  CpuBackendOptions o;
  o.threads = 1;
  o.isa = CpuIsa::kScalar;
  return std::make_unique<CpuBackend>(o);
}

// Rows of wide and narrow scales, some with -inf entries (masked tokens),
// some with an exact tie of the maximum, some peaked (one logit far above).
Tensor random_logits(Rng& rng, int64_t M, int64_t V) {
  Tensor t = Tensor::f32({M, V});
  for (int64_t r = 0; r < M; ++r) {
    float* row = t.f.data() + r * V;
    const int kind = int(r % 5);
    for (int64_t v = 0; v < V; ++v) {
      row[v] = kind == 1 ? rng.uniform_real(-0.5f, 0.5f) : rng.uniform_real(-30.f, 30.f);
      if (kind == 2 && rng.uniform_real(0.f, 1.f) < 0.4f) row[v] = kNegInf;
    }
    if (kind == 3 && V > 2) {
      const float mx = *std::max_element(row, row + V);
      row[V / 3] = row[2 * V / 3] = mx + 1.0f;
    }
    if (kind == 4) row[(r * 11) % V] = 60.0f;
    row[(r * 5) % V] = std::max(row[(r * 5) % V], -1.0f);  // a finite logit in every row
  }
  return t;
}

// z, argmax and the draw bit for bit; the entropy within 2 ulps, and the
// count of rows where it is bit for bit added to *exact_entropies. The
// entropy's sums take p = exp(d) rounded once from double (the correctly
// rounded fp32 exponential); a libm whose expf is off by an ulp at some d
// (glibc's, in about 1 of 10^4 arguments) moves them by that ulp, which the
// float entropy rarely shows (docs/opencl.md §3).
void expect_same(const SampleOut& cpu, const SampleOut& cl, const std::string& what,
                 int64_t* exact_entropies = nullptr) {
  ASSERT_EQ(cpu.z.f.size(), cl.z.f.size()) << what;
  size_t z_diff = 0;
  for (size_t k = 0; k < cpu.z.f.size(); ++k) z_diff += bits(cpu.z.f[k]) != bits(cl.z.f[k]) ? 1 : 0;
  EXPECT_EQ(z_diff, 0u) << what << ": processed logits differ";
  EXPECT_EQ(cpu.argmax.i, cl.argmax.i) << what;
  EXPECT_EQ(cpu.sample.i, cl.sample.i) << what;
  for (size_t r = 0; r < cpu.entropy.f.size(); ++r) {
    const int64_t ulps = std::abs(int64_t(bits(cpu.entropy.f[r])) - int64_t(bits(cl.entropy.f[r])));
    EXPECT_LE(ulps, 2) << what << " row " << r << ": entropy " << cpu.entropy.f[r] << " vs " << cl.entropy.f[r];
    if (exact_entropies && ulps == 0) ++*exact_entropies;
  }
}

// Many seeds × steps × temperatures; each row is one canvas position whose
// uniform is draw B's (RandomDraws::sample_uniform), as generate() passes it.
TEST(OpenClSample, BitIdenticalToTheCpuOverSeedsStepsAndTemperatures) {
  REQUIRE_OPENCL_FP64(cl);
  std::unique_ptr<CpuBackend> cpu = scalar_cpu();
  Rng rng(2026);
  const int64_t M = 24;
  int64_t draws = 0, distinct_from_argmax = 0, exact_entropies = 0;
  for (const int64_t V : {int64_t(1), int64_t(7), int64_t(300), int64_t(4099)}) {
    for (const uint64_t seed : {uint64_t(1), uint64_t(42), uint64_t(987654321), uint64_t(1) << 52}) {
      const RandomDraws random(seed);
      for (const int step : {0, 3, 17}) {
        for (const float T : {0.25f, 0.7f, 1.0f, 1.3f, 3.0f}) {
          const Tensor logits = random_logits(rng, M, V);
          std::vector<double> u(static_cast<size_t>(M));
          for (int64_t p = 0; p < M; ++p) u[size_t(p)] = random.sample_uniform(seed % 3, step, p);
          const Tensor uniforms = uniforms_tensor(u);
          const std::string what = "V " + std::to_string(V) + " seed " + std::to_string(seed) + " step " +
                                   std::to_string(step) + " T " + std::to_string(T);
          const SampleOut want = run_sample(*cpu, logits, uniforms, T, step);
          const SampleOut got = run_sample(*cl, logits, uniforms, T, step);
          expect_same(want, got, what, &exact_entropies);
          for (int64_t p = 0; p < M; ++p) distinct_from_argmax += want.sample.i[size_t(p)] != want.argmax.i[size_t(p)];
          draws += M;
        }
      }
    }
  }
  EXPECT_GE(exact_entropies, draws * 99 / 100) << "of " << draws << " rows";
  // The draws are real draws, not the argmax: most rows are not peaked.
  EXPECT_GT(distinct_from_argmax, draws / 4);
}

// The ends of the CDF: u = 0 picks the first positive weight (after whole
// chunks of zero weights in one row); u just below 1 puts the target in the
// rounding slack of the total, where only the same additions in the same
// order give the same (last positive) index.
TEST(OpenClSample, EndsOfTheCdfAsOnTheCpu) {
  REQUIRE_OPENCL_FP64(cl);
  std::unique_ptr<CpuBackend> cpu = scalar_cpu();
  Rng rng(5);
  const int64_t M = 10, V = 20000;
  Tensor logits = random_logits(rng, M, V);
  for (int64_t v = V - 50; v < V; ++v) logits.f[size_t(3 * V + v)] = kNegInf;  // zero weights at the end of a row
  for (int64_t v = 0; v < 600; ++v) logits.f[size_t(4 * V + v)] = kNegInf;     // whole chunks of zero weights first
  std::vector<double> u(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) u[size_t(r)] = r % 2 == 0 ? 0.0 : std::nextafter(1.0, 0.0);
  u[3] = std::nextafter(1.0, 0.0);
  const Tensor uniforms = uniforms_tensor(u);
  for (const float T : {0.5f, 1.0f, 2.0f}) {
    const SampleOut want = run_sample(*cpu, logits, uniforms, T);
    const SampleOut got = run_sample(*cl, logits, uniforms, T);
    expect_same(want, got, "T " + std::to_string(T));
    EXPECT_LT(got.sample.i[3], V - 50) << "a zero-weight index";
    EXPECT_GE(got.sample.i[4], 600) << "a zero-weight index";
  }
}

TEST(OpenClSample, WithoutADrawSampleIsMinusOne) {
  REQUIRE_OPENCL_FP64(cl);
  std::unique_ptr<CpuBackend> cpu = scalar_cpu();
  Rng rng(9);
  const Tensor logits = random_logits(rng, 7, 513);
  const Tensor none = Tensor::i32({0, 2});
  const SampleOut want = run_sample(*cpu, logits, none, 0.8f);
  const SampleOut got = run_sample(*cl, logits, none, 0.8f);
  expect_same(want, got, "no draw");
  EXPECT_EQ(got.sample.i, std::vector<int32_t>(7, -1));
}

// A NaN, a +inf, a row of -inf: the device marks the rows (ops/row_sampling.h
// bad_row_mark) and throw_marked_row turns the first mark into the CPU op's
// error.
TEST(OpenClSample, BadRowsAreMarkedAndReportedAsOnTheCpu) {
  REQUIRE_OPENCL_FP64(cl);
  std::unique_ptr<CpuBackend> cpu = scalar_cpu();
  Rng rng(3);
  const int64_t M = 5, V = 600;
  Tensor logits = random_logits(rng, M, V);
  logits.f[size_t(1 * V + 12)] = std::numeric_limits<float>::quiet_NaN();
  logits.f[size_t(1 * V + 400)] = std::numeric_limits<float>::infinity();
  std::fill(logits.f.begin() + 3 * V, logits.f.begin() + 4 * V, kNegInf);
  logits.f[size_t(4 * V + 339)] = std::numeric_limits<float>::infinity();
  const Tensor uniforms = uniforms_tensor(std::vector<double>(size_t(M), 0.5));
  const SampleOut o = run_sample(*cl, logits, uniforms, 1.0f, 4);
  EXPECT_EQ(o.argmax.i[1], bad_row_mark(12));
  EXPECT_EQ(o.argmax.i[3], bad_row_mark(-1));
  EXPECT_EQ(o.argmax.i[4], bad_row_mark(339));
  for (int r : {1, 3, 4}) {
    EXPECT_TRUE(std::isnan(o.entropy.f[size_t(r)])) << r;
    EXPECT_EQ(o.sample.i[size_t(r)], -1) << r;
  }
  for (int r : {0, 2}) EXPECT_GE(o.argmax.i[size_t(r)], 0) << r;

  const std::string where = sample_op_where("sample", 4);
  std::string cpu_error = "no error", cl_error = "no error";
  try {
    run_sample(*cpu, logits, uniforms, 1.0f, 4);
  } catch (const BadLogitsRow& e) {
    cpu_error = e.what();
  }
  try {
    throw_marked_row(o.argmax.i, o.z.f.data(), V, where);
  } catch (const BadLogitsRow& e) {
    cl_error = e.what();
  }
  EXPECT_EQ(cl_error, cpu_error);
  EXPECT_EQ(cl_error, where + " row 1: logit 12 is nan");
}

// With device outputs allowed, nothing comes back until asked: the logits and
// uniforms go up, one kernel runs, nothing is read back; the host copies then
// equal the CPU's.
TEST(OpenClSample, OutputsStayOnTheDevice) {
  REQUIRE_OPENCL_FP64(cl);
  std::unique_ptr<CpuBackend> cpu = scalar_cpu();
  Rng rng(11);
  const int64_t M = 6, V = 1000;
  const Tensor logits = random_logits(rng, M, V);
  const Tensor uniforms = uniforms_tensor({0.1, 0.2, 0.3, 0.4, 0.5, 0.6});
  SampleOut o;
  OpCall c;
  c.kind = OpKind::kSample;
  c.site = "sample";
  c.pass = Pass::kDecoder;
  c.in = {&logits, &uniforms};
  c.out = {&o.z, &o.argmax, &o.entropy, &o.sample};
  c.attrs.temperature = 0.9f;
  Executor(*cl).run(c);
  for (const Tensor* t : c.out) EXPECT_TRUE(t->host_stale);
  const DeviceTraffic t = *cl->device_traffic();
  EXPECT_EQ(t.h2d_bytes, M * V * 4 + M * 2 * 4);
  EXPECT_EQ(t.d2h_bytes, 0);
  EXPECT_EQ(t.kernel_launches, 1);
  ensure_host({&o.z, &o.argmax, &o.entropy, &o.sample});
  expect_same(run_sample(*cpu, logits, uniforms, 0.9f), o, "resident");
}

#else

TEST(OpenClSample, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend (DGEMMA_OPENCL)"; }

#endif

}  // namespace
}  // namespace dgemma
