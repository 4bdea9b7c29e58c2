#pragma once
// Several sequences on one model. Every in-flight sequence owns a KV cache.
// Encoder passes (and cache truncation) take the model's turn one at a time
// (a FIFO ticket lock): the sequence swaps its cache in, runs the pass and
// swaps it back. Decoder passes are batched (DiffusionGemma::decode_batch) when the
// model has a batched decoder pass (DiffusionGemma::decode_batch, or a
// DecodeBatch callback): the requests of concurrent sequences are collected
// into one batch, which takes one turn and runs as one pass over all their
// canvases, each against its own cache; every sequence gets exactly the
// logits its own pass would give. A batch waits, once it is the model's
// turn, until every sequence that is between two decoder passes (it ran one
// and has not finished, encoded or truncated since) has joined, or it holds
// max_batch requests, or a straggler has kept it waiting as long as the last
// decoder pass took (at least 1 ms): a sequence that stalls or ends between
// steps never blocks the others for long. Without a batched pass, decoder
// passes take turns like encoder passes (interleaving, at denoising-step
// granularity). The per-step work outside the model (temperature, entropy,
// sampling over [L, V] logits) runs on the sequence's own thread, in
// parallel with the model's pass — unless the model runs that pass itself
// (DiffusionGemma: samples_rows()): then a sequence's decode_sample() joins
// the batch like a decoder pass, the batched pass samples each sequence's
// rows where its logits are (on a GPU: no [L, V] copy to the host), and the
// sequence keeps its processed logits z for its next step.
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
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "model/diffusion_model.h"
#include "model/decode_item.h"
#include "model/kv_cache.h"
#include "core/tensor.h"

namespace dgemma {
class DiffusionGemma;
}

namespace dgemma::server {

class Metrics;
class SequenceModel;

class SharedModel {
 public:
  using MakeCache = std::function<KvCache()>;
  using SwapCache = std::function<void(KvCache&)>;
  // One sequence's decoder pass in a batch (model/decode_item.h): its cache
  // (only read; the scheduler sets it), canvas [canvas_length], and either
  // host logits (self-conditioning [canvas_length, vocab] or null, and where
  // its logits go) or, only when the batched pass samples rows, its sampler
  // pass with the sequence's z.
  using DecodeRequest = DecodeItem;
  // Runs the decoder passes of several sequences as one pass; each request's
  // logits must equal those of the model's decode() with its cache swapped in.
  using DecodeBatch = std::function<void(std::span<const DecodeRequest>)>;
  static constexpr int kDefaultMaxBatch = 8;

  // `model` must outlive this. `make_cache` returns an empty cache of the
  // model's layout, `swap_cache` exchanges the model's cache with its
  // argument; `decode_batch` (optional) is the batched decoder pass, at most
  // `max_batch` sequences per pass (without it decoder passes interleave).
  SharedModel(DiffusionModel& model, MakeCache make_cache, SwapCache swap_cache, DecodeBatch decode_batch = {},
              int max_batch = kDefaultMaxBatch);
  // Batches with DiffusionGemma::decode_batch; with `sample_rows` the
  // sequences' sampler passes run in the batched pass too (samples_rows()).
  explicit SharedModel(DiffusionGemma& model, int max_batch = kDefaultMaxBatch, bool sample_rows = true);

  DiffusionModel& model() { return model_; }
  KvCache make_cache() const { return make_cache_(); }
  uint64_t passes() const { return passes_.load(); }              // encoder + decoder passes run (a batch counts once)
  uint64_t decode_calls() const { return decode_calls_.load(); }  // decoder passes sequences asked for
  uint64_t decoder_passes() const { return decoder_passes_.load(); }  // decoder passes run (a batch counts once)
  bool batching() const { return bool(decode_batch_); }
  // Whether sequences run their sampler passes in the model's batched pass.
  bool samples_rows() const { return sample_rows_; }
  int max_batch() const { return max_batch_; }
  // Where each decoder pass's batch size is counted (Metrics::add_decoder_pass);
  // nullptr: nowhere. The Scheduler sets its own.
  void set_metrics(Metrics* metrics);

 private:
  friend class SequenceModel;
  struct Batch;
  // Runs `pass` with `cache` swapped in, in FIFO turn order.
  void run(KvCache& cache, const std::function<void()>& pass);
  // An encoder pass or truncation of `seq`: it is no longer between two
  // decoder passes, then run().
  void run_exclusive(SequenceModel& seq, const std::function<void()>& pass);
  // A decoder pass of `seq`: joins (or opens) the batch being collected and
  // returns when that batch ran; rethrows this request's error.
  void decode(SequenceModel& seq, const DecodeRequest& request);
  // Runs a closed batch (without mu_): one decode_batch_ call, or the single
  // pass of a batch of one; when the batched pass throws, each request runs
  // alone so that an error reaches only the request that caused it.
  void run_batch(Batch& batch);
  // `seq` is (not) between two decoder passes. With mu_ held.
  void set_decoding(SequenceModel& seq, bool decoding);

  DiffusionModel& model_;
  MakeCache make_cache_;
  SwapCache swap_cache_;
  DecodeBatch decode_batch_;
  int max_batch_;
  bool sample_rows_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
  std::shared_ptr<Batch> open_;                       // the batch still taking requests, if any
  int decoding_ = 0;                                  // sequences between two decoder passes, not in a batch
  std::chrono::steady_clock::duration last_batch_{};  // how long the last batched pass took
  Metrics* metrics_ = nullptr;
  std::atomic<uint64_t> passes_{0}, decode_calls_{0}, decoder_passes_{0};
};

// One sequence: a DiffusionModel whose passes run on the shared model with
// this sequence's own KV cache.
class SequenceModel final : public DiffusionModel {
 public:
  explicit SequenceModel(SharedModel& shared);
  ~SequenceModel() override;
  SequenceModel(const SequenceModel&) = delete;
  SequenceModel& operator=(const SequenceModel&) = delete;

  int64_t vocab_size() const override { return shared_.model_.vocab_size(); }
  int64_t canvas_length() const override { return shared_.model_.canvas_length(); }
  int64_t cache_length() const override { return cache_.length; }
  void encode(const std::vector<int32_t>& ids) override;
  // The prompt's pictures run through the vision tower inside the same
  // exclusive turn as the encoder pass they feed (docs/server.md §8.3).
  void encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images) override;
  void decode(const int32_t* canvas, const float* self_conditioning, float* logits) override;
  void truncate_cache(int64_t length) override;
  // The sampler pass in the shared model's batched pass (when the shared
  // model samples rows): this sequence's z stays in z_, where the model's
  // backend keeps it (DiffusionModel::decode_sample).
  bool samples_rows() const override { return shared_.samples_rows(); }
  void decode_sample(const int32_t* canvas, bool use_self_conditioning, float temperature, const double* uniforms,
                     RowSamples& out) override;
  void processed_logits(float* out) override;
  // This sequence makes no pass for now (its generation ended): a batch
  // being collected stops waiting for its next decoder pass, and the
  // sequence's z is released (a later decode_sample() starts unconditioned).
  void idle();

 private:
  friend class SharedModel;
  SharedModel& shared_;
  KvCache cache_;
  bool decoding_ = false;  // between two decoder passes (guarded by shared_.mu_)
  Tensor z_;               // z of the last decode_sample()
  bool z_valid_ = false;   // and whether it is the previous pass's
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
