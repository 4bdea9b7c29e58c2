#pragma once
// What the generation loop needs from a model (docs/model.md §2.2,
// §2.3, §3.2): an encoder pass that appends committed tokens to the KV cache,
// and a decoder pass that denoises one canvas against that cache without
// changing it. The CPU model (src/model) implements this; tests can implement
// it with recorded logits.
#include <cstdint>
#include <span>
#include <vector>

#include "core/vision_input.h"

namespace dgemma {

class ThreadPool;

// The per-row results of one denoising step's sampler pass (docs/model.md §3.2;
// ops/row_sampling.h process_row), one entry per canvas position.
struct RowSamples {
  std::vector<int32_t> argmax;  // first maximum of z = logits / T
  std::vector<float> entropy;   // of softmax(z), nats
  std::vector<int32_t> sample;  // draw B (inverse CDF); -1 everywhere when no uniforms were given
};

class DiffusionModel {
 public:
  virtual ~DiffusionModel() = default;

  virtual int64_t vocab_size() const = 0;
  virtual int64_t canvas_length() const = 0;
  // Number of positions committed to the cache so far (= next position).
  virtual int64_t cache_length() const = 0;

  // Causal encoder pass over `ids` at positions cache_length() ..
  // cache_length()+n-1; appends their keys/values to the cache.
  virtual void encode(const std::vector<int32_t>& ids) = 0;

  // The encoder pass over a prompt with images (docs/model.md §7.6, §7.7):
  // images[i] (in prompt order) becomes soft tokens that replace the i-th
  // run of image placeholder ids, and the encoder's mask lets an image's rows
  // see each other. Only this pass sees the images; later passes (committed
  // canvases) are text. Throws dgemma::Error when the runs and the images do
  // not match (counts named). The default takes no images: with none it is
  // encode(ids), with any it throws.
  virtual void encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images);

  // One decoder pass over a canvas of canvas_length() ids at positions
  // cache_length() .. +canvas_length()-1. `self_conditioning` is null on the
  // first step of a canvas, else the previous step's temperature-scaled fp32
  // logits [canvas_length, vocab] (the model casts them to its embedding dtype,
  // docs/model.md §3.3). Writes soft-capped fp32 logits [canvas_length, vocab].
  virtual void decode(const int32_t* canvas, const float* self_conditioning, float* logits) = 0;

  // Drops cached positions >= length (chat prefix reuse, docs/model.md §3.6).
  virtual void truncate_cache(int64_t length) = 0;

  // Whether decode_sample() is available: the model then runs a step's
  // per-row sampler pass itself, where its logits are (ops/op.h kSample: on
  // the model's backend, e.g. the GPU), keeps the processed logits z for the
  // next step's self-conditioning, and generate() never needs the [L, V]
  // logits on the host unless an observer asks for them.
  virtual bool samples_rows() const { return false; }

  // One decoder pass and its sampler pass (docs/model.md §3.2, §3.3): decode() of
  // `canvas`, then per position z = logits / T (float32 division), the
  // first argmax, the entropy, and, when `uniforms` (canvas_length() values
  // in [0, 1)) is given, draw B as the inverse CDF of exp(z - max z) at
  // uniform · sum (ops/row_sampling.h process_row; bit-identical to it on
  // the CPU, equal up to rounding of the sums elsewhere). The model keeps z:
  // with `use_self_conditioning` the pass is conditioned on z of the
  // previous decode_sample() call (which must be the previous pass: no
  // encode(), decode() or truncate_cache() in between); without it, on
  // nothing (a canvas's first step). Throws BadLogitsRow (ops/row_sampling.h) naming
  // the first row holding NaN or +inf, or only -inf. Only when
  // samples_rows(); the default throws.
  virtual void decode_sample(const int32_t* canvas, bool use_self_conditioning, float temperature,
                             const double* uniforms, RowSamples& out);
  // z of the last decode_sample() call, [canvas_length, vocab] fp32, copied
  // into `out` (for observers; a device model downloads it only then).
  virtual void processed_logits(float* out);

  // Worker threads generate() may use for its per-row pass over the logits
  // between decoder passes (the model's own CPU pool, idle then); null: run
  // that pass on the calling thread.
  virtual ThreadPool* thread_pool() { return nullptr; }
};

}  // namespace dgemma
