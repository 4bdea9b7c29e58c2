// The optional second output of moe_experts (ops/op.h): act[m, j, :] =
// gelu_tanh(gate_e · x_m) ⊙ (up_e · x_m) for e = idx[m, j], the input of
// expert e's down projection, which PTQ calibration observes
// (docs/formats.md §3). On the CPU's three paths (the reference kernel, the
// grouped GEMMs of the dispatch levels, the quantized experts):
//  * it equals the same products written out here in double precision over
//    the weights' stored values, within fp32 summation error;
//  * output 0 is bit-identical with and without it;
//  * over NF4 and NVFP4 experts it equals the reference over the dequantized
//    weights (1e-5 relative, the quantized GEMM's bound in
//    tests/quantize/quant_kernels_test.cc; 2e-2 with int8-dot, whose gate/up
//    product quantizes x to int8, tests/quantize/int8_dot_test.cc);
//  * a wrong output count, aliased outputs or indices of the wrong rank are
//    errors naming the op.
// The CUDA backend's second output is compared with the CPU's in
// op_catalogue_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "dgemma/error.h"
#include "quantize/quantized_weight.h"
#include "quantize/quantizers.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

double gelu_tanh_d(double u) { return 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u))); }

// A routed-experts call: x [M, H] in [-1, 1], a random routing to K distinct
// experts of E, gate_up [E, 2I, H] and down [E, H, I] in [-0.5, 0.5) stored
// as F32 or BF16. gu and dn hold the values the weights store (rounded to
// bf16 for BF16). Not copyable: the WeightRefs point into it.
struct Experts {
  static constexpr int64_t M = 11, H = 40, I = 24, E = 6, K = 3;
  Tensor x, idx, wts;
  std::vector<float> gu, dn;
  std::vector<uint16_t> gu16, dn16;
  WeightRef wgu, wdn;

  Experts(DType dt, uint32_t seed) {
    Rng r(seed);
    x = uniform_tensor({M, H}, r, -1, 1);
    idx = Tensor::i32({M, K});
    idx.i = distinct_expert_ids(M, E, K, r);
    wts = uniform_tensor({M, K}, r, 0, 1);
    gu = uniform_values(E * 2 * I * H, r, -0.5f, 0.5f);
    dn = uniform_values(E * H * I, r, -0.5f, 0.5f);
    wgu = ref("experts.gate_up_proj", {E, 2 * I, H}, dt, gu, gu16);
    wdn = ref("experts.down_proj", {E, H, I}, dt, dn, dn16);
  }
  Experts(const Experts&) = delete;
  Experts& operator=(const Experts&) = delete;

  static WeightRef ref(const char* name, std::vector<int64_t> shape, DType dt, std::vector<float>& v,
                       std::vector<uint16_t>& b16) {
    WeightRef w;
    w.name = name;
    w.shape = std::move(shape);
    w.dtype = dt;
    if (dt == DType::kBF16) {
      for (float& f : v) {
        b16.push_back(f32_to_bf16(f));
        f = bf16_to_f32(b16.back());
      }
      w.data = b16.data();
    } else {
      w.data = v.data();
    }
    return w;
  }

  // The activations written out: per slot, the gate and up rows of
  // gate_up[e] times x (x rounded to bf16 first when `bf16_x`: a bf16 dot
  // mode's gate/up product), gelu_tanh of the gate times the up, in double.
  std::vector<double> expected(bool bf16_x = false) const {
    std::vector<double> want(size_t(M * K * I));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = idx.i[size_t(m * K + j)];
        for (int64_t i = 0; i < I; ++i) {
          double g = 0, u = 0;
          for (int64_t h = 0; h < H; ++h) {
            const float xv = x.f[size_t(m * H + h)];
            const double xh = bf16_x ? double(round_bf16(xv)) : double(xv);
            g += double(gu[size_t((e * 2 * I + i) * H + h)]) * xh;
            u += double(gu[size_t((e * 2 * I + I + i) * H + h)]) * xh;
          }
          want[size_t((m * K + j) * I + i)] = gelu_tanh_d(g) * u;
        }
      }
    return want;
  }
};

struct Outputs {
  Tensor out, acts;
};

// Runs moe_experts with one output, or two (`with_acts`).
Outputs run(Backend& b, const Tensor& x, const Tensor& idx, const Tensor& wts, const WeightRef& gu, const WeightRef& dn,
            bool with_acts) {
  Outputs o;
  OpCall c;
  c.kind = OpKind::kMoeExperts;
  c.in = {&x, &idx, &wts};
  c.w = {&gu, &dn};
  c.out = {&o.out};
  if (with_acts) c.out.push_back(&o.acts);
  Executor(b).run(c);
  return o;
}
Outputs run(Backend& b, const Experts& e, bool with_acts) { return run(b, e.x, e.idx, e.wts, e.wgu, e.wdn, with_acts); }

