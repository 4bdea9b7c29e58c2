#include "server/scheduler.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "dgemma/error.h"
#include "model/diffusion_gemma.h"
#include "server/metrics.h"

namespace dgemma::server {

// A batch of decoder passes: collected while it is open, run once closed.
struct SharedModel::Batch {
  uint64_t ticket = 0;
  std::vector<SequenceModel*> members;
  std::vector<DecodeRequest> requests;
  std::vector<std::exception_ptr> errors;  // per request, after the run
  bool done = false;
};

SharedModel::SharedModel(DiffusionModel& model, MakeCache make_cache, SwapCache swap_cache, DecodeBatch decode_batch,
                         int max_batch)
    : model_(model),
      make_cache_(std::move(make_cache)),
      swap_cache_(std::move(swap_cache)),
      decode_batch_(std::move(decode_batch)),
      max_batch_(max_batch) {
  if (max_batch < 1)
    throw Error("scheduler: the largest decoder batch must be at least 1, got " + std::to_string(max_batch));
}

SharedModel::SharedModel(DiffusionGemma& model, int max_batch, bool sample_rows)
    : SharedModel(
          model, [&model] { return model.empty_cache(); }, [&model](KvCache& c) { model.swap_cache(c); },
          [&model](std::span<const DecodeRequest> requests) { model.decode_batch(requests); }, max_batch) {
  sample_rows_ = sample_rows;
}

void SharedModel::set_metrics(Metrics* metrics) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_ = metrics;
}

void SharedModel::set_decoding(SequenceModel& seq, bool decoding) {
  if (seq.decoding_ == decoding) return;
  seq.decoding_ = decoding;
  decoding_ += decoding ? 1 : -1;
  cv_.notify_all();  // a batch may be waiting for this sequence
}

void SharedModel::run_exclusive(SequenceModel& seq, const std::function<void()>& pass) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    set_decoding(seq, false);
  }
  run(seq.cache_, pass);
}

void SharedModel::decode(SequenceModel& seq, const DecodeRequest& request) {
  ++decode_calls_;
  if (!decode_batch_) {
    if (request.samples) throw Error("scheduler: a sampler pass needs the model's batched pass");
    run_exclusive(seq, [&] { model_.decode(request.canvas, request.self_conditioning, request.logits); });
    ++decoder_passes_;
    std::lock_guard<std::mutex> lock(mu_);
    if (metrics_ != nullptr) metrics_->add_decoder_pass(1);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  set_decoding(seq, false);  // in a batch now, not expected by one
  std::shared_ptr<Batch> batch = open_;
  const bool leader = !batch;
  if (leader) {
    batch = std::make_shared<Batch>();
    batch->ticket = next_ticket_++;
    open_ = batch;
  }
  const size_t slot = batch->requests.size();
  batch->members.push_back(&seq);
  batch->requests.push_back(request);
  batch->requests.back().cache = &seq.cache_;
  if (int(batch->requests.size()) >= max_batch_) open_.reset();  // full: the next request opens another
  cv_.notify_all();
  if (leader) {
    cv_.wait(lock, [&] { return serving_ == batch->ticket; });
    // The model's turn: wait for the sequences between two decoder passes,
    // at most as long as a pass takes (a longer wait would cost more than
    // the pass it saves).
    const auto patience = std::max<std::chrono::steady_clock::duration>(last_batch_, std::chrono::milliseconds(1));
    cv_.wait_for(lock, patience, [&] { return decoding_ == 0 || open_ != batch; });
    if (open_ == batch) open_.reset();
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    run_batch(*batch);
    lock.lock();
    last_batch_ = std::chrono::steady_clock::now() - start;
    if (metrics_ != nullptr) metrics_->add_decoder_pass(int64_t(batch->requests.size()));
    // Every member is now between two decoder passes: the next batch
    // expects them until they decode again, encode, truncate or go idle.
    for (SequenceModel* m : batch->members) set_decoding(*m, true);
    batch->done = true;
    ++serving_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return batch->done; });
  }
  if (batch->errors[slot]) std::rethrow_exception(batch->errors[slot]);
}

