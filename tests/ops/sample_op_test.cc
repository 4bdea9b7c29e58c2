// The sample op (ops/op.h kSample) on the CPU: bit-identical to
// generate/sampler.h process_row (which generate() runs on the host) on
// random rows with -inf entries and ties, with and without draw B, at both
// dispatch levels and thread counts; bad rows throw BadLogitsRow naming the
// lowest bad row; prepare_op rejects malformed calls; the device marks
// (bad_row_mark) turn into the same error as the CPU op's.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "generate/sampler.h"
#include "backend/cpu/cpu_backend.h"
#include "ops/sample_op_support.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

using testing::bits;
using testing::kNegInf;
using testing::run_sample;
using testing::SampleOut;
using testing::uniforms_tensor;

// Rows of mixed scales: wide (nearly one-hot), narrow (high entropy), with
// -inf entries and exact ties of the maximum.
Tensor random_logits(Rng& rng, int64_t M, int64_t V) {
  Tensor t = Tensor::f32({M, V});
  for (int64_t r = 0; r < M; ++r) {
    float* row = t.f.data() + r * V;
    const int kind = int(r % 4);
    for (int64_t v = 0; v < V; ++v) {
      row[v] = kind == 1 ? rng.uniform_real(-0.5f, 0.5f) : rng.uniform_real(-30.f, 30.f);
      if (kind >= 2 && rng.uniform_real(0.f, 1.f) < 0.3f) row[v] = kNegInf;
    }
    if (kind == 3) {  // a tie of the maximum at two indices
      float mx = kNegInf;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
      row[V / 3] = row[2 * V / 3] = mx + 1.0f;
    }
    row[(r * 7) % V] = std::max(row[(r * 7) % V], -1.0f);  // at least one finite logit
  }
  return t;
}

std::vector<double> random_uniforms(Rng& rng, int64_t M) {
  std::vector<double> u(static_cast<size_t>(M));
  for (double& x : u) x = rng.uniform_real(0.0, 1.0);
  if (M > 1) u[1] = 0.0;                       // the first positive weight
  if (M > 2) u[2] = std::nextafter(1.0, 0.0);  // the rounding slack: the last positive weight
  return u;
}

CpuBackendOptions level(CpuIsa isa, int threads) {
  CpuBackendOptions o;
  o.isa = isa;
  o.threads = threads;
  return o;
}

TEST(SampleOp, MatchesProcessRowBitForBit) {
  for (const CpuBackendOptions& opt : {level(CpuIsa::kScalar, 1), level(CpuIsa::kAvx512Bf16, 3)}) {
    CpuBackend cpu(opt);
    for (int s = 0; s < 4; ++s) {
      Rng rng(uint32_t(100 + s));
      const int64_t M = 1 + s * 5, V = s == 0 ? 1 : 37 + 200 * s;
      const float T = s % 2 ? 0.8f : 0.40833334f;
      const Tensor logits = random_logits(rng, M, V);
      const std::vector<double> u = random_uniforms(rng, M);
      const SampleOut got = run_sample(cpu, logits, uniforms_tensor(u), T);
      ASSERT_EQ(got.z.shape, (std::vector<int64_t>{M, V}));
      ASSERT_EQ(got.argmax.shape, (std::vector<int64_t>{M}));
      std::vector<float> scratch(static_cast<size_t>(V));
      for (int64_t r = 0; r < M; ++r) {
        SCOPED_TRACE(std::string("case ") + std::to_string(s) + " row " + std::to_string(r));
        std::vector<float> row(logits.f.begin() + r * V, logits.f.begin() + (r + 1) * V);
        const RowPass want = process_row(row.data(), size_t(V), T, &u[size_t(r)], scratch.data(), "test");
        for (int64_t v = 0; v < V; ++v) ASSERT_EQ(bits(got.z.f[size_t(r * V + v)]), bits(row[size_t(v)])) << v;
        EXPECT_EQ(got.argmax.i[size_t(r)], want.argmax);
        EXPECT_EQ(bits(got.entropy.f[size_t(r)]), bits(want.entropy));
        EXPECT_EQ(got.sample.i[size_t(r)], want.sample);
        EXPECT_GT(scratch[size_t(want.sample)], 0.0f) << "a zero-weight index was drawn";
      }
    }
  }
}

