#pragma once
// Server metrics in the Prometheus text exposition format (GET /metrics):
// counters of requests (by endpoint and status), tokens, canvases, denoising
// steps, cancellations, decoder passes and the sequences they batched; gauges of the queue depth and in-flight
// sequences; histograms of time to first token, request latency, queue wait and decoder-step time. Thread-safe; every
// update is a short critical section.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dgemma::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, ascending (+Inf implied)
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of `name`.
  void render(std::string& out, const std::string& name) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  Metrics();

  // One answered HTTP request. `endpoint` is a known route or "other" (an
  // unknown path must not create a label per path).
  void count_request(const std::string& endpoint, int status);
  void count_generation(const std::string& outcome);  // "stop", "length", "cancelled", "error"
  void add_tokens(int64_t prompt, int64_t completion);
  // A committed canvas; `converged`: it stopped by the stop condition, not by
  // running out of denoising steps (the trajectory alarm: a rising count of
  // unconverged canvases on a real model means wrong numerics).
  void add_canvas(bool converged);
  void add_step(double seconds);
  // One decoder pass run on the model over the steps of `sequences`
  // concurrent sequences (batched decoder passes, src/server/scheduler.h).
  void add_decoder_pass(int64_t sequences);
  void observe_ttft(double seconds);
  void observe_latency(double seconds);
  void observe_queue_wait(double seconds);
  void set_queue(int64_t queued, int64_t in_flight, int64_t slots);

  std::string render() const;

  // For tests and the health endpoint.
  int64_t in_flight() const;
  int64_t queued() const;
  uint64_t requests(const std::string& endpoint, int status) const;
  uint64_t generations(const std::string& outcome) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> generations_;
  uint64_t prompt_tokens_ = 0, completion_tokens_ = 0, canvases_ = 0, unconverged_canvases_ = 0, steps_ = 0;
  uint64_t decoder_passes_ = 0, decoder_pass_sequences_ = 0;
  int64_t queued_ = 0, in_flight_ = 0, slots_ = 0;
  Histogram ttft_, latency_, queue_wait_, step_;
};

}  // namespace dgemma::server
