// Throughput of the quantized linear (dequantize-in-tile GEMM,
// backend/cpu/quant_kernels.h) per format against the bf16 path of the same CPU
// backend (packed bf16 panels) in the same run, and against OpenBLAS sgemm
// on the fp32 weight when libopenblas is present (backend/cpu/blas_baseline.h:
// opened at run time, so the benchmark needs no link-time BLAS).
//
// Shapes: an expert projection (gate_up of one expert, [1408, 2816]) at
// M = 16 tokens, and a canvas GEMM (dense MLP gate, [2112, 2816]) at M = 256
// canvas positions (docs/model.md §1.1 sizes). Each quantized format runs twice: on the
// exact path (fp32 activations) and with `int8-dot` (int8 activations,
// integer dot products; backend/cpu/int8_dot.h). Counters: GFLOP/s (2·M·N·K per
// iteration) and the weight bytes streamed per second.
//
// moe_layer/*: the routed experts of one layer (moe_experts, docs/model.md §1.5) at the
// density of a 256-token canvas — 64 tokens, top-8 over 32 experts of the
// real size (H = 2816, I = 704), so about 16 tokens per expert, spread as a
// random routing spreads them — in the bf16 modes and per quantized format.
//
// ggml_*: ggml block weights (random blocks of the same spread, random_ggml.h)
// on the integer path; ggml_q4_k_m in the MoE layer is the published Q4_K_M
// experts' mix, gate_up Q4_K and down Q8_0 (docs/formats.md §5.3).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/blas_baseline.h"
#include "backend/cpu/cpu_backend.h"
#include "quantize/quantizers.h"
#include "random_ggml.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

struct Shape {
  const char* label;
  int64_t M, N, K;
};
constexpr Shape kShapes[] = {{"expert_M16", 16, 1408, 2816}, {"canvas_M256", 256, 2112, 2816}};

enum class Kind { kBf16, kF32, kNf4, kNvfp4, kMlx4, kMlx8, kInt8, kSgemm, kQ4K, kQ6K, kQ8_0, kQ4KM };
struct Variant {
  const char* label;
  Kind kind;
  bool int8_dot = false;
};
constexpr Variant kVariants[] = {{"bf16", Kind::kBf16},
                                 {"f32", Kind::kF32},
                                 {"nf4", Kind::kNf4},
                                 {"nf4_int8dot", Kind::kNf4, true},
                                 {"nvfp4", Kind::kNvfp4},
                                 {"nvfp4_int8dot", Kind::kNvfp4, true},
                                 {"mlx4", Kind::kMlx4},
                                 {"mlx4_int8dot", Kind::kMlx4, true},
                                 {"mlx8", Kind::kMlx8},
                                 {"mlx8_int8dot", Kind::kMlx8, true},
                                 {"int8", Kind::kInt8},
                                 {"int8_int8dot", Kind::kInt8, true},
                                 {"ggml_q4_k_int8dot", Kind::kQ4K, true},
                                 {"ggml_q6_k_int8dot", Kind::kQ6K, true},
                                 {"ggml_q8_0_int8dot", Kind::kQ8_0, true},
                                 {"sgemm", Kind::kSgemm}};

int threads() {
  const char* t = std::getenv("DGEMMA_BENCH_THREADS");
  return t ? std::atoi(t) : 0;
}

CpuBackend& backend(bool int8_dot, bool bf16_dot = false) {
  static CpuBackend exact(threads());
  static CpuBackend dot([] {
    CpuBackendOptions o;
    o.threads = threads();
    o.int8_dot = true;
    return o;
  }());
  static CpuBackend bf16([] {
    CpuBackendOptions o;
    o.threads = threads();
    o.bf16_dot = true;
    return o;
  }());
  return int8_dot ? dot : bf16_dot ? bf16 : exact;
}

struct Weights {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  WeightRef ref;
  std::shared_ptr<QuantizedWeight> q;
  uint64_t bytes = 0;
};

