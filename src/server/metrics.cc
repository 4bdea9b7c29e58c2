#include "server/metrics.h"

#include <charconv>

namespace dgemma::server {
namespace {

// The shortest decimal that reads back as `v` (0.005, not %.17g's
// 0.0050000000000000001): Prometheus matches bucket labels as strings, so
// `le="0.005"` in a query must be the label written here.
std::string number(double v) {
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, double value) {
  out += name;
  out += ' ';
  out += number(value);
  out += '\n';
}

// Latency buckets from 5 ms to 5 min.
std::vector<double> seconds_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + (i < bounds_.size() ? number(bounds_[i]) : std::string("+Inf")) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  sample(out, name + "_sum", sum_);
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_(seconds_buckets()), latency_(seconds_buckets()), queue_wait_(seconds_buckets()), step_(seconds_buckets()) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::count_generation(const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  ++generations_[outcome];
}

void Metrics::add_tokens(int64_t prompt, int64_t completion) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += uint64_t(prompt);
  completion_tokens_ += uint64_t(completion);
}

void Metrics::add_canvas(bool converged) {
  std::lock_guard<std::mutex> lock(mu_);
  ++canvases_;
  unconverged_canvases_ += !converged;
}

void Metrics::add_step(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++steps_;
  step_.observe(seconds);
}

void Metrics::add_decoder_pass(int64_t sequences) {
  std::lock_guard<std::mutex> lock(mu_);
  ++decoder_passes_;
  decoder_pass_sequences_ += uint64_t(sequences);
}

void Metrics::observe_ttft(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}

void Metrics::observe_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  latency_.observe(seconds);
}

void Metrics::observe_queue_wait(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_wait_.observe(seconds);
}

void Metrics::set_queue(int64_t queued, int64_t in_flight, int64_t slots) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_ = queued;
  in_flight_ = in_flight;
  slots_ = slots;
}

int64_t Metrics::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

int64_t Metrics::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

uint64_t Metrics::requests(const std::string& endpoint, int status) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find({endpoint, status});
  return it == requests_.end() ? 0 : it->second;
}

uint64_t Metrics::generations(const std::string& outcome) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = generations_.find(outcome);
  return it == generations_.end() ? 0 : it->second;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  header(out, "dgemma_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    out += "dgemma_requests_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  header(out, "dgemma_generations_total", "counter",
         "Finished generations by outcome (stop, length, cancelled, error).");
  for (const char* outcome : {"stop", "length", "cancelled", "error"}) {
    auto it = generations_.find(outcome);
    out += std::string("dgemma_generations_total{outcome=\"") + outcome + "\"} " +
           std::to_string(it == generations_.end() ? 0 : it->second) + "\n";
  }
  header(out, "dgemma_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  sample(out, "dgemma_prompt_tokens_total", double(prompt_tokens_));
  header(out, "dgemma_completion_tokens_total", "counter", "Completion tokens returned to clients.");
  sample(out, "dgemma_completion_tokens_total", double(completion_tokens_));
  header(out, "dgemma_canvases_total", "counter", "Committed canvases.");
  sample(out, "dgemma_canvases_total", double(canvases_));
  header(out, "dgemma_canvases_not_converged_total", "counter",
         "Committed canvases that ran out of denoising steps before the stop condition.");
  sample(out, "dgemma_canvases_not_converged_total", double(unconverged_canvases_));
  header(out, "dgemma_denoising_steps_total", "counter", "Executed denoising steps (decoder passes).");
  sample(out, "dgemma_denoising_steps_total", double(steps_));
  header(out, "dgemma_decoder_passes_total", "counter",
         "Decoder passes run on the model; the denoising steps of concurrent sequences batched into one pass count "
         "once.");
  sample(out, "dgemma_decoder_passes_total", double(decoder_passes_));
  header(out, "dgemma_decoder_pass_sequences_total", "counter",
         "Sequence steps run by those passes (divided by dgemma_decoder_passes_total: the mean batch size).");
  sample(out, "dgemma_decoder_pass_sequences_total", double(decoder_pass_sequences_));
  header(out, "dgemma_queue_depth", "gauge", "Requests waiting for a sequence slot.");
  sample(out, "dgemma_queue_depth", double(queued_));
  header(out, "dgemma_sequences_in_flight", "gauge", "Sequences being generated.");
  sample(out, "dgemma_sequences_in_flight", double(in_flight_));
  header(out, "dgemma_sequence_slots", "gauge", "Configured in-flight sequences (--parallel).");
  sample(out, "dgemma_sequence_slots", double(slots_));
  header(out, "dgemma_time_to_first_token_seconds", "histogram",
         "From request arrival to the first committed text (or the end when there is none).");
  ttft_.render(out, "dgemma_time_to_first_token_seconds");
  header(out, "dgemma_request_duration_seconds", "histogram", "From request arrival to the last byte of the answer.");
  latency_.render(out, "dgemma_request_duration_seconds");
  header(out, "dgemma_queue_wait_seconds", "histogram", "Time admitted requests waited for a sequence slot.");
  queue_wait_.render(out, "dgemma_queue_wait_seconds");
  header(out, "dgemma_denoising_step_seconds", "histogram",
         "Wall time per denoising step of one sequence (includes waiting for the model's turn).");
  step_.render(out, "dgemma_denoising_step_seconds");
  return out;
}

}  // namespace dgemma::server
