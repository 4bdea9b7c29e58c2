#include "core/thread_pool.h"

#include <algorithm>

namespace dgemma {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& w : workers_) w.join();
}

static void run_chunk(void (*invoke)(void*, int64_t, int64_t), void* fn, int64_t n, int64_t chunks, int64_t c) {
  int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
  if (begin < end) invoke(fn, begin, end);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  while (true) {
    Invoke invoke;
    void* fn;
    int64_t n, chunks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      invoke = job_invoke_;
      fn = job_fn_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (index < chunks) run_chunk(invoke, fn, n, chunks, index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n, int64_t grain, Invoke invoke, void* fn) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (chunks <= 1 || workers_.empty()) {
    invoke(fn, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_invoke_ = invoke;
    job_fn_ = fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = int(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  run_chunk(invoke, fn, n, chunks, 0);
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace dgemma