// A weight of `shape` (N(0, 0.05) entries) in format k, cached under label.
const Weights& weights(const std::string& label, const std::vector<int64_t>& shape, Kind k) {
  static std::map<std::pair<std::string, int>, std::unique_ptr<Weights>> cache;
  auto& slot = cache[{label, int(k)}];
  if (slot) return *slot;
  slot = std::make_unique<Weights>();
  Weights& w = *slot;
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  w.f32 = normal_values(n, 1, 0.05f);
  w.ref.name = label;
  w.ref.shape = shape;
  const quant::FloatSource src{DType::kF32, w.f32.data(), n};
  quant::QuantizeParams p;
  switch (k) {
    case Kind::kBf16:
      w.bf16.resize(w.f32.size());
      for (size_t i = 0; i < w.f32.size(); ++i) w.bf16[i] = f32_to_bf16(w.f32[i]);
      w.ref.dtype = DType::kBF16;
      w.ref.data = w.bf16.data();
      w.bytes = w.bf16.size() * 2;
      return w;
    case Kind::kF32:
    case Kind::kSgemm:
      w.ref.dtype = DType::kF32;
      w.ref.data = w.f32.data();
      w.bytes = w.f32.size() * 4;
      return w;
    case Kind::kNf4: w.q = quant::quantize_weight(QuantScheme::kNF4, src, shape, DType::kBF16, p); break;
    case Kind::kNvfp4: w.q = quant::quantize_weight(QuantScheme::kNVFP4, src, shape, DType::kBF16, p); break;
    case Kind::kMlx4: w.q = quant::quantize_weight(QuantScheme::kAffine, src, shape, DType::kBF16, p); break;
    case Kind::kMlx8:
      p.bits = 8;
      w.q = quant::quantize_weight(QuantScheme::kAffine, src, shape, DType::kBF16, p);
      break;
    case Kind::kInt8: w.q = quant::quantize_weight(QuantScheme::kInt8, src, shape, DType::kBF16, p); break;
    case Kind::kQ4K:
    case Kind::kQ6K:
    case Kind::kQ8_0:
    case Kind::kQ4KM: {
      const GgmlType t = k == Kind::kQ6K                                             ? GgmlType::kQ6_K
                         : k == Kind::kQ8_0 || (k == Kind::kQ4KM && label == "down") ? GgmlType::kQ8_0
                                                                                     : GgmlType::kQ4_K;
      auto q = std::make_shared<QuantizedWeight>();
      q->scheme = QuantScheme::kGgml;
      q->ggml_type = t;
      q->shape = shape;
      q->cols = shape.back();
      q->rows = n / q->cols;
      q->block = ggml_traits(t).block_elems;
      q->owned.push_back(ggml_bench::random_blocks(t, q->rows, q->cols, 0.05f, 1));
      q->stored_bytes = q->owned.back().size();
      q->slices = {QuantSlice{0, q->rows, q->owned.back().data()}};
      w.q = q;
      break;
    }
  }
  w.ref.dtype = DType::kBF16;
  w.ref.data = w.q->slices.front().codes;
  w.ref.quant = w.q;
  w.bytes = w.q->stored_bytes;
  return w;
}

// OpenBLAS cblas_sgemm, opened at run time when libopenblas is installed.
const cpu::BlasBaseline* blas() {
  static const std::unique_ptr<cpu::BlasBaseline> b = cpu::BlasBaseline::open();
  return b.get();
}

void bench(benchmark::State& state, Shape s, Variant v) {
  const Weights& w = weights(s.label, {s.N, s.K}, v.kind);
  Rng rng(2);
  Tensor x = normal_tensor({s.M, s.K}, rng);
  Tensor out;
  if (v.kind == Kind::kSgemm) {
    const cpu::BlasBaseline* f = blas();
    if (!f) {
      state.SkipWithError("libopenblas not found");
      return;
    }
    out = Tensor::f32({s.M, s.N});
    for (auto _ : state) {
      f->sgemm_nt(s.M, s.N, s.K, x.f.data(), w.f32.data(), out.f.data());
      benchmark::DoNotOptimize(out.f.data());
    }
  } else {
    OpCall c;
    c.kind = OpKind::kLinear;
    c.in = {&x};
    c.w = {&w.ref};
    c.out = {&out};
    Executor ex(backend(v.int8_dot));
    ex.run(c);  // packs the bf16/f32 panels once, outside the timing
    for (auto _ : state) {
      ex.run(c);
      benchmark::DoNotOptimize(out.f.data());
    }
  }
  const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(double(w.bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_MB"] = double(w.bytes) / 1e6;
}

void bench_moe(benchmark::State& state, Variant v, bool bf16_dot) {
  constexpr int64_t M = 64, H = 2816, I = 704, E = 32, K = 8;
  const Weights& gu = weights("gate_up", {E, 2 * I, H}, v.kind);
  const Weights& dn = weights("down", {E, H, I}, v.kind);
  Rng rng(3);
  Tensor x = normal_tensor({M, H}, rng), idx = Tensor::i32({M, K}), wts = Tensor::f32({M, K}), out;
  idx.i = distinct_expert_ids(M, E, K, rng);  // K distinct experts per token
  std::fill(wts.f.begin(), wts.f.end(), 1.0f / K);
  OpCall c;
  c.kind = OpKind::kMoeExperts;
  c.in = {&x, &idx, &wts};
  c.w = {&gu.ref, &dn.ref};
  c.out = {&out};
  Executor ex(backend(v.int8_dot, bf16_dot));
  ex.run(c);  // packs the bf16 panels once, outside the timing
  for (auto _ : state) {
    ex.run(c);
    benchmark::DoNotOptimize(out.f.data());
  }
  const double flops = 2.0 * double(M * K) * double(3 * I * H);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace
}  // namespace dgemma

int main(int argc, char** argv) {
  for (const auto& s : dgemma::kShapes)
    for (const auto& v : dgemma::kVariants)
      benchmark::RegisterBenchmark((std::string(s.label) + "/" + v.label).c_str(), dgemma::bench, s, v)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  using dgemma::Kind;
  const std::pair<dgemma::Variant, bool> moe[] = {{{"bf16", Kind::kBf16}, false},
                                                  {{"bf16_dot", Kind::kBf16}, true},
                                                  {{"nf4", Kind::kNf4}, false},
                                                  {{"nf4_int8dot", Kind::kNf4, true}, false},
                                                  {{"nvfp4_int8dot", Kind::kNvfp4, true}, false},
                                                  {{"mlx4_int8dot", Kind::kMlx4, true}, false},
                                                  {{"int8_int8dot", Kind::kInt8, true}, false},
                                                  {{"ggml_q4_k_m_int8dot", Kind::kQ4KM, true}, false}};
  for (const auto& [v, bf16_dot] : moe)
    benchmark::RegisterBenchmark((std::string("moe_layer/") + v.label).c_str(), dgemma::bench_moe, v, bf16_dot)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