// max |got - want| / max |want|.
double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, top = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    err = std::max(err, std::fabs(double(got[k]) - want[k]));
    top = std::max(top, std::fabs(want[k]));
  }
  return err / std::max(top, 1e-30);
}
std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  ASSERT_EQ(a.f.size(), b.f.size()) << what;
  for (size_t k = 0; k < a.f.size(); ++k)
    if (std::memcmp(&a.f[k], &b.f[k], 4) != 0) {
      ADD_FAILURE() << what << ": output 0 element " << k << " is " << a.f[k] << " with one output, " << b.f[k]
                    << " with two";
      return;
    }
}

std::unique_ptr<CpuBackend> cpu(CpuIsa isa, bool bf16_dot = false, bool int8_dot = false) {
  CpuBackendOptions o;
  o.threads = 2;
  o.isa = isa;
  o.bf16_dot = bf16_dot;
  o.int8_dot = int8_dot;
  return std::make_unique<CpuBackend>(o);
}

// The reference kernel (scalar level) and the grouped GEMMs (the detected
// level, and its bf16 dot mode where the CPU has one), over F32 and BF16
// experts.
TEST(MoeActs, EqualTheGatedProductsOnEveryPlainPath) {
  struct Path {
    std::string name;
    std::unique_ptr<CpuBackend> backend;
  };
  std::vector<Path> paths;
  paths.push_back({"reference", cpu(CpuIsa::kScalar)});
  if (detected_isa() != CpuIsa::kScalar) paths.push_back({"fast", cpu(detected_isa())});
  auto dot = cpu(detected_isa(), true);
  if (dot->bf16_dot()) paths.push_back({"fast bf16-dot", std::move(dot)});
  for (DType dt : {DType::kF32, DType::kBF16})
    for (Path& p : paths) {
      const std::string what = p.name + " over " + std::string(dtype_name(dt)) + " experts";
      SCOPED_TRACE(what);
      Experts e(dt, dt == DType::kF32 ? 11u : 12u);
      const Outputs one = run(*p.backend, e, false), two = run(*p.backend, e, true);
      EXPECT_TRUE(one.acts.shape.empty()) << "one output asked for";
      ASSERT_EQ(two.acts.dtype, DType::kF32);
      ASSERT_EQ(two.acts.shape, (std::vector<int64_t>{Experts::M, Experts::K, Experts::I}));
      // The bf16 dot mode rounds x to bf16 for the gate/up product over
      // bf16 weights; the activations are taken before the down product's
      // rounding, so they are the exact products of the rounded x.
      const bool bf16_x = p.backend->bf16_dot() && dt == DType::kBF16;
      EXPECT_LE(rel_error(two.acts.f, e.expected(bf16_x)), 2e-6) << what;
      expect_bitwise(one.out, two.out, what);
    }
}

// The CPU paths agree on the second output (the fast one sums its GEMMs in
// another order): a slot-order mix-up in one of them shows here as well.
TEST(MoeActs, FastPathMatchesTheReference) {
  if (detected_isa() == CpuIsa::kScalar) GTEST_SKIP() << "this CPU runs only the scalar level";
  Experts e(DType::kBF16, 13);
  auto ref = cpu(CpuIsa::kScalar), fast = cpu(detected_isa());
  const Outputs want = run(*ref, e, true), got = run(*fast, e, true);
  EXPECT_LE(rel_error(got.acts.f, widened(want.acts.f)), 2e-6);
}

