#pragma once
// Several sequences on one model. The model has one KV cache and no batch
// dimension, so concurrent requests are interleaved, not batched: every
// in-flight sequence owns a KV cache, and before each encoder or decoder pass
// it takes the model's turn (a FIFO ticket lock: sequences alternate pass by
// pass, i.e. at denoising-step granularity), swaps its cache in, runs the
// pass and swaps it back. The per-step work outside the model (temperature,
// entropy, sampling over [L, V] logits) runs on the sequence's own thread, in
// parallel with another sequence's pass.
//
// Scheduler: a bounded FIFO queue of jobs and `slots` worker threads, each
// with its own sequence; a full queue refuses new jobs (the server answers
// 429), a job cancelled while queued never starts.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "generate/diffusion_model.h"
#include "model/kv_cache.h"

namespace dgemma {
class DiffusionGemma;
}

namespace dgemma::server {

class Metrics;

class SharedModel {
 public:
  using MakeCache = std::function<KvCache()>;
  using SwapCache = std::function<void(KvCache&)>;
  // `model` must outlive this. `make_cache` returns an empty cache of the
  // model's layout, `swap_cache` exchanges the model's cache with its argument.
  SharedModel(DiffusionModel& model, MakeCache make_cache, SwapCache swap_cache);
  explicit SharedModel(DiffusionGemma& model);

  DiffusionModel& model() { return model_; }
  KvCache make_cache() const { return make_cache_(); }
  uint64_t passes() const { return passes_.load(); }  // encoder + decoder passes run

 private:
  friend class SequenceModel;
  // Runs `pass` with `cache` swapped in, in FIFO turn order.
  void run(KvCache& cache, const std::function<void()>& pass);

  DiffusionModel& model_;
  MakeCache make_cache_;
  SwapCache swap_cache_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
  std::atomic<uint64_t> passes_{0};
};

// One sequence: a DiffusionModel whose passes run on the shared model with
// this sequence's own KV cache.
class SequenceModel final : public DiffusionModel {
 public:
  explicit SequenceModel(SharedModel& shared);

  int64_t vocab_size() const override { return shared_.model_.vocab_size(); }
  int64_t canvas_length() const override { return shared_.model_.canvas_length(); }
  int64_t cache_length() const override { return cache_.length; }
  void encode(const std::vector<int32_t>& ids) override;
  void decode(const int32_t* canvas, const float* self_conditioning, float* logits) override;
  void truncate_cache(int64_t length) override;

 private:
  SharedModel& shared_;
  KvCache cache_;
};

// A unit of work for the scheduler.
class Job {
 public:
  virtual ~Job() = default;
  // Runs on a worker thread with a sequence whose cache is empty.
  virtual void run(DiffusionModel& sequence) = 0;
  // The job will never run: cancelled while queued, or the scheduler stopped.
  virtual void dropped() {}

  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  std::chrono::steady_clock::time_point queued_at{};

 private:
  std::atomic<bool> cancelled_{false};
};

class Scheduler {
 public:
  // `metrics` (optional) gets the queue depth and in-flight count.
  Scheduler(SharedModel& model, int slots, int64_t max_queue, Metrics* metrics = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `job`; false (and nothing queued) when every slot is busy and
  // max_queue jobs are already waiting, or the scheduler is stopping.
  bool submit(std::shared_ptr<Job> job);
  // Cancels `job`: removed from the queue (dropped() is called) if it has not
  // started; a running job sees cancelled() and ends at its next pass.
  void cancel(const std::shared_ptr<Job>& job);
  // Stops admitting (submit returns false from now on) and drops the queued
  // jobs (dropped() is called); running jobs go on to their end. Draining a
  // server: shutdown() still has to follow.
  void close();
  bool closed() const;
  // Cancels every job, waits for the workers. Idempotent.
  void shutdown();

  int slots() const { return int(workers_.size()); }
  int64_t queued() const;
  int64_t in_flight() const;

 private:
  void worker();
  void publish();  // queue gauges -> metrics (call with mu_ held)

  SharedModel& model_;
  int64_t max_queue_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> running_;
  bool closed_ = false;    // close(): no new jobs
  bool stopping_ = false;  // shutdown(): workers exit
  std::vector<std::thread> workers_;
};

}  // namespace dgemma::server