TEST(SampleOp, TiesGoToTheFirstIndexAndExtremeUniformsHitTheEnds) {
  CpuBackend cpu(2);
  // Row 0: max 3 at 1 and 4. Row 1: weights only at 2 and 5 (others -inf).
  Tensor logits = Tensor::f32({2, 6});
  logits.f = {0, 3, -1, 2, 3, 1, kNegInf, kNegInf, 1, kNegInf, kNegInf, 1};
  const SampleOut o = run_sample(cpu, logits, uniforms_tensor({0.0, std::nextafter(1.0, 0.0)}), 0.5f);
  EXPECT_EQ(o.argmax.i, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(o.sample.i[0], 0);  // u = 0: the first positive weight
  EXPECT_EQ(o.sample.i[1], 5);  // u -> 1: the last positive weight, never a -inf one
  EXPECT_NEAR(o.entropy.f[1], std::log(2.0), 1e-6);
  EXPECT_EQ(o.z.f[6], kNegInf);
  EXPECT_EQ(o.z.f[1], 6.0f);
}

TEST(SampleOp, NoDrawModeGivesMinusOneAndTheSameRest) {
  CpuBackend cpu(2);
  Rng rng(7);
  const Tensor logits = random_logits(rng, 9, 300);
  const SampleOut with = run_sample(cpu, logits, uniforms_tensor(random_uniforms(rng, 9)), 0.7f);
  const SampleOut without = run_sample(cpu, logits, Tensor::i32({0, 2}), 0.7f);
  EXPECT_EQ(without.sample.i, std::vector<int32_t>(9, -1));
  EXPECT_EQ(without.argmax.i, with.argmax.i);
  EXPECT_EQ(without.z.f, with.z.f);
  for (size_t r = 0; r < 9; ++r) EXPECT_EQ(bits(without.entropy.f[r]), bits(with.entropy.f[r]));
}

std::string error_of(Backend& b, const Tensor& logits, int step) {
  try {
    run_sample(b, logits, Tensor::i32({0, 2}), 0.5f, step);
  } catch (const BadLogitsRow& e) {
    return e.what();
  }
  return "no error";
}

TEST(SampleOp, BadRowsThrowNamingTheLowestRowAndItsFirstBadLogit) {
  CpuBackend cpu(3);
  Tensor logits = Tensor::f32({6, 8});  // zeros
  logits.f[4 * 8 + 6] = std::numeric_limits<float>::infinity();
  logits.f[2 * 8 + 5] = std::nanf("");
  logits.f[2 * 8 + 7] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(error_of(cpu, logits, 3), "op sample (sample), decoder pass, step 3 row 2: logit 5 is nan");
  logits.f[2 * 8 + 5] = 0;
  EXPECT_EQ(error_of(cpu, logits, 3), "op sample (sample), decoder pass, step 3 row 2: logit 7 is inf");
  logits.f[2 * 8 + 7] = 0;
  for (int v = 0; v < 8; ++v) logits.f[size_t(1 * 8 + v)] = kNegInf;
  EXPECT_EQ(error_of(cpu, logits, 0), "op sample (sample), decoder pass, step 0 row 1: every logit is -inf");
  // A finite logit that overflows when divided by T is +inf in z, as in process_row.
  for (int v = 0; v < 8; ++v) logits.f[size_t(1 * 8 + v)] = 0;
  logits.f[3] = 3e38f;
  EXPECT_EQ(error_of(cpu, logits, 1), "op sample (sample), decoder pass, step 1 row 0: logit 3 is inf");
}

TEST(SampleOp, DeviceMarksGiveTheSameErrorAsTheCpu) {
  Tensor logits = Tensor::f32({3, 4});
  logits.f[1 * 4 + 2] = std::nanf("");
  CpuBackend cpu(1);
  const std::string cpu_error = error_of(cpu, logits, 2);
  // What a device returns for that row: argmax marked, z computed.
  std::vector<int32_t> argmax = {0, bad_row_mark(2), 0};
  std::vector<float> z(12, 0.0f);
  z[6] = std::nanf("");
  try {
    throw_marked_row(argmax, z.data(), 4, sample_op_where("sample", 2));
    FAIL() << "no error";
  } catch (const BadLogitsRow& e) {
    EXPECT_EQ(std::string(e.what()), cpu_error);
    EXPECT_EQ(e.row(), 1);
    EXPECT_EQ(e.logit(), 2);
    EXPECT_EQ(e.reason(), "logit 2 is nan");
  }
  argmax = {0, 0, bad_row_mark(-1)};
  try {
    throw_marked_row(argmax, z.data(), 4, "where");
    FAIL() << "no error";
  } catch (const BadLogitsRow& e) {
    EXPECT_EQ(std::string(e.what()), "where row 2: every logit is -inf");
  }
  argmax = {0, 3, 1};
  EXPECT_NO_THROW(throw_marked_row(argmax, z.data(), 4, "where"));
  EXPECT_EQ(bad_row_mark(0), -2);
  EXPECT_EQ(bad_row_mark(int64_t(INT32_MAX) - 1), INT32_MIN);
}

TEST(SampleOp, PrepareRejectsMalformedCalls) {
  Tensor logits = Tensor::f32({3, 5});
  auto fails = [&](const Tensor& x, const Tensor& u, float T, const std::string& want) {
    Tensor z, a, e, s;
    OpCall c;
    c.kind = OpKind::kSample;
    c.pass = Pass::kDecoder;
    c.in = {&x, &u};
    c.out = {&z, &a, &e, &s};
    c.attrs.temperature = T;
    try {
      prepare_op(c);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
    }
  };
  fails(logits, Tensor::i32({2, 2}), 1.0f, "uniforms must be [3, 2]");
  fails(logits, Tensor::i32({3, 1}), 1.0f, "uniforms must be [3, 2]");
  fails(logits, Tensor::f32({3, 2}), 1.0f, "uniforms must be I32");
  fails(logits, Tensor::i32({3, 2}), 0.0f, "temperature must be positive");
  fails(logits, Tensor::i32({3, 2}), std::numeric_limits<float>::infinity(), "temperature must be positive");
  fails(Tensor::f32({3, 0}), Tensor::i32({0, 2}), 1.0f, "vocab 0 outside");
  fails(Tensor::f32({15}), Tensor::i32({0, 2}), 1.0f, "logits must have rank 2");
  // Outputs that alias each other.
  Tensor z, a, e;
  Tensor u = Tensor::i32({0, 2});
  OpCall c;
  c.kind = OpKind::kSample;
  c.in = {&logits, &u};
  c.out = {&z, &a, &e, &a};
  c.attrs.temperature = 1.0f;
  EXPECT_THROW(prepare_op(c), Error);
  c.out = {&z, &a, &e};
  EXPECT_THROW(prepare_op(c), Error);
}

TEST(SampleOp, IsAModelLevelOpAfterTheTextOps) {
  EXPECT_EQ(op_name(OpKind::kSample), "sample");
  EXPECT_EQ(op_scope(OpKind::kSample), "model");
  // The vision tower's three ops (docs/model.md §7) follow it.
  EXPECT_EQ(int(OpKind::kSample), kNumOpKinds - 4);
  EXPECT_EQ(op_name(OpKind(kNumOpKinds - 1)), "scatter_rows");
}

}  // namespace
}  // namespace dgemma
