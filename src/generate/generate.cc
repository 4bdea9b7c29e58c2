#include "generate/generate.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "core/thread_pool.h"
#include "dgemma/error.h"
#include "generate/sampler.h"
#include "ops/row_sampling.h"

namespace dgemma {
namespace {

void check_tokens(std::span<const int32_t> ids, int64_t vocab, const std::string& what) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw Error("generate: " + what + " token " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

std::string step_name(int64_t canvas, int64_t step) {
  return "canvas " + std::to_string(canvas) + " step " + std::to_string(step);
}

// Positions are int32 in every pass, and the caller's context size bounds
// the whole sequence (prompt + cache + every canvas, full canvases).
void check_context(const GenerationConfig& config, int64_t prompt_length, int64_t cached, int64_t n_canvases,
                   int64_t L) {
  const int64_t hard_limit = std::numeric_limits<int32_t>::max();
  const int64_t limit = config.context_size > 0 ? std::min(config.context_size, hard_limit) : hard_limit;
  const std::string what = config.context_size > 0 ? "the context size " + std::to_string(limit) + " (-c/--ctx-size)"
                                                   : "the largest position " + std::to_string(hard_limit);
  if (prompt_length + cached > limit)
    throw Error("generate: the prompt (" + std::to_string(prompt_length) + " tokens) plus " + std::to_string(cached) +
                " cached positions exceed " + what);
  const int64_t room = (limit - prompt_length - cached) / L;  // whole canvases that still fit
  if (n_canvases > room)
    throw Error("generate: " + std::to_string(n_canvases) + " canvases of " + std::to_string(L) +
                " tokens after a prompt of " + std::to_string(prompt_length) + " tokens (+" + std::to_string(cached) +
                " cached) exceed " + what + "; at most " + std::to_string(room * L) +
                " new tokens fit (max_new_tokens / -n)");
}

// One generate() call's denoising loop (docs/model.md §3.2): the buffers every
// step reuses, one step on the model or on the host, a canvas from its first
// draw to its commit.
class Denoiser {
 public:
  Denoiser(DiffusionModel& model, const GenerationConfig& config, DrawSource& draws, GenerationObserver* observer,
           GenerationResult& result)
      : model_(model),
        config_(config),
        draws_(draws),
        observer_(observer),
        result_(result),
        L_(model.canvas_length()),
        V_(model.vocab_size()),
        l_(size_t(L_)),
        // Where the per-row pass runs: inside the model when it can (next to
        // its logits, e.g. on the GPU; DiffusionModel::decode_sample) and draw
        // B is an inverse CDF or the argmax; else here, over the host logits.
        // Penalties, and filters of a sampled draw B, run only here: the
        // model's sample op does not take them (docs/model.md §3.7).
        on_model_(model.samples_rows() && (config.greedy || draws.samples_by_inverse_cdf()) && !has_penalties(config) &&
                  (config.greedy || !has_sampling_filters(config))),
        // Host path: two [L, V] buffers, allocated once: the decoder writes
        // raw logits into `out` while reading the previous step's processed
        // logits from `prev`; after temperature scaling in place they swap
        // roles (docs/model.md §3.3). On the model, z stays there: one buffer,
        // allocated when an observer first asks for z.
        buffer_a_(on_model_ ? 0 : l_ * size_t(V_)),
        buffer_b_(on_model_ ? 0 : l_ * size_t(V_)),
        out_(buffer_a_.data()),
        prev_(buffer_b_.data()),
        canvas_(l_),
        sampled_(l_),
        noise_(l_),
        argmax_(l_),
        next_(l_),
        entropy_(l_),
        accepted_(l_),
        stability_(config.stability_threshold, L_),
        uniforms_(on_model_ && !config.greedy ? l_ : 0),
        pool_(model.thread_pool()),
        row_errors_(l_) {
    filters_.top_k = config.top_k;
    filters_.top_p = config.top_p;
    filters_.min_p = config.min_p;
    penalties_.presence = config.presence_penalty;
    penalties_.frequency = config.frequency_penalty;
    penalties_.repeat = config.repeat_penalty;
    controls_.filters = filters_.active() ? &filters_ : nullptr;
    controls_.penalties = penalties_.active() ? &penalties_ : nullptr;
  }

  // Denoises canvas c from its canvas_init draw (canvas 0: `start` when not
  // empty), commits its last argmax to the result and, unless generation
  // ends with it, encodes it. Returns false when generation ends (EOS or
  // cancellation).
  bool canvas(int64_t c, bool last, std::span<const int32_t> start);

 private:
  void step_on_model(int64_t c, int64_t s, float temperature);
  void step_on_host(int64_t c, int64_t s, float temperature, const float* self_conditioning);
  void run_rows(int64_t c, int64_t s, float temperature);
  // Adds a committed canvas to the context the penalties count (docs/model.md §3.7).
  void count_committed(std::span<const int32_t> committed);

  DiffusionModel& model_;
  const GenerationConfig& config_;
  DrawSource& draws_;
  GenerationObserver* observer_;
  GenerationResult& result_;
  const int64_t L_, V_;
  const size_t l_;
  const bool on_model_;
  std::vector<float> buffer_a_, buffer_b_;
  float* out_;
  float* prev_;
  std::vector<int32_t> canvas_, sampled_, noise_, argmax_, next_;
  std::vector<float> entropy_;
  std::vector<uint8_t> accepted_;
  StabilityTracker stability_;
  RowSamples row_samples_;
  std::vector<double> uniforms_;
  // The per-row pass over `out`; every row's error is kept, and the first
  // row's is rethrown (pool workers must not throw).
  ThreadPool* pool_;
  std::vector<std::exception_ptr> row_errors_;
  std::string where_;
  bool fuse_sample_ = false;
  // Sampling controls (docs/model.md §3.7); controls_ points at those that are on.
  SamplingFilters filters_;
  TokenPenalties penalties_;
  RowControls controls_;
  std::map<int32_t, int64_t> context_counts_;
};

void Denoiser::count_committed(std::span<const int32_t> committed) {
  if (controls_.penalties == nullptr) return;
  for (const int32_t t : committed) ++context_counts_[t];
  penalties_.counts.clear();
  for (const auto& [token, count] : context_counts_) penalties_.counts.push_back({token, count});
}

void Denoiser::run_rows(int64_t c, int64_t s, float temperature) {
  auto rows = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(V_));
    for (int64_t i = begin; i < end; ++i) {
      try {
        const double u = fuse_sample_ ? draws_.sample_uniform(c, s, i) : 0.0;
        const RowPass r = process_row(out_ + size_t(i) * size_t(V_), size_t(V_), temperature,
                                      fuse_sample_ ? &u : nullptr, scratch.data(), where_.c_str(), &controls_);
        argmax_[size_t(i)] = r.argmax;
        entropy_[size_t(i)] = r.entropy;
        if (fuse_sample_) sampled_[size_t(i)] = r.sample;
        row_errors_[size_t(i)] = nullptr;
      } catch (const BadLogitsRow& e) {  // named by row, as decode_sample's are
        row_errors_[size_t(i)] = std::make_exception_ptr(BadLogitsRow(where_, i, e.logit(), e.value()));
      } catch (...) {
        row_errors_[size_t(i)] = std::current_exception();
      }
    }
  };
  if (pool_ != nullptr)
    pool_->parallel_for(L_, 1, rows);
  else
    rows(0, L_);
}

// Decoder pass and per-row pass in one call; the model keeps z for the next
// step's self-conditioning (docs/model.md §3.3). Same results as the host
// path (bit-identical on the CPU).
void Denoiser::step_on_model(int64_t c, int64_t s, float temperature) {
  for (size_t i = 0; i < uniforms_.size(); ++i) uniforms_[i] = draws_.sample_uniform(c, s, int64_t(i));
  try {
    model_.decode_sample(canvas_.data(), s > 0, temperature, config_.greedy ? nullptr : uniforms_.data(), row_samples_);
  } catch (const BadLogitsRow& e) {
    throw BadLogitsRow(where_, e.row(), e.logit(), e.value());
  }
  if (row_samples_.argmax.size() != l_ || row_samples_.entropy.size() != l_ || row_samples_.sample.size() != l_)
    throw Error(where_ + ": the model's sampler pass returned " + std::to_string(row_samples_.argmax.size()) +
                " rows, canvas_length is " + std::to_string(L_));
  std::copy(row_samples_.argmax.begin(), row_samples_.argmax.end(), argmax_.begin());
  std::copy(row_samples_.entropy.begin(), row_samples_.entropy.end(), entropy_.begin());
  if (!config_.greedy) std::copy(row_samples_.sample.begin(), row_samples_.sample.end(), sampled_.begin());
  ++result_.decoder_forwards;
  if (config_.greedy) sampled_ = argmax_;  // temperature 0: draw B is the argmax
}

void Denoiser::step_on_host(int64_t c, int64_t s, float temperature, const float* self_conditioning) {
  model_.decode(canvas_.data(), self_conditioning, out_);
  ++result_.decoder_forwards;
  // One fused pass per row (temperature, argmax, entropy and, for a source
  // that samples by inverse CDF, draw B), rows spread over the model's
  // threads. Reference order: sample (B), argmax, accept, renoise (C); draw
  // B reads only this row, so fusing keeps it.
  fuse_sample_ = !config_.greedy && draws_.samples_by_inverse_cdf();
  run_rows(c, s, temperature);
  for (size_t i = 0; i < l_; ++i)
    if (row_errors_[i]) std::rethrow_exception(row_errors_[i]);
  if (config_.greedy)
    sampled_ = argmax_;  // temperature 0: draw B is the argmax
  else if (!fuse_sample_)
    draws_.sample(c, s, out_, V_, sampled_);
}

bool Denoiser::canvas(int64_t c, bool last, std::span<const int32_t> start) {
  const int64_t N = config_.max_denoising_steps;
  // Draw A happens even when a start canvas replaces it (docs/model.md §3.5).
  draws_.canvas_init(c, V_, canvas_);
  check_tokens(canvas_, V_, "canvas_init draw of canvas " + std::to_string(c));
  if (c == 0 && !start.empty()) std::copy(start.begin(), start.end(), canvas_.begin());

  stability_.reset();
  const float* self_conditioning = nullptr;  // no signal on a canvas's first step
  int64_t steps = 0;
  float last_mean = 0.0f;  // mean entropy of the last step
  bool last_stop = false;
  for (int64_t cur_step = N; cur_step >= 1; --cur_step) {
    if (observer_ != nullptr && observer_->cancelled()) {
      result_.cancelled = true;
      return false;
    }
    const int64_t s = steps;
    const float temperature = step_temperature(config_.t_min, config_.t_max, cur_step, N);
    where_ = "generate: " + step_name(c, s);
    if (on_model_)
      step_on_model(c, s, temperature);
    else
      step_on_host(c, s, temperature, self_conditioning);
    ++steps;
    check_tokens(sampled_, V_, "sample draw of " + step_name(c, s));
    const int64_t n_accepted = entropy_bound_accept(entropy_, config_.entropy_bound, accepted_);
    draws_.renoise(c, s, V_, noise_);
    check_tokens(noise_, V_, "renoise draw of " + step_name(c, s));
    renoise(accepted_, sampled_, noise_, next_);

    const bool stable = stability_.update(argmax_);
    const float mean = mean_entropy(entropy_);
    const bool confident = is_confident(mean, config_.confidence_threshold);
    const bool stop = stable && confident;

    if (observer_ != nullptr) {
      StepEvent e;
      e.canvas = c;
      e.step = s;
      e.cur_step = cur_step;
      e.temperature = temperature;
      e.canvas_in = canvas_;
      e.sampled = sampled_;
      e.accepted = accepted_;
      e.argmax = argmax_;
      e.canvas_out = next_;
      e.entropy = entropy_;
      e.mean_entropy = mean;
      e.n_accepted = n_accepted;
      e.stable = stable;
      e.confident = confident;
      e.stop = stop;
      if (observer_->wants_processed_logits(e)) {
        if (on_model_) {  // fetched only for the observer
          if (buffer_a_.empty()) buffer_a_.resize(l_ * size_t(V_));
          out_ = buffer_a_.data();
          model_.processed_logits(out_);
        }
        e.processed_logits = out_;
      }
      observer_->on_step(e);
    }

    canvas_.swap(next_);
    if (!on_model_) {
      self_conditioning = out_;  // the processed logits z (docs/model.md §3.3)
      std::swap(out_, prev_);
    }
    last_mean = mean;
    last_stop = stop;
    if (stop) break;
  }
  result_.steps_per_canvas.push_back(steps);
  result_.halt_entropy.push_back(last_mean);
  result_.converged.push_back(last_stop);

  // Commit the last step's argmax, not the renoised canvas (docs/model.md §3.2).
  std::vector<int32_t> committed = argmax_;
  const bool eos = pad_after_first_eos(committed, config_.eos_token_ids, config_.pad_token_id);
  result_.sequences.insert(result_.sequences.end(), committed.begin(), committed.end());
  if (observer_ != nullptr) {
    CanvasEvent e;
    e.canvas = c;
    e.steps = steps;
    e.argmax = argmax_;
    e.committed = committed;
    e.eos = eos;
    observer_->on_canvas(e);
  }
  if (eos) {
    result_.stopped_at_eos = true;  // the EOS canvas is never encoded
    return false;
  }
  // The last canvas is not encoded either (max length reached).
  if (!last) model_.encode(committed);
  count_committed(committed);
  return true;
}

}  // namespace