// Quantized experts (NF4 with double quant, NVFP4 slices per expert) at the
// scalar level, the detected level and with int8-dot, against the reference
// over the dequantized weights.
TEST(MoeActs, QuantizedExpertsMatchTheReferenceOverDequantizedWeights) {
  const int64_t M = 7, H = 64, I = 32, E = 4, K = 2;
  struct Scheme {
    const char* label;
    QuantScheme scheme;
    quant::QuantizeParams gu, dn;
  };
  quant::QuantizeParams nf4;
  nf4.block = 64;
  nf4.double_quant = true;
  quant::QuantizeParams nvfp4_gu, nvfp4_dn;
  nvfp4_gu.block = nvfp4_dn.block = 16;
  nvfp4_gu.slice_rows = I;
  nvfp4_gu.scale_rows = 2 * I;
  nvfp4_dn.slice_rows = nvfp4_dn.scale_rows = H;
  Rng r(21);
  const Tensor x = uniform_tensor({M, H}, r, -1, 1);
  Tensor idx = Tensor::i32({M, K});
  idx.i = distinct_expert_ids(M, E, K, r);
  const Tensor wts = uniform_tensor({M, K}, r, 0, 1);
  const std::vector<float> gu = normal_values(E * 2 * I * H, r, 0.2f), dn = normal_values(E * H * I, r, 0.2f);
  for (const Scheme& s :
       {Scheme{"nf4", QuantScheme::kNF4, nf4, nf4}, Scheme{"nvfp4", QuantScheme::kNVFP4, nvfp4_gu, nvfp4_dn}}) {
    SCOPED_TRACE(s.label);
    auto qgu = quant::quantize_weight(s.scheme, {DType::kF32, gu.data(), int64_t(gu.size())}, {E, 2 * I, H},
                                      DType::kF32, s.gu);
    auto qdn =
        quant::quantize_weight(s.scheme, {DType::kF32, dn.data(), int64_t(dn.size())}, {E, H, I}, DType::kF32, s.dn);
    auto quant_ref = [](const std::shared_ptr<QuantizedWeight>& q, const char* name) {
      WeightRef w;
      w.name = name;
      w.dtype = q->dtype;
      w.shape = q->shape;
      w.data = q->slices.front().codes;
      w.quant = q;
      return w;
    };
    auto dequantized = [](const QuantizedWeight& q) {
      std::vector<float> d(size_t(q.rows * q.cols));
      for (int64_t row = 0; row < q.rows; ++row) dequantize_reference(q, row, 0, q.cols, d.data() + row * q.cols);
      return d;
    };
    const WeightRef wqgu = quant_ref(qgu, "experts.gate_up_proj"), wqdn = quant_ref(qdn, "experts.down_proj");
    const std::vector<float> dgu = dequantized(*qgu), ddn = dequantized(*qdn);
    WeightRef wdgu = wqgu, wddn = wqdn;
    wdgu.quant = wddn.quant = nullptr;
    wdgu.dtype = wddn.dtype = DType::kF32;
    wdgu.data = dgu.data();
    wddn.data = ddn.data();
    auto reference = cpu(CpuIsa::kScalar);
    const Outputs want = run(*reference, x, idx, wts, wdgu, wddn, true);
    struct Path {
      std::string name;
      std::unique_ptr<CpuBackend> backend;
      double tol;
    };
    std::vector<Path> paths;
    paths.push_back({"scalar", cpu(CpuIsa::kScalar), 1e-5});
    paths.push_back({"scalar int8-dot", cpu(CpuIsa::kScalar, false, true), 2e-2});
    if (detected_isa() != CpuIsa::kScalar) {
      paths.push_back({"detected level", cpu(detected_isa()), 1e-5});
      paths.push_back({"detected level int8-dot", cpu(detected_isa(), false, true), 2e-2});
    }
    for (Path& p : paths) {
      SCOPED_TRACE(p.name);
      const Outputs one = run(*p.backend, x, idx, wts, wqgu, wqdn, false),
                    two = run(*p.backend, x, idx, wts, wqgu, wqdn, true);
      ASSERT_EQ(two.acts.shape, want.acts.shape);
      const double err = rel_error(two.acts.f, widened(want.acts.f));
      EXPECT_LE(err, p.tol);
      if (p.tol > 1e-5) {
        EXPECT_GT(err, 0.0) << "int8-dot left the gate/up product exact: is it on this path?";
      }
      expect_bitwise(one.out, two.out, std::string(s.label) + " " + p.name);
    }
  }
}

TEST(MoeActs, BadOutputsAreErrorsNamingTheOp) {
  Experts e(DType::kF32, 14);
  auto b = cpu(CpuIsa::kScalar);
  Tensor o0, o1, o2;
  OpCall c;
  c.kind = OpKind::kMoeExperts;
  c.site = "experts";
  c.layer = 3;
  c.in = {&e.x, &e.idx, &e.wts};
  c.w = {&e.wgu, &e.wdn};
  auto error_of = [&](const OpCall& call) -> std::string {
    try {
      Executor(*b).run(call);
    } catch (const Error& err) {
      return err.what();
    }
    return "no error";
  };
  auto expect_error = [&](const OpCall& call, const std::string& want) {
    const std::string got = error_of(call);
    EXPECT_NE(got.find("op moe_experts (experts) in layer 3"), std::string::npos) << got;
    EXPECT_NE(got.find(want), std::string::npos) << got;
  };
  c.out = {&o0, &o1, &o2};
  expect_error(c, "expected 3 inputs, 2 weights, 1 or 2 outputs, got 3, 2, 3");
  c.out = {};
  expect_error(c, "1 or 2 outputs, got 3, 2, 0");
  c.out = {&o0, &o0};
  expect_error(c, "outputs 0 and 1 alias");
  c.out = {&o0, nullptr};
  expect_error(c, "null output");
  c.out = {&o0, &o1};
  Tensor flat = Tensor::i32({Experts::M * Experts::K});
  flat.i = e.idx.i;
  c.in[1] = &flat;
  expect_error(c, "expert indices must have rank 2");
  // A second output of any earlier shape and dtype is sized by the op.
  c.in[1] = &e.idx;
  o1 = Tensor::i32({2, 5});
  EXPECT_EQ(error_of(c), "no error");
  EXPECT_EQ(o1.dtype, DType::kF32);
  EXPECT_EQ(o1.shape, (std::vector<int64_t>{Experts::M, Experts::K, Experts::I}));
  EXPECT_LE(rel_error(o1.f, e.expected()), 2e-6);
}

}  // namespace
}  // namespace dgemma
