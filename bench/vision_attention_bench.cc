// The vision tower's attention (docs/model.md §7.4): bidirectional (mask
// none, no cache) over the N patches of one image, 16 heads of d = 72 (the
// 26B tower; N = 2520 is its largest image) and d = 8 (golden V's tower),
// against one of the tower's linears in the same run: x[2520, 1152] times a
// bf16 W[1152, 1152]. Counters: GFLOPS (4·N²·d·heads per call; best of the
// interleaved runs), linear_GFLOPS, vs_linear (attention rate / linear rate),
// and the measured peak.
// Modes: fma (fp32 FMA, the default), dot (bf16_dot: Q, K, V and the
// probabilities rounded to bf16; the linear on vdpbf16ps).
//
//   build/release/bench_vision_attention_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "bench_common.h"

namespace dgemma::bench {
namespace {

enum Mode { kFma = 0, kDot = 1 };

// The tower's linear [N, H] · [H, H]ᵀ on bf16 weights, in the backend's mode.
struct TowerLinear {
  Tensor x, out;
  std::vector<uint16_t> wb;
  WeightRef w;
  OpCall c;
  TowerLinear(int64_t N, int64_t H) {
    x = Tensor::f32({N, H});
    fill_random(x.f, 1.0f, 21);
    std::vector<float> wf(size_t(H * H));
    fill_random(wf, 0.03f, 22);
    wb = to_bf16(wf);
    w.name = std::string("o_proj");
    w.shape = {H, H};
    w.dtype = DType::kBF16;
    w.data = wb.data();
    c.kind = OpKind::kLinear;
    c.in = {&x};
    c.w = {&w};
    c.out = {&out};
    prepare_op(c);
  }
};

void BM_VisionAttention(benchmark::State& st) {
  const int64_t N = st.range(0), d = st.range(1), heads = 16, H = 1152;
  const int mode = int(st.range(2));
  const int threads = all_threads();
  Tensor q = Tensor::f32({N, heads, d}), k = Tensor::f32({N, heads, d}), v = Tensor::f32({N, heads, d});
  Tensor pos = Tensor::i32({N}), out;
  fill_random(q.f, 0.3f, 11);  // after q_norm and k_norm the rows have unit RMS: scores of a few units
  fill_random(k.f, 0.3f, 12);
  fill_random(v.f, 1.0f, 13);
  for (int64_t n = 0; n < N; ++n) pos.i[size_t(n)] = int32_t(n);
  CpuBackendOptions o;
  o.threads = threads;
  o.bf16_dot = mode == kDot;
  CpuBackend b(o);
  OpCall c;
  c.kind = OpKind::kAttention;
  c.in = {&q, &k, &v, &pos, &pos};
  c.out = {&out};
  prepare_op(c);
  TowerLinear lin(N, H);
  b.run(lin.c);  // packs the weight
  for (auto _ : st) {
    b.run(c);
    benchmark::ClobberMemory();
  }
  const double flop = 4.0 * double(N) * double(N) * double(d) * double(heads);
  const double lin_flop = 2.0 * double(N) * double(H) * double(H);
  set_rate(st, "GFLOPS_mean", flop / 1e9);
  const auto [t_attn, t_lin] = best_interleaved([&] { b.run(c); }, [&] { b.run(lin.c); }, 3);
  st.counters["GFLOPS"] = flop / t_attn / 1e9;
  st.counters["linear_GFLOPS"] = lin_flop / t_lin / 1e9;
  st.counters["vs_linear"] = (flop / t_attn) / (lin_flop / t_lin);
  const cpu::PeakRates& p = peak(threads);
  st.counters["peak_GFLOPS"] = mode == kDot ? p.dot_gflops : p.fma_gflops;
  st.counters["threads"] = threads;
  st.SetLabel(std::string(mode == kDot ? "dot " : "fma ") + std::string(isa_name(b.isa())) + " " +
              cpu_features().brand);
}
BENCHMARK(BM_VisionAttention)
    ->ArgNames({"N", "d", "mode"})
    ->ArgsProduct({{2520}, {72, 8}, {kFma, kDot}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dgemma::bench

BENCHMARK_MAIN();
