// CPU kernel speed at the shapes of the real 26B-A4B model (docs/model.md §1.1), each
// with ratios against baselines measured in the same run (bench_common.h):
//   Peak        register-only fp32 FMA and bf16 vdpbf16ps loops (the roofline)
//   Linear      canvas GEMM M=256, K=2816, N ∈ {2816, 2112, 4096}
//   ExpertGemm  one expert: M=16, K=2816, N=1408 (gate/up) and M=16, K=704, N=2816 (down)
//   MoeLayer    all 128 experts, top-8 routing of 256 tokens (grouped GEMMs)
//   Attention   canvas queries over 1023 cached + 256 canvas keys (d=256) and 768 + 256 (d=512)
//   Softcap     256 × 262144 logits
//   SoftEmbedding  self-conditioning 256 × 262144 probabilities × the bf16 table
//               (H = 2816), sparse rows (default) against the dense-only path,
//               for canvases with 100 %, 50 % and 0 % confident rows
// Modes: fma = fp32 FMA on bf16 weights (exact widening; the default),
//        dot = vdpbf16ps (activations rounded to bf16; CpuBackendOptions::bf16_dot),
//        f32 = fp32 FMA on fp32 weights.
// Counters: GFLOPS (mean), GFLOPS_best, sgemm_GFLOPS / vs_sgemm (OpenBLAS
// cblas_sgemm, fp32, same threads; OPENBLAS_CORETYPE picks its kernel),
// peak_GFLOPS / frac_peak (fma peak for fma/f32, dot peak for dot), vs_reference.
//
//   build-perf/bench_cpu_kernels_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>

#include "bench_common.h"
#include "backend/cpu/cpu_kernels.h"
#include "support/test_rng.h"