GenerationResult generate(DiffusionModel& model, const std::vector<int32_t>& prompt, const GenerationConfig& config,
                          DrawSource& draws, GenerationObserver* observer, std::span<const int32_t> start_canvas,
                          std::span<const VisionInput> images) {
  validate_generation_config(config, "generate: generation config");
  const int64_t L = model.canvas_length();
  const int64_t V = model.vocab_size();
  if (L <= 0) throw Error("generate: model canvas_length " + std::to_string(L) + " must be positive");
  if (V <= 0 || V > std::numeric_limits<int32_t>::max())
    throw Error("generate: model vocab_size " + std::to_string(V) + " outside [1, 2^31)");
  check_tokens(prompt, V, "prompt");
  // A replayed tape supplies draw B itself; the filters could not act on it.
  if (has_sampling_filters(config) && !config.greedy && !draws.samples_by_inverse_cdf())
    throw Error(
        "generate: top_k, top_p and min_p filter a seeded draw; this draw source (a replayed tape) supplies the "
        "sampled tokens itself");
  if (!start_canvas.empty()) {
    if (int64_t(start_canvas.size()) != L)
      throw Error("generate: start canvas has " + std::to_string(start_canvas.size()) + " tokens, canvas_length is " +
                  std::to_string(L));
    check_tokens(start_canvas, V, "start canvas");
  }

  // docs/model.md §3.4: n_canvases = ceil(max_new_tokens / L); full canvases are kept.
  const int64_t cur_len = int64_t(prompt.size()) + model.cache_length();
  const int64_t max_new_tokens = resolve_max_new_tokens(config, cur_len);
  const int64_t n_canvases = max_new_tokens > 0 ? (max_new_tokens + L - 1) / L : 0;
  check_context(config, int64_t(prompt.size()), model.cache_length(), n_canvases, L);

  GenerationResult result;
  result.sequences = prompt;
  result.prompt_length = int64_t(prompt.size());
  result.sequences.reserve(prompt.size() + size_t(n_canvases * L));
  if (n_canvases == 0) return result;

  Denoiser denoiser(model, config, draws, observer, result);
  // Prefill (docs/model.md §2.2); images only here (§7.6).
  if (!images.empty())
    model.encode_with_images(prompt, images);
  else if (!prompt.empty())
    model.encode(prompt);
  for (int64_t c = 0; c < n_canvases; ++c)
    if (!denoiser.canvas(c, c + 1 == n_canvases, start_canvas)) break;

  int64_t valid = 0;
  for (const int32_t t : result.generated()) valid += t != config.pad_token_id ? 1 : 0;
  if (result.decoder_forwards > 0) result.tokens_per_forward = float(valid) / float(result.decoder_forwards);
  return result;
}

}  // namespace dgemma
