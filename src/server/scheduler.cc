#include "server/scheduler.h"

#include <algorithm>
#include <utility>

#include "dgemma/error.h"
#include "model/diffusion_gemma.h"
#include "server/metrics.h"

namespace dgemma::server {

SharedModel::SharedModel(DiffusionModel& model, MakeCache make_cache, SwapCache swap_cache)
    : model_(model), make_cache_(std::move(make_cache)), swap_cache_(std::move(swap_cache)) {}

SharedModel::SharedModel(DiffusionGemma& model)
    : SharedModel(
          model, [&model] { return model.empty_cache(); }, [&model](KvCache& c) { model.swap_cache(c); }) {}

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

void SequenceModel::encode(const std::vector<int32_t>& ids) {
  shared_.run(cache_, [&] { shared_.model_.encode(ids); });
}

void SequenceModel::decode(const int32_t* canvas, const float* self_conditioning, float* logits) {
  shared_.run(cache_, [&] { shared_.model_.decode(canvas, self_conditioning, logits); });
}

void SequenceModel::truncate_cache(int64_t length) {
  shared_.run(cache_, [&] { shared_.model_.truncate_cache(length); });
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
  workers_.reserve(size_t(slots));
  for (int i = 0; i < slots; ++i) workers_.emplace_back([this] { worker(); });
}

Scheduler::~Scheduler() { shutdown(); }

void Scheduler::publish() {
  if (metrics_ != nullptr) metrics_->set_queue(int64_t(queue_.size()), int64_t(running_.size()), slots());
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  std::lock_guard<std::mutex> lock(mu_);
  // Admitted jobs (running or waiting) are at most slots + max_queue: a job
  // that finds a free slot never counts against the queue.
  if (stopping_ || closed_ || int64_t(queue_.size() + running_.size()) >= int64_t(workers_.size()) + max_queue_) return false;
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
    }
    std::lock_guard<std::mutex> lock(mu_);
    running_.erase(std::find(running_.begin(), running_.end(), job));
    publish();
  }
}

}  // namespace dgemma::server
