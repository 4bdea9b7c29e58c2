#pragma once
// The clock the `dgemma bench` benchmarks (tools/bench.cc, tools/bench_step.cc)
// time with.
#include <chrono>

namespace dgemma::cli {

// Seconds on the steady clock: only differences mean anything.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace dgemma::cli