void SharedModel::run_batch(Batch& batch) {
  const size_t n = batch.requests.size();
  batch.errors.assign(n, nullptr);
  // One request, or a batched pass that failed: each request alone, with its
  // cache swapped in (as the interleaving path runs it); a sampler pass as a
  // batch of one (it names its cache; a failed pass left its z as it was).
  auto alone = [&](size_t i) {
    KvCache& cache = batch.members[i]->cache_;
    const DecodeRequest& r = batch.requests[i];
    if (r.samples) {
      try {
        ++passes_;
        ++decoder_passes_;
        decode_batch_(std::span<const DecodeRequest>(&r, 1));
      } catch (...) {
        batch.errors[i] = std::current_exception();
      }
      return;
    }
    bool swapped = false;
    try {
      swap_cache_(cache);
      swapped = true;
      ++passes_;
      ++decoder_passes_;
      model_.decode(r.canvas, r.self_conditioning, r.logits);
      swapped = false;
      swap_cache_(cache);
    } catch (...) {
      batch.errors[i] = std::current_exception();
      if (swapped) {
        try {
          swap_cache_(cache);
        } catch (...) {
        }
      }
    }
  };
  if (n == 1) return alone(0);
  try {
    ++passes_;
    ++decoder_passes_;
    decode_batch_(batch.requests);
  } catch (...) {
    for (size_t i = 0; i < n; ++i) alone(i);
  }
}

void SharedModel::run(KvCache& cache, const std::function<void()>& pass) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  cv_.wait(lock, [&] { return serving_ == ticket; });
  lock.unlock();
  // Whatever happens in the pass, the sequence gets its cache back and the
  // next ticket is served.
  struct Release {
    SharedModel& self;
    KvCache& cache;
    bool swapped = false;
    ~Release() {
      if (swapped) self.swap_cache_(cache);
      std::lock_guard<std::mutex> g(self.mu_);
      ++self.serving_;
      self.cv_.notify_all();
    }
  } release{*this, cache};
  swap_cache_(cache);
  release.swapped = true;
  ++passes_;
  pass();
}

SequenceModel::SequenceModel(SharedModel& shared) : shared_(shared), cache_(shared.make_cache()) {}

SequenceModel::~SequenceModel() { idle(); }

void SequenceModel::encode(const std::vector<int32_t>& ids) {
  z_valid_ = false;
  shared_.run_exclusive(*this, [&] { shared_.model_.encode(ids); });
}

void SequenceModel::encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images) {
  z_valid_ = false;
  shared_.run_exclusive(*this, [&] { shared_.model_.encode_with_images(ids, images); });
}

void SequenceModel::decode(const int32_t* canvas, const float* self_conditioning, float* logits) {
  z_valid_ = false;
  SharedModel::DecodeRequest r;
  r.canvas = canvas;
  r.self_conditioning = self_conditioning;
  r.logits = logits;
  shared_.decode(*this, r);
}

void SequenceModel::decode_sample(const int32_t* canvas, bool use_self_conditioning, float temperature,
                                  const double* uniforms, RowSamples& out) {
  if (!samples_rows()) return DiffusionModel::decode_sample(canvas, use_self_conditioning, temperature, uniforms, out);
  if (use_self_conditioning && !z_valid_)
    throw Error(
        "decode_sample: self-conditioning asked for, but the previous pass of this sequence was not a "
        "decode_sample() (encode, decode or truncate_cache came in between)");
  z_valid_ = false;  // until this pass has put its z in place
  SharedModel::DecodeRequest r;
  r.canvas = canvas;
  r.samples = &out;
  r.z = &z_;
  r.z_self_conditioning = use_self_conditioning;
  r.temperature = temperature;
  r.uniforms = uniforms;
  shared_.decode(*this, r);
  z_valid_ = true;
}

