#pragma once
// Block-diffusion generation (docs/model.md §3.2, the reference
// being HF `DiffusionGemmaGenerationMixin.generate`, batch size 1):
// prefill the prompt, then for each canvas of canvas_length tokens run up to
// N denoising steps (entropy-bound acceptance, renoising, stable-and-confident
// early stop), commit the last step's argmax, stop at EOS, otherwise encode
// the committed canvas into the cache and continue.
#include <cstdint>
#include <span>
#include <vector>

#include "model/diffusion_model.h"
#include "generate/draws.h"
#include "generate/generation_config.h"

namespace dgemma {

// One executed denoising step. Spans and pointers are valid only during the
// callback (they point into buffers reused by the next step).
struct StepEvent {
  int64_t canvas = 0;                   // canvas index, 0-based
  int64_t step = 0;                     // step within the canvas, 0-based execution order
  int64_t cur_step = 0;                 // remaining-steps counter, N .. 1 (docs/model.md §3.2)
  float temperature = 0;                // bit-exact with the reference
  std::span<const int32_t> canvas_in;   // canvas fed to the decoder
  std::span<const int32_t> sampled;     // draw B (the "denoiser canvas")
  std::span<const uint8_t> accepted;    // entropy-bound mask, 0/1
  std::span<const int32_t> argmax;      // argmax of the processed logits
  std::span<const int32_t> canvas_out;  // renoised canvas = next step's canvas_in
  std::span<const float> entropy;       // per position, nats
  float mean_entropy = 0;
  int64_t n_accepted = 0;
  bool stable = false;
  bool confident = false;
  bool stop = false;  // stable && confident: last step of this canvas
  // [L, V] fp32, z = logits / T; null unless the observer's
  // wants_processed_logits() asked for this step's.
  const float* processed_logits = nullptr;
};

// One finished canvas.
struct CanvasEvent {
  int64_t canvas = 0;
  int64_t steps = 0;                   // executed denoising steps
  std::span<const int32_t> argmax;     // the last step's argmax (what HF appends)
  std::span<const int32_t> committed;  // after EOS handling (pad after the first EOS)
  bool eos = false;                    // the canvas holds an EOS id: generation ends
};

class GenerationObserver {
 public:
  virtual ~GenerationObserver() = default;
  // Asked before on_step, with the event complete but for processed_logits:
  // true fills them in. Where the model samples next to its logits
  // (DiffusionModel::samples_rows(), e.g. on a GPU) that copies L × V floats
  // (268 MB for the 26B model) to the host, so an observer asks only for the
  // steps it reads.
  virtual bool wants_processed_logits(const StepEvent& /*event*/) { return false; }
  virtual void on_step(const StepEvent& /*event*/) {}
  virtual void on_canvas(const CanvasEvent& /*event*/) {}
  // Polled before every decoder pass; returning true ends generation early
  // (the unfinished canvas is dropped; the result has cancelled = true).
  virtual bool cancelled() { return false; }
};

struct GenerationResult {
  // prompt + every committed canvas, full canvases, pad after the first EOS
  // (the reference does not trim to max_new_tokens; docs/model.md §3.4).
  std::vector<int32_t> sequences;
  int64_t prompt_length = 0;
  std::vector<int64_t> steps_per_canvas;  // executed denoising steps per canvas
  // Per canvas: the mean entropy at its last step ("halt entropy"), and
  // whether it stopped by the stop condition (argmax stable and confident)
  // rather than by running out of steps. A trajectory that never converges
  // while the CPU's does is the signature of wrong numerics on a device
  // (docs/placement.md, requirement 9).
  std::vector<float> halt_entropy;
  std::vector<bool> converged;
  int64_t decoder_forwards = 0;  // total decoder passes
  // Reference `_compute_tokens_per_forward`: generated tokens that are not
  // pad, divided by decoder passes, in float32 (0 if no pass ran).
  float tokens_per_forward = 0;
  bool stopped_at_eos = false;
  bool cancelled = false;

  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(sequences).subspan(size_t(prompt_length));
  }
};

// Runs generation. The prompt is encoded at positions model.cache_length()
// onwards (pass only uncached tokens when reusing a cache; docs/model.md §3.6). The
// decoder is given the previous step's processed logits as self-conditioning
// (null on each canvas's first step; docs/model.md §3.3). `start_canvas`, if not
// empty, replaces canvas 0's initial canvas (the canvas_init draw is still
// consumed, as in the reference). When model.samples_rows() and draw B is
// the argmax (greedy) or an inverse CDF (draws.samples_by_inverse_cdf()),
// each step is one DiffusionModel::decode_sample() call (the per-row pass
// runs where the logits are, and z is fetched only for an observer);
// otherwise decode() and the same per-row pass here. Both give identical
// results on the CPU. The [L, V] logits buffers are allocated once per call.
// Throws dgemma::Error on invalid input; BadLogitsRow (sampler.h), naming
// the canvas, step and row, on a row of logits holding NaN or +inf or only
// -inf. `images` (in prompt order) go with the prompt's runs of image
// placeholder ids into the prefill (DiffusionModel::encode_with_images,
// docs/model.md §7.6); the committed canvases are encoded as text.
GenerationResult generate(DiffusionModel& model, const std::vector<int32_t>& prompt, const GenerationConfig& config,
                          DrawSource& draws, GenerationObserver* observer = nullptr,
                          std::span<const int32_t> start_canvas = {}, std::span<const VisionInput> images = {});

}  // namespace dgemma
