// What `--precision int8-dot` costs in accuracy (backend/cpu/int8_dot.h), on
// golden A quantized at load three ways (NF4 everywhere, int8 everywhere,
// NVFP4 experts):
//  * op by op, teacher-forced (backend/differential_backend.h: every op of an
//    encode, a first and a self-conditioned decoder step runs on the exact
//    path and, on the same inputs, with int8-dot): the GEMMs over quantized
//    weights differ by the activation rounding only, every other op is
//    bit-identical. This is the bound; the figures are printed.
//  * end to end (first and self-conditioned step logits: max |Δ logit|,
//    argmax agreement, mean KL of the step distributions), printed for
//    information: golden A's random weights make it chaotic (a bf16 cast
//    of its weights already moves logits by up to 16.8, golden/README.md),
//    so only a model with trained-like conditioning gives meaningful end-
//    to-end figures. DGEMMA_INT8_ACCURACY_MODEL=DIR prints them for another
//    checkpoint, e.g. the real-dimension slice of `dgemma bench slice` (NF4;
//    skipped when unset).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "backend/differential_backend.h"
#include "model/diffusion_gemma.h"
#include "backend/cpu/cpu_backend.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

struct Accuracy {
  double max_abs = 0, max_logit = 0, mean_kl = 0, argmax_agree = 0;
  double rel_rms = 0;  // ‖dot − exact‖ / ‖exact‖ over all logits
};

// Softmax of one row (double).
std::vector<double> softmax(const float* z, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(z[i]));
  std::vector<double> p(static_cast<size_t>(n));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[size_t(i)] = std::exp(double(z[i]) - mx);
  for (double& v : p) v /= s;
  return p;
}

Accuracy compare(const std::vector<float>& exact, const std::vector<float>& dot, int64_t rows, int64_t vocab) {
  Accuracy a;
  int64_t agree = 0;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double e = exact[i], diff = double(dot[i]) - e;
    err2 += diff * diff;
    ref2 += e * e;
  }
  a.rel_rms = ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *e = exact.data() + r * vocab, *d = dot.data() + r * vocab;
    int64_t ae = 0, ad = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      a.max_abs = std::max(a.max_abs, std::fabs(double(e[i]) - double(d[i])));
      a.max_logit = std::max(a.max_logit, std::fabs(double(e[i])));
      if (e[i] > e[ae]) ae = i;
      if (d[i] > d[ad]) ad = i;
    }
    agree += ae == ad;
    const std::vector<double> pe = softmax(e, vocab), pd = softmax(d, vocab);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i)
      if (pe[size_t(i)] > 0) kl += pe[size_t(i)] * (std::log(pe[size_t(i)]) - std::log(pd[size_t(i)]));
    a.mean_kl += kl / double(rows);
  }
  a.argmax_agree = double(agree) / double(rows);
  return a;
}

struct StepLogits {
  std::vector<float> first, self_conditioned;
};

// An encode, one first step and one step self-conditioned on the first
// step's logits; on `backend` when given.
StepLogits run(const std::string& dir, LoadQuantization q, bool int8_dot, Backend* backend = nullptr) {
  ModelOptions o;
  o.precision = WeightPrecision::kBF16;
  o.quantize = q;
  CpuBackendOptions cpu;
  cpu.bf16_dot = cpu.int8_dot = int8_dot;
  auto m = test::load_on_cpu(dir, o, cpu);
  if (backend) m->set_backend(*backend);
  const int64_t L = m->canvas_length(), V = m->vocab_size();
  std::vector<int32_t> prompt(40);
  for (size_t k = 0; k < prompt.size(); ++k) prompt[k] = int32_t((k * 37 + 11) % size_t(V));
  prompt[0] = 2;
  m->encode(prompt);
  std::vector<int32_t> canvas(static_cast<size_t>(L));
  for (size_t k = 0; k < canvas.size(); ++k) canvas[k] = int32_t((k * 13 + 5) % size_t(V));
  StepLogits s;
  s.first.resize(size_t(L * V));
  s.self_conditioned.resize(size_t(L * V));
  m->decode(canvas.data(), nullptr, s.first.data());
  m->decode(canvas.data(), s.first.data(), s.self_conditioned.data());
  return s;
}

Accuracy report(const std::string& label, const std::string& dir, LoadQuantization q, int64_t L, int64_t V) {
  const StepLogits e = run(dir, q, false), d = run(dir, q, true);
  EXPECT_NE(e.first, d.first) << label << ": int8-dot did not change the quantized GEMMs";
  for (float v : d.self_conditioned) EXPECT_TRUE(std::isfinite(v));
  Accuracy worst;
  for (int step = 0; step < 2; ++step) {
    const Accuracy a =
        step == 0 ? compare(e.first, d.first, L, V) : compare(e.self_conditioned, d.self_conditioned, L, V);
    std::printf(
        "int8-dot accuracy, %s, %s step: max |dlogit| %.4g (logits up to %.3g), relative RMS of the logits "
        "%.3g, argmax agreement %.1f %%, mean KL %.3g\n",
        label.c_str(), step == 0 ? "first" : "self-conditioned", a.max_abs, a.max_logit, a.rel_rms,
        100 * a.argmax_agree, a.mean_kl);
    worst.max_abs = std::max(worst.max_abs, a.max_abs);
    worst.max_logit = std::max(worst.max_logit, a.max_logit);
    worst.mean_kl = std::max(worst.mean_kl, a.mean_kl);
    worst.rel_rms = std::max(worst.rel_rms, a.rel_rms);
    worst.argmax_agree = step == 0 ? a.argmax_agree : std::min(worst.argmax_agree, a.argmax_agree);
  }
  return worst;
}