void SequenceModel::processed_logits(float* out) {
  if (!z_valid_) throw Error("processed_logits: no decode_sample() since the last change of the cache");
  z_.ensure_host();
  std::memcpy(out, z_.f.data(), z_.f.size() * sizeof(float));
}

void SequenceModel::truncate_cache(int64_t length) {
  z_valid_ = false;
  shared_.run_exclusive(*this, [&] { shared_.model_.truncate_cache(length); });
}

void SequenceModel::idle() {
  // The generation ended: its z (canvas × vocab floats, on the model's
  // device) is not needed by the next job, which starts from a fresh cache.
  z_ = Tensor();
  z_valid_ = false;
  std::lock_guard<std::mutex> lock(shared_.mu_);
  shared_.set_decoding(*this, false);
}

Scheduler::Scheduler(SharedModel& model, int slots, int64_t max_queue, Metrics* metrics)
    : model_(model), max_queue_(max_queue), metrics_(metrics) {
  if (slots < 1)
    throw Error("scheduler: the number of in-flight sequences must be at least 1, got " + std::to_string(slots));
  if (max_queue < 0) throw Error("scheduler: the queue limit must be >= 0, got " + std::to_string(max_queue));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (metrics_ != nullptr) metrics_->set_queue(0, 0, slots);
  }
  if (metrics_ != nullptr) model_.set_metrics(metrics_);
  workers_.reserve(size_t(slots));
  for (int i = 0; i < slots; ++i) workers_.emplace_back([this] { worker(); });
}

Scheduler::~Scheduler() {
  shutdown();
  if (metrics_ != nullptr) model_.set_metrics(nullptr);
}

void Scheduler::publish() {
  if (metrics_ != nullptr) metrics_->set_queue(int64_t(queue_.size()), int64_t(running_.size()), slots());
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  std::lock_guard<std::mutex> lock(mu_);
  // Admitted jobs (running or waiting) are at most slots + max_queue: a job
  // that finds a free slot never counts against the queue.
  if (stopping_ || closed_ || int64_t(queue_.size() + running_.size()) >= int64_t(workers_.size()) + max_queue_)
    return false;
  job->queued_at = std::chrono::steady_clock::now();
  queue_.push_back(std::move(job));
  publish();
  cv_.notify_one();
  return true;
}

void Scheduler::cancel(const std::shared_ptr<Job>& job) {
  job->cancel();
  std::shared_ptr<Job> removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) {
      removed = std::move(*it);
      queue_.erase(it);
      publish();
    }
  }
  if (removed) removed->dropped();
}

void Scheduler::close() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    dropped.swap(queue_);
    publish();
  }
  for (auto& j : dropped) {
    j->cancel();
    j->dropped();
  }
}

bool Scheduler::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_ || stopping_;
}

void Scheduler::shutdown() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    dropped.swap(queue_);
    for (auto& j : running_) j->cancel();
    publish();
    cv_.notify_all();
  }
  for (auto& j : dropped) {
    j->cancel();
    j->dropped();
  }
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
}

int64_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(queue_.size());
}

int64_t Scheduler::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(running_.size());
}

void Scheduler::worker() {
  SequenceModel sequence(model_);
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_.push_back(job);
      publish();
    }
    if (job->cancelled()) {
      job->dropped();
    } else {
      // A fresh conversation per job: the previous job's cache is dropped.
      try {
        if (sequence.cache_length() > 0) sequence.truncate_cache(0);
        job->run(sequence);
      } catch (...) {
        // Job::run reports its own errors; this only keeps the worker alive.
        job->cancel();
        job->dropped();
      }
      sequence.idle();  // no batch waits for this sequence until its next job
    }
    std::lock_guard<std::mutex> lock(mu_);
    running_.erase(std::find(running_.begin(), running_.end(), job));
    publish();
  }
}

}  // namespace dgemma::server
