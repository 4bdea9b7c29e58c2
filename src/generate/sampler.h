#pragma once
// The per-step math of the entropy-bound sampler (docs/model.md §3.2; HF
// generation_diffusion_gemma.py `LinearTemperatureScheduleLogitsProcessor`,
// `EntropyBoundSampler`, `StableAndConfidentStoppingCriteria`), as pure
// functions. Float32 is used wherever the reference computes in float32, with
// the same operation order, so that temperatures are bit-exact and the
// discrete decisions (argmax, acceptance, stop) match.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dgemma/error.h"
#include "ops/row_sampling.h"

namespace dgemma {

// T = t_min + (t_max - t_min) * (cur_step / N), evaluated as torch does with
// an int32 cur_step tensor and Python-float t_min/t_max: cur_step / N is a
// float32 division, (t_max - t_min) is a double rounded to float32, then a
// float32 multiply and add. cur_step counts remaining steps, N .. 1.
float step_temperature(double t_min, double t_max, int64_t cur_step, int64_t max_denoising_steps);

// Entropy-bound acceptance (HF `accept_canvas`): sort entropies ascending,
// accept the position of rank k iff float32(cumsum_k) - H_(k) <= bound, where
// the cumulative sum runs in double and is rounded to float32 per element (as
// torch's CPU cumsum does) and the bound is compared as float32. Ties are
// ordered by position (torch.sort gives no order; it only matters when tied
// entropies straddle the bound). Writes accepted[i] in {0,1}; returns the count.
int64_t entropy_bound_accept(std::span<const float> entropy, double entropy_bound, std::span<uint8_t> accepted);

// next = accepted ? sample : noise (uniform-state diffusion: a rejected
// position gets fresh noise, not its previous value; docs/model.md §3.2).
void renoise(std::span<const uint8_t> accepted, std::span<const int32_t> sample, std::span<const int32_t> noise,
             std::span<int32_t> next);

// torch.mean over the canvas in float32 (summed in double, then rounded).
float mean_entropy(std::span<const float> entropy);

// confident = mean entropy < threshold, strictly, compared in float32.
bool is_confident(float mean_entropy, double confidence_threshold);

// EOS handling of a committed canvas (HF `_finalize_canvas`): if any token is
// an EOS id, every token after the first EOS (including later EOS ids)
// becomes `pad_token_id`; the first EOS is kept. Returns whether an EOS was
// found, i.e. whether generation ends with this canvas.
bool pad_after_first_eos(std::span<int32_t> canvas, std::span<const int32_t> eos_token_ids, int32_t pad_token_id);

// The stability half of the stopping rule: stable iff the argmax canvas equals
// each of the `threshold` previous argmax canvases; the history starts filled
// with a sentinel (-1), so the first step of a canvas is never stable unless
// threshold is 0, which means always stable (docs/model.md §3.2, §6.3 pitfall 5).
class StabilityTracker {
 public:
  StabilityTracker(int64_t threshold, int64_t canvas_length);
  void reset();  // new canvas
  // Compares `argmax` with the history, then pushes it (dropping the oldest).
  bool update(std::span<const int32_t> argmax);

 private:
  int64_t threshold_;
  int64_t length_;
  std::vector<int32_t> history_;  // threshold_ rows of length_, ring buffer
  int64_t oldest_ = 0;
};

}  // namespace dgemma