namespace dgemma::bench {
namespace {

enum Mode { kFma = 0, kDot = 1, kF32 = 2 };
const char* mode_name(int m) { return m == kFma ? "fma" : m == kDot ? "dot" : "f32"; }

int threads_arg(int64_t t) { return t == 0 ? all_threads() : int(t); }

void report_peak(benchmark::State& st, double gflops, int mode, int threads) {
  const cpu::PeakRates& p = peak(threads);
  const double pk = mode == kDot ? p.dot_gflops : p.fma_gflops;
  st.counters["GFLOPS_best"] = gflops;
  st.counters["peak_GFLOPS"] = pk;
  st.counters["frac_peak"] = pk > 0 ? gflops / pk : 0.0;
  if (p.dot_gflops > 0) st.counters["frac_dot_peak"] = gflops / p.dot_gflops;
}

void BM_Peak(benchmark::State& st) {
  const int threads = threads_arg(st.range(0));
  cpu::PeakRates r;
  for (auto _ : st) r = cpu::measure_peak(detected_isa(), threads);
  st.counters["fma_GFLOPS"] = r.fma_gflops;
  st.counters["dot_GFLOPS"] = r.dot_gflops;
  st.counters["threads"] = r.threads;
  st.SetLabel(std::string(isa_name(detected_isa())) + " " + cpu_features().brand);
}
BENCHMARK(BM_Peak)->Arg(1)->Arg(0)->Iterations(1)->Unit(benchmark::kMillisecond);

// One linear op (x[M,K] · W[N,K]ᵀ) with its sgemm twin.
void gemm_bench(benchmark::State& st, int64_t M, int64_t K, int64_t N, int mode, int threads) {
  std::vector<float> xf(size_t(M * K)), wf(size_t(N * K));
  fill_random(xf, 1.0f, 1);
  fill_random(wf, 0.05f, 2);
  const std::vector<uint16_t> wb = to_bf16(wf);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = bf16_to_f32(wb[i]);  // same values for every mode
  Tensor x = Tensor::f32({M, K}), out;
  x.f = xf;
  WeightRef w;
  w.name = std::string("w");
  w.shape = {N, K};
  w.dtype = mode == kF32 ? DType::kF32 : DType::kBF16;
  w.data = mode == kF32 ? static_cast<const void*>(wf.data()) : static_cast<const void*>(wb.data());
  CpuBackendOptions o;
  o.threads = threads;
  o.bf16_dot = mode == kDot;
  CpuBackend b(o);
  OpCall c;
  c.kind = OpKind::kLinear;
  c.in = {&x};
  c.w = {&w};
  c.out = {&out};
  prepare_op(c);
  b.run(c);  // packs the weight
  for (auto _ : st) {
    b.run(c);
    benchmark::ClobberMemory();
  }
  const double flop = 2.0 * double(M) * double(N) * double(K);
  set_rate(st, "GFLOPS", flop / 1e9);
  auto ours = [&] { b.run(c); };
#if DGEMMA_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
  std::vector<float> cb(size_t(M * N));
  Sgemm sg{M, N, K, xf.data(), wf.data(), cb.data()};
  sg();
  const auto [t_ours, t_blas] = best_interleaved(ours, sg, 7);
  st.counters["sgemm_GFLOPS"] = flop / t_blas / 1e9;
  st.counters["vs_sgemm"] = t_blas / t_ours;
  st.SetLabel(std::string(mode_name(mode)) + " " + std::string(isa_name(b.isa())) + " blas:" + blas_core());
#else
  const auto [t_ours, t_unused] = best_interleaved(
      ours, [] {}, 7);
  (void)t_unused;
  st.SetLabel(std::string(mode_name(mode)) + " " + std::string(isa_name(b.isa())) + " (no OpenBLAS)");
#endif
  report_peak(st, flop / t_ours / 1e9, mode, threads);
  st.counters["threads"] = threads;
}

void BM_Linear(benchmark::State& st) {
  gemm_bench(st, 256, 2816, st.range(0), int(st.range(1)), threads_arg(st.range(2)));
}
BENCHMARK(BM_Linear)
    ->ArgNames({"N", "mode", "threads"})
    ->ArgsProduct({{2816, 2112, 4096}, {kFma, kDot, kF32}, {1, 0}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Thread scaling 1 → all cores of the canvas GEMM.
void BM_LinearThreads(benchmark::State& st) { gemm_bench(st, 256, 2816, 2816, int(st.range(1)), int(st.range(0))); }
BENCHMARK(BM_LinearThreads)
    ->ArgNames({"threads", "mode"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int t : thread_counts())
        for (int m : {kFma, kDot}) b->Args({t, m});
    })
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_ExpertGemm(benchmark::State& st) {
  const bool gate_up = st.range(0) == 0;
  gemm_bench(st, 16, gate_up ? 2816 : 704, gate_up ? 1408 : 2816, int(st.range(1)), threads_arg(st.range(2)));
}
BENCHMARK(BM_ExpertGemm)
    ->ArgNames({"down", "mode", "threads"})
    ->ArgsProduct({{0, 1}, {kFma, kDot}, {1, 0}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// All experts of one layer for a 256-token canvas (docs/model.md §1.5): 128 experts,
// top-8, H = 2816, I = 704. Baseline: the same grouped computation with one
// OpenBLAS sgemm per expert and matrix (gathered rows, fp32 weights).
void BM_MoeLayer(benchmark::State& st) {
  const int mode = int(st.range(0)), threads = threads_arg(st.range(1));
  constexpr int64_t M = 256, H = 2816, I = 704, E = 128, K = 8;
  std::vector<float> xf(size_t(M * H)), guf(size_t(E * 2 * I * H)), dnf(size_t(E * H * I));
  fill_random(xf, 1.0f, 3);
  fill_random(guf, 0.04f, 4);
  fill_random(dnf, 0.04f, 5);
  const std::vector<uint16_t> gub = to_bf16(guf), dnb = to_bf16(dnf);
  Tensor x = Tensor::f32({M, H}), idx = Tensor::i32({M, K}), wts = Tensor::f32({M, K}), out;
  x.f = xf;
  Rng rng(7);
  idx.i = distinct_expert_ids(M, E, K, rng);
  std::fill(wts.f.begin(), wts.f.end(), 0.125f);
  WeightRef gu, dn;
  gu.name = std::string("gate_up");
  dn.name = std::string("down");
  gu.dtype = dn.dtype = DType::kBF16;
  gu.shape = {E, 2 * I, H};
  dn.shape = {E, H, I};
  gu.data = gub.data();
  dn.data = dnb.data();
  CpuBackendOptions o;
  o.threads = threads;
  o.bf16_dot = mode == kDot;
  CpuBackend b(o);
  OpCall c;
  c.kind = OpKind::kMoeExperts;
  c.in = {&x, &idx, &wts};
  c.w = {&gu, &dn};
  c.out = {&out};
  prepare_op(c);
  b.run(c);
  for (auto _ : st) {
    b.run(c);
    benchmark::ClobberMemory();
  }
  const double flop = cpu::op_flops(c);
  set_rate(st, "GFLOPS", flop / 1e9);
  auto ours = [&] { b.run(c); };
#if DGEMMA_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
  for (size_t i = 0; i < guf.size(); ++i) guf[i] = bf16_to_f32(gub[i]);
  for (size_t i = 0; i < dnf.size(); ++i) dnf[i] = bf16_to_f32(dnb[i]);
  std::vector<float> xs(size_t(M * H)), gup(size_t(M * 2 * I)), act(size_t(M * I)), ys(size_t(M * H));
  auto blas = [&] {
    for (int64_t e = 0; e < E; ++e) {
      int64_t n = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k)
          if (idx.i[size_t(m * K + k)] == e) std::copy_n(xf.data() + m * H, H, xs.data() + (n++) * H);
      if (!n) continue;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(2 * I), int(H), 1.0f, xs.data(), int(H),
                  guf.data() + e * 2 * I * H, int(H), 0.0f, gup.data(), int(2 * I));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < I; ++i)
          act[size_t(r * I + i)] =
              cpu::reference::gelu_tanh(gup[size_t(r * 2 * I + i)]) * gup[size_t(r * 2 * I + I + i)];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(H), int(I), 1.0f, act.data(), int(I),
                  dnf.data() + e * H * I, int(I), 0.0f, ys.data(), int(H));
    }
  };
  const auto [t_ours, t_blas] = best_interleaved(ours, blas, 3);
  st.counters["sgemm_GFLOPS"] = flop / t_blas / 1e9;
  st.counters["vs_sgemm"] = t_blas / t_ours;
  st.SetLabel(std::string(mode_name(mode)) + " per-expert sgemm baseline, blas:" + blas_core());
#else
  const auto [t_ours, t_unused] = best_interleaved(
      ours, [] {}, 3);
  (void)t_unused;
  st.SetLabel(mode_name(mode));
#endif
  report_peak(st, flop / t_ours / 1e9, mode, threads);
  st.counters["threads"] = threads;
}
BENCHMARK(BM_MoeLayer)
    ->ArgNames({"mode", "threads"})
    ->ArgsProduct({{kFma, kDot}, {0}})
    ->UseRealTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

// Decoder attention of one layer (docs/model.md §2.3/§2.4): 256 canvas queries over
// `cached` committed keys + the 256 canvas keys; baseline: the reference kernel.
void BM_Attention(benchmark::State& st) {
  const bool full = st.range(0) == 1;
  const int threads = threads_arg(st.range(1));
  const int64_t M = 256, cached = full ? 768 : 1023, S = cached + M, Hq = 16, Hk = full ? 2 : 8, d = full ? 512 : 256;
  Tensor q = Tensor::f32({M, Hq, d}), k = Tensor::f32({S, Hk, d}), v = Tensor::f32({S, Hk, d});
  Tensor qpos = Tensor::i32({M}), kpos = Tensor::i32({S}), out;
  fill_random(q.f, 0.1f, 8);
  fill_random(k.f, 0.1f, 9);
  fill_random(v.f, 1.0f, 10);
  for (int64_t s = 0; s < S; ++s) kpos.i[size_t(s)] = int32_t(s);
  for (int64_t m = 0; m < M; ++m) qpos.i[size_t(m)] = int32_t(cached + m);
  CpuBackendOptions o;
  o.threads = threads;
  CpuBackend b(o);
  OpCall c;
  c.kind = OpKind::kAttention;
  c.in = {&q, &k, &v, &qpos, &kpos};
  c.out = {&out};
  prepare_op(c);
  for (auto _ : st) {
    b.run(c);
    benchmark::ClobberMemory();
  }
  const double flop = cpu::op_flops(c);
  set_rate(st, "GFLOPS", flop / 1e9);
  ThreadPool pool(threads);
  auto ours = [&] { b.run(c); };
  auto ref = [&] { cpu::reference::attention(c, pool); };
  const auto [t_ours, t_ref] = best_interleaved(ours, ref, 3);
  st.counters["vs_reference"] = t_ref / t_ours;
  report_peak(st, flop / t_ours / 1e9, kFma, threads);
  st.counters["threads"] = threads;
  st.SetLabel(full ? "full layer d=512, 2 kv heads" : "sliding layer d=256, 8 kv heads");
}
BENCHMARK(BM_Attention)
    ->ArgNames({"full", "threads"})
    ->ArgsProduct({{0, 1}, {0}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The final soft-cap over a canvas of logits (67 M tanh); baseline: reference.
void BM_Softcap(benchmark::State& st) {
  const int threads = threads_arg(st.range(0));
  Tensor x = Tensor::f32({256, 262144}), out;
  fill_random(x.f, 20.0f, 11);
  CpuBackendOptions o;
  o.threads = threads;
  CpuBackend b(o);
  OpCall c;
  c.kind = OpKind::kSoftcap;
  c.in = {&x};
  c.out = {&out};
  c.attrs.cap = 30.0f;
  prepare_op(c);
  for (auto _ : st) {
    b.run(c);
    benchmark::ClobberMemory();
  }
  ThreadPool pool(threads);
  const auto [t_ours, t_ref] = best_interleaved([&] { b.run(c); }, [&] { cpu::reference::softcap(c, pool); }, 3);
  st.counters["vs_reference"] = t_ref / t_ours;
  st.counters["Gelem_per_s"] = double(x.numel()) / t_ours / 1e9;
}
BENCHMARK(BM_Softcap)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

// Self-conditioning at real dimensions. A confident row (a late denoising
// step) has 1-8 tokens 25-30 logits above a N(0, 3) rest, at temperature 0.5;
// a flat row (an early step) is N(0, 3) only. Baseline: the dense-only path
// (CpuBackendOptions::sparse_self_conditioning = false), same threads.
void BM_SoftEmbedding(benchmark::State& st) {
  const int64_t confident_pct = st.range(0);
  const int threads = threads_arg(st.range(1));
  const int64_t M = 256, V = 262144, H = 2816;
  Tensor logits = Tensor::f32({M, V}), out;
  fill_random(logits.f, 3.0f, 21);
  for (int64_t m = 0; m < M * confident_pct / 100; ++m)
    for (int64_t k = 0; k <= m % 8; ++k) logits.f[size_t(m * V + (k * 104729 + m * 7919) % V)] = 25.0f + float(k % 6);
  for (float& x : logits.f) x /= 0.5f;
  std::vector<float> tf(size_t(V * H));
  fill_random(tf, 0.05f, 22);
  const std::vector<uint16_t> tb = to_bf16(tf);
  tf = {};
  WeightRef table;
  table.name = "embed";
  table.dtype = DType::kBF16;
  table.shape = {V, H};
  table.data = tb.data();
  OpCall c;
  c.kind = OpKind::kSoftEmbedding;
  c.in = {&logits};
  c.w = {&table};
  c.out = {&out};
  c.attrs.scale = 53.0f;
  prepare_op(c);
  CpuBackendOptions o;
  o.threads = threads;
  CpuBackend sparse(o);
  o.sparse_self_conditioning = false;
  CpuBackend dense(o);
  for (auto _ : st) {
    sparse.run(c);
    benchmark::ClobberMemory();
  }
  const auto [t_sparse, t_dense] = best_interleaved([&] { sparse.run(c); }, [&] { dense.run(c); }, 2);
  const SoftEmbeddingStats s = sparse.soft_embedding_stats();
  st.counters["vs_dense"] = t_dense / t_sparse;
  st.counters["dense_ms"] = t_dense * 1e3;
  st.counters["sparse_rows_pct"] =
      100.0 * double(s.rows_sparse) / double(std::max<int64_t>(1, s.rows_sparse + s.rows_dense));
  st.counters["kept_per_sparse_row"] = double(s.kept_entries) / double(std::max<int64_t>(1, s.rows_sparse));
  st.counters["threads"] = threads;
}
BENCHMARK(BM_SoftEmbedding)
    ->ArgNames({"confident_pct", "threads"})
    ->ArgsProduct({{100, 50, 0}, {0}})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dgemma::bench

BENCHMARK_MAIN();
