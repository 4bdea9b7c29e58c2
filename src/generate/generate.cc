#include "generate/generate.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "core/thread_pool.h"
#include "dgemma/error.h"
#include "generate/sampler.h"

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

}  // namespace

GenerationResult generate(DiffusionModel& model, const std::vector<int32_t>& prompt, const GenerationConfig& config,
                          DrawSource& draws, GenerationObserver* observer, std::span<const int32_t> start_canvas) {
  validate_generation_config(config, "generate: generation config");
  const int64_t L = model.canvas_length();
  const int64_t V = model.vocab_size();
  const int64_t N = config.max_denoising_steps;
  if (L <= 0) throw Error("generate: model canvas_length " + std::to_string(L) + " must be positive");
  if (V <= 0 || V > std::numeric_limits<int32_t>::max())
    throw Error("generate: model vocab_size " + std::to_string(V) + " outside [1, 2^31)");
  check_tokens(prompt, V, "prompt");
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

  // Where the per-row pass runs: inside the model when it can (next to its
  // logits, e.g. on the GPU; DiffusionModel::decode_sample) and draw B is an
  // inverse CDF or the argmax; else here, over the host logits.
  const bool on_model = model.samples_rows() && (config.greedy || draws.samples_by_inverse_cdf());

  // Host path: two [L, V] buffers, allocated once: the decoder writes raw
  // logits into `out` while reading the previous step's processed logits
  // from `prev`; after temperature scaling in place they swap roles (docs/model.md
  // §3.3). On the model, z stays there: one buffer, only for an observer.
  const size_t lv = size_t(L) * size_t(V);
  std::vector<float> buffer_a(on_model && observer == nullptr ? 0 : lv), buffer_b(on_model ? 0 : lv);
  float* out = buffer_a.data();
  float* prev = buffer_b.data();

  const size_t l = size_t(L);
  std::vector<int32_t> canvas(l), sampled(l), noise(l), argmax(l), next(l);
  std::vector<float> entropy(l);
  std::vector<uint8_t> accepted(l);
  StabilityTracker stability(config.stability_threshold, L);
  RowSamples row_samples;
  std::vector<double> uniforms(on_model && !config.greedy ? l : 0);

  // The per-row pass over `out`; every row's error is kept, and the first
  // row's is rethrown (pool workers must not throw).
  ThreadPool* pool = model.thread_pool();
  std::vector<std::exception_ptr> row_errors(l);
  std::string where;
  bool fuse_sample = false;
  auto run_rows = [&](int64_t c, int64_t s, float temperature) {
    auto rows = [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scratch;
      scratch.resize(size_t(V));
      for (int64_t i = begin; i < end; ++i) {
        try {
          const double u = fuse_sample ? draws.sample_uniform(c, s, i) : 0.0;
          const RowPass r = process_row(out + size_t(i) * size_t(V), size_t(V), temperature, fuse_sample ? &u : nullptr,
                                        scratch.data(), where.c_str());
          argmax[size_t(i)] = r.argmax;
          entropy[size_t(i)] = r.entropy;
          if (fuse_sample) sampled[size_t(i)] = r.sample;
          row_errors[size_t(i)] = nullptr;
        } catch (const BadLogitsRow& e) {  // named by row, as decode_sample's are
          row_errors[size_t(i)] = std::make_exception_ptr(BadLogitsRow(where, i, e.logit(), e.value()));
        } catch (...) {
          row_errors[size_t(i)] = std::current_exception();
        }
      }
    };
    if (pool != nullptr)
      pool->parallel_for(L, 1, rows);
    else
      rows(0, L);
  };
  // The same pass on the model (same results; bit-identical on the CPU).
  auto sample_on_model = [&](int64_t c, int64_t s, float temperature) {
    for (size_t i = 0; i < uniforms.size(); ++i) uniforms[i] = draws.sample_uniform(c, s, int64_t(i));
    try {
      model.decode_sample(canvas.data(), s > 0, temperature, config.greedy ? nullptr : uniforms.data(), row_samples);
    } catch (const BadLogitsRow& e) {
      throw BadLogitsRow(where, e.row(), e.logit(), e.value());
    }
    if (row_samples.argmax.size() != l || row_samples.entropy.size() != l || row_samples.sample.size() != l)
      throw Error(where + ": the model's sampler pass returned " + std::to_string(row_samples.argmax.size()) +
                  " rows, canvas_length is " + std::to_string(L));
    std::copy(row_samples.argmax.begin(), row_samples.argmax.end(), argmax.begin());
    std::copy(row_samples.entropy.begin(), row_samples.entropy.end(), entropy.begin());
    if (!config.greedy) std::copy(row_samples.sample.begin(), row_samples.sample.end(), sampled.begin());
  };
  const std::span<const int32_t> eos_ids(config.eos_token_ids);

  if (!prompt.empty()) model.encode(prompt);  // prefill (docs/model.md §2.2)

  for (int64_t c = 0; c < n_canvases; ++c) {
    // Draw A happens even when a start canvas replaces it (docs/model.md §3.5).
    draws.canvas_init(c, V, canvas);
    check_tokens(canvas, V, "canvas_init draw of canvas " + std::to_string(c));
    if (c == 0 && !start_canvas.empty()) std::copy(start_canvas.begin(), start_canvas.end(), canvas.begin());

    stability.reset();
    const float* self_conditioning = nullptr;  // no signal on a canvas's first step
    int64_t steps = 0;
    float last_mean = 0.0f;  // mean entropy of the last step
    bool last_stop = false;
    for (int64_t cur_step = N; cur_step >= 1; --cur_step) {
      if (observer != nullptr && observer->cancelled()) {
        result.cancelled = true;
        break;
      }
      const int64_t s = steps;
      const float temperature = step_temperature(config.t_min, config.t_max, cur_step, N);
      where = "generate: " + step_name(c, s);
      if (on_model) {
        // Decoder pass and per-row pass in one call; the model keeps z for
        // the next step's self-conditioning (docs/model.md §3.3).
        sample_on_model(c, s, temperature);
        ++result.decoder_forwards;
        ++steps;
        if (config.greedy) sampled = argmax;  // temperature 0: draw B is the argmax
      } else {
        model.decode(canvas.data(), self_conditioning, out);
        ++result.decoder_forwards;
        ++steps;

        // One fused pass per row (temperature, argmax, entropy and, for a
        // source that samples by inverse CDF, draw B), rows spread over the
        // model's threads. Reference order: sample (B), argmax, accept,
        // renoise (C); draw B reads only this row, so fusing keeps it.
        fuse_sample = !config.greedy && draws.samples_by_inverse_cdf();
        run_rows(c, s, temperature);
        for (size_t i = 0; i < l; ++i)
          if (row_errors[i]) std::rethrow_exception(row_errors[i]);
        if (config.greedy)
          sampled = argmax;  // temperature 0: draw B is the argmax
        else if (!fuse_sample)
          draws.sample(c, s, out, V, sampled);
      }
      check_tokens(sampled, V, "sample draw of " + step_name(c, s));
      const int64_t n_accepted = entropy_bound_accept(entropy, config.entropy_bound, accepted);
      draws.renoise(c, s, V, noise);
      check_tokens(noise, V, "renoise draw of " + step_name(c, s));
      renoise(accepted, sampled, noise, next);

      const bool stable = stability.update(argmax);
      const float mean = mean_entropy(entropy);
      const bool confident = is_confident(mean, config.confidence_threshold);
      const bool stop = stable && confident;

      if (observer != nullptr) {
        StepEvent e;
        e.canvas = c;
        e.step = s;
        e.cur_step = cur_step;
        e.temperature = temperature;
        e.canvas_in = canvas;
        e.sampled = sampled;
        e.accepted = accepted;
        e.argmax = argmax;
        e.canvas_out = next;
        e.entropy = entropy;
        e.mean_entropy = mean;
        e.n_accepted = n_accepted;
        e.stable = stable;
        e.confident = confident;
        e.stop = stop;
        if (on_model) model.processed_logits(out);  // fetched only for the observer
        e.processed_logits = out;
        observer->on_step(e);
      }

      canvas.swap(next);
      if (!on_model) {
        self_conditioning = out;  // the processed logits z (docs/model.md §3.3)
        std::swap(out, prev);
      }
      last_mean = mean;
      last_stop = stop;
      if (stop) break;
    }
    if (result.cancelled) break;
    result.steps_per_canvas.push_back(steps);
    result.halt_entropy.push_back(last_mean);
    result.converged.push_back(last_stop);

    // Commit the last step's argmax, not the renoised canvas (docs/model.md §3.2).
    std::vector<int32_t> committed = argmax;
    const bool eos = pad_after_first_eos(committed, eos_ids, config.pad_token_id);
    result.sequences.insert(result.sequences.end(), committed.begin(), committed.end());
    if (observer != nullptr) {
      CanvasEvent e;
      e.canvas = c;
      e.steps = steps;
      e.argmax = argmax;
      e.committed = committed;
      e.eos = eos;
      observer->on_canvas(e);
    }
    if (eos) {
      result.stopped_at_eos = true;  // the EOS canvas is never encoded
      break;
    }
    // The last canvas is not encoded either (max length reached).
    if (c + 1 < n_canvases) model.encode(committed);
  }

  int64_t valid = 0;
  for (const int32_t t : result.generated()) valid += t != config.pad_token_id ? 1 : 0;
  if (result.decoder_forwards > 0) result.tokens_per_forward = float(valid) / float(result.decoder_forwards);
  return result;
}

}  // namespace dgemma
