#pragma once
// Shared pieces of the CPU benchmarks: random operands, the OpenBLAS sgemm
// baseline (bench binaries only; the library and the CLI never link BLAS),
// peak rates cached per thread count, and best-of timing. Every ratio a
// benchmark reports is measured in the same process, interleaved with the
// thing it is compared to, best of several short runs: the machines these
// run on are shared and noisy, and the best window is the least disturbed.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_bench.h"

#if DGEMMA_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
#endif

namespace dgemma::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline int all_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }
// 1, 2, 4, ... and all cores.
inline std::vector<int> thread_counts() {
  std::vector<int> v;
  for (int t = 1; t < all_threads(); t *= 2) v.push_back(t);
  v.push_back(all_threads());
  return v;
}

// Fills with values of magnitude ~scale (cheap generator: setup speed matters
// for the 1.5 GB expert tensors).
inline void fill_random(std::vector<float>& v, float scale, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = scale * (float(s >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}
inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
  return b;
}

// Peak rates of the detected ISA with `threads` threads, measured once per
// process.
inline const cpu::PeakRates& peak(int threads) {
  static std::map<int, cpu::PeakRates> cache;
  auto it = cache.find(threads);
  if (it == cache.end()) it = cache.emplace(threads, cpu::measure_peak(detected_isa(), threads)).first;
  return it->second;
}

// Best time of `reps` calls of each of two functions, interleaved (a, b, a,
// b, ...) so that both see the same machine load.
template <class A, class B>
std::pair<double, double> best_interleaved(const A& a, const B& b, int reps) {
  double ta = 1e30, tb = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
    a();
    ta = std::min(ta, now_s() - t0);
    t0 = now_s();
    b();
    tb = std::min(tb, now_s() - t0);
  }
  return {ta, tb};
}

#if DGEMMA_HAVE_OPENBLAS
// C[M,N] = X[M,K] · W[N,K]ᵀ in fp32 (the weight converted to fp32: OpenBLAS
// of Debian 12 has no bf16 GEMM).
struct Sgemm {
  int64_t m, n, k;
  const float *x, *w;
  float* c;
  void operator()() const {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, x, int(k), w, int(k), 0.0f, c,
                int(n));
  }
};
inline std::string blas_core() { return openblas_get_corename(); }
#endif

inline void set_rate(benchmark::State& st, const char* name, double flop_per_iter) {
  st.counters[name] = benchmark::Counter(flop_per_iter * double(st.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace dgemma::bench
