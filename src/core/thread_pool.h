#pragma once
// A persistent pool of worker threads with a blocking parallel_for. Work is
// split into contiguous chunks; every output element is computed by exactly
// one thread in a fixed order, so results do not depend on the thread count.
// Chunk c of a call always runs on worker c (the caller runs chunk 0), which
// lets kernels keep per-thread scratch in thread_local storage.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace dgemma {

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // Calls fn(begin, end) over [0, n) in chunks of at least `grain` items
  // (at most size() chunks). Not re-entrant: do not call from inside fn.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    run(n, grain, &invoke_function, const_cast<void*>(static_cast<const void*>(&fn)));
  }
  // Same for any callable, without wrapping it in a std::function (no heap
  // allocation per call for lambdas with many captures).
  template <class Fn,
            class = std::enable_if_t<!std::is_same_v<std::decay_t<Fn>, std::function<void(int64_t, int64_t)>>>>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(
        n, grain, [](void* f, int64_t b, int64_t e) { (*static_cast<F*>(f))(b, e); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Invoke = void (*)(void*, int64_t, int64_t);
  static void invoke_function(void* f, int64_t b, int64_t e) {
    (*static_cast<const std::function<void(int64_t, int64_t)>*>(f))(b, e);
  }
  void run(int64_t n, int64_t grain, Invoke invoke, void* fn);
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  Invoke job_invoke_ = nullptr;
  void* job_fn_ = nullptr;
  int64_t job_n_ = 0, job_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace dgemma