// Worst figures per op kind, split by whether the op multiplies a quantized weight.
class Recorder : public DifferentialListener {
 public:
  struct Worst {
    int64_t ops = 0;
    double max_rel = 0, min_cosine = 1, max_abs = 0;
  };
  std::map<std::string, Worst> by_op;
  void on_begin(int64_t, const OpCall&) override {}
  void on_result(int64_t, const OpCall& c, const OpComparison& r) override {
    bool quantized = false;
    for (const WeightRef* w : c.w) quantized = quantized || w->quant;
    Worst& w = by_op[std::string(op_name(c.kind)) + (quantized ? " (quantized)" : "")];
    ++w.ops;
    w.max_rel = std::max(w.max_rel, r.max_rel);
    w.max_abs = std::max(w.max_abs, r.max_abs);
    w.min_cosine = std::min(w.min_cosine, r.cosine);
  }
};

TEST(Int8DotAccuracy, GoldenModelOpByOp) {
  for (auto [label, q] : std::vector<std::pair<std::string, LoadQuantization>>{
           {"golden A nf4", LoadQuantization::kNf4},
           {"golden A q8", LoadQuantization::kQ8},
           {"golden A nvfp4-experts", LoadQuantization::kNvfp4Experts}}) {
    SCOPED_TRACE(label);
    CpuBackendOptions exact_o, dot_o;
    exact_o.threads = dot_o.threads = 2;
    dot_o.int8_dot = true;
    CpuBackend exact(exact_o), dot(dot_o);
    Recorder rec;
    DifferentialOptions opt;
    opt.tolerance = {1e30, 1e30, -1};  // recorded here, bounded below
    opt.routing_from_reference = true;
    DifferentialBackend diff(exact, dot, rec, opt);
    run(kGolden, q, false, &diff);
    int64_t quantized_ops = 0;
    for (const auto& [op, w] : rec.by_op) {
      // 1 - cosine ≈ (relative RMS error)² / 2.
      std::printf(
          "int8-dot op by op, %s: %-26s %4lld ops, max |diff| %.3g, min cosine %.7f (relative RMS error "
          "%.2g)\n",
          label.c_str(), op.c_str(), (long long)w.ops, w.max_abs, w.min_cosine,
          std::sqrt(2 * std::max(0.0, 1 - w.min_cosine)));
      if (op.find("(quantized)") != std::string::npos) {
        quantized_ops += w.ops;
        // Activations rounded to 8 bits (≤ max|block| / 254 per element):
        // about 1 % relative RMS error per op (cosine ≥ 0.99995).
        EXPECT_GT(w.min_cosine, 0.9998) << op;
        EXPECT_GT(w.max_abs, 0.0) << op << ": int8-dot did not change it";
      } else if (op != "router_topk") {
        EXPECT_EQ(w.max_abs, 0.0) << op << " is not a quantized GEMM and must be unchanged";
      }
    }
    EXPECT_GT(quantized_ops, 0);
  }
}

TEST(Int8DotAccuracy, GoldenModelEndToEndFigures) {
  const int64_t L = 16, V = 512;  // golden A: canvas 16, vocabulary 512
  for (auto [label, q] : std::vector<std::pair<std::string, LoadQuantization>>{
           {"golden A nf4", LoadQuantization::kNf4}, {"golden A q8", LoadQuantization::kQ8}}) {
    SCOPED_TRACE(label);
    report(label, kGolden, q, L, V);
  }
}

TEST(Int8DotAccuracy, OtherCheckpoint) {
  const char* dir = std::getenv("DGEMMA_INT8_ACCURACY_MODEL");
  if (!dir) GTEST_SKIP() << "set DGEMMA_INT8_ACCURACY_MODEL=DIR (e.g. the slice of `dgemma bench slice`)";
  ModelOptions o;
  auto probe = test::load_on_cpu(dir, o);
  const int64_t L = probe->canvas_length(), V = probe->vocab_size();
  probe.reset();
  // A GGUF file brings its own blocks (the Q4_K_M slice of docs/performance.md §2.3); a folder is quantized to NF4.
  const std::string path(dir);
  const bool gguf = path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
  report(path + (gguf ? "" : " nf4"), path, gguf ? LoadQuantization::kNone : LoadQuantization::kNf4, L, V);
}

}  // namespace
}  // namespace dgemma
