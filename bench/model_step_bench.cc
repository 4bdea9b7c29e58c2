// One denoising step and one canvas commit of DiffusionGemma on a 2-layer
// slice of the real 26B-A4B model (checkpoint/model_slice.h: hidden 2816, 16 heads, head
// dims 256 and 512, 128 experts top-8, vocab 262144, canvas 256, random bf16
// weights), after a 512-token prompt. The slice is written once to
// $DGEMMA_BENCH_SLICE (default: <tmp>/dgemma_bench_slice_2l, 4.7 GB).
//   Step     decoder pass over the 256-position canvas (arg sc: with
//            self-conditioning, i.e. every step after the first: adds the
//            262144-wide soft-embedding product)
//   Commit   encoder pass over 256 committed tokens (cache then truncated back)
// Counters: positions_per_s (canvas positions per second), GFLOPS (FLOP of
// the op vocabulary counted per call, cpu_bench.h), frac_peak (of the fma or
// dot peak measured in the same process), step_s. Threads 1 → all cores.
// Note the two layers are ~20% of a step's FLOP here: the LM head and the
// soft-embedding product (0.38 TFLOP each) dominate; `dgemma bench step`
// prints the per-op split and a 30-layer estimate.
//
//   build-perf/bench_model_step_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "bench_common.h"
#include "checkpoint/model_slice.h"
#include "model/diffusion_gemma.h"
#include "cpu_model.h"

namespace dgemma::bench {
namespace {

constexpr int64_t kPrompt = 512;

DiffusionGemma& slice_model() {
  static std::unique_ptr<DiffusionGemma> m = [] {
    const char* env = std::getenv("DGEMMA_BENCH_SLICE");
    const std::string dir =
        env && *env ? env : (std::filesystem::temp_directory_path() / "dgemma_bench_slice_2l").string();
    ensure_model_slice(dir, 2);
    ModelOptions o;
    o.load_threads = 1;  // its own backend is replaced per benchmark
    o.verify_tied_copies = false;
    auto model = test::load_on_cpu(dir, o);
    std::vector<int32_t> prompt(static_cast<size_t>(kPrompt));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 2) % 262144);
    CpuBackend b(all_threads());
    model->set_backend(b);
    model->encode(prompt);  // (b dies here: every benchmark sets its own backend first)
    return model;
  }();
  return *m;
}

void BM_Step(benchmark::State& st) {
  const int threads = int(st.range(0)) == 0 ? all_threads() : int(st.range(0));
  const bool dot = st.range(1) == 1, sc = st.range(2) == 1;
  DiffusionGemma& m = slice_model();
  CpuBackendOptions o;
  o.threads = threads;
  o.bf16_dot = dot;
  CpuBackend b(o);
  m.set_backend(b);
  const int64_t L = m.canvas_length(), V = m.vocab_size();
  std::vector<int32_t> canvas(static_cast<size_t>(L));
  for (size_t i = 0; i < canvas.size(); ++i) canvas[i] = int32_t((i * 104729 + 17) % size_t(V));
  std::vector<float> prev(size_t(L * V)), logits(size_t(L * V));
  m.decode(canvas.data(), nullptr, prev.data());  // warm-up: packs the weights
  cpu::OpProfile prof;
  m.set_observer(&prof);
  prof.reset();
  m.decode(canvas.data(), sc ? prev.data() : nullptr, logits.data());
  m.set_observer(nullptr);
  const double flop = prof.total_flops();
  double best = 1e30;
  for (auto _ : st) {
    const double t0 = now_s();
    m.decode(canvas.data(), sc ? prev.data() : nullptr, logits.data());
    best = std::min(best, now_s() - t0);
  }
  set_rate(st, "positions_per_s", double(L));
  set_rate(st, "GFLOPS", flop / 1e9);
  const cpu::PeakRates& p = peak(threads);
  const double pk = dot ? p.dot_gflops : p.fma_gflops;
  st.counters["GFLOP_per_step"] = flop / 1e9;
  st.counters["best_step_s"] = best;
  st.counters["best_positions_per_s"] = double(L) / best;
  st.counters["frac_peak"] = pk > 0 ? flop / best / 1e9 / pk : 0.0;
  st.counters["threads"] = threads;
  st.SetLabel(std::string(dot ? "dot" : "fma") + (sc ? " self-conditioned step" : " first step"));
  m.set_backend(b);
}
BENCHMARK(BM_Step)
    ->ArgNames({"threads", "dot", "sc"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int t : thread_counts()) b->Args({t, 0, 1});
      b->Args({0, 1, 1});
      b->Args({0, 0, 0});
      b->Args({0, 1, 0});
    })
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_Commit(benchmark::State& st) {
  const int threads = int(st.range(0)) == 0 ? all_threads() : int(st.range(0));
  const bool dot = st.range(1) == 1;
  DiffusionGemma& m = slice_model();
  CpuBackendOptions o;
  o.threads = threads;
  o.bf16_dot = dot;
  CpuBackend b(o);
  m.set_backend(b);
  const int64_t L = m.canvas_length(), P = m.cache_length();
  std::vector<int32_t> commit(static_cast<size_t>(L));
  for (size_t i = 0; i < commit.size(); ++i) commit[i] = int32_t((i * 31 + 5) % 262144);
  m.encode(commit);  // warm-up
  m.truncate_cache(P);
  cpu::OpProfile prof;
  m.set_observer(&prof);
  prof.reset();
  m.encode(commit);
  m.set_observer(nullptr);
  m.truncate_cache(P);
  const double flop = prof.total_flops();
  double best = 1e30;
  for (auto _ : st) {
    const double t0 = now_s();
    m.encode(commit);
    best = std::min(best, now_s() - t0);
    st.PauseTiming();
    m.truncate_cache(P);
    st.ResumeTiming();
  }
  set_rate(st, "positions_per_s", double(L));
  const cpu::PeakRates& p = peak(threads);
  const double pk = dot ? p.dot_gflops : p.fma_gflops;
  st.counters["GFLOP_per_commit"] = flop / 1e9;
  st.counters["best_commit_s"] = best;
  st.counters["frac_peak"] = pk > 0 ? flop / best / 1e9 / pk : 0.0;
  st.counters["threads"] = threads;
  st.SetLabel(dot ? "dot" : "fma");
}
BENCHMARK(BM_Commit)
    ->ArgNames({"threads", "dot"})
    ->ArgsProduct({{0}, {0, 1}})
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dgemma::bench

BENCHMARK_MAIN();
