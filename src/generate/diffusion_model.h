#pragma once
// What the generation loop needs from a model (spec/diffusiongemma.md §2.2,
// §2.3, §3.2): an encoder pass that appends committed tokens to the KV cache,
// and a decoder pass that denoises one canvas against that cache without
// changing it. The CPU model (src/model) implements this; tests can implement
// it with recorded logits.
#include <cstdint>
#include <vector>

namespace dgemma {

class ThreadPool;

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

  // One decoder pass over a canvas of canvas_length() ids at positions
  // cache_length() .. +canvas_length()-1. `self_conditioning` is null on the
  // first step of a canvas, else the previous step's temperature-scaled fp32
  // logits [canvas_length, vocab] (the model casts them to its embedding dtype,
  // spec §3.3). Writes soft-capped fp32 logits [canvas_length, vocab].
  virtual void decode(const int32_t* canvas, const float* self_conditioning, float* logits) = 0;

  // Drops cached positions >= length (chat prefix reuse, spec §3.6).
  virtual void truncate_cache(int64_t length) = 0;

  // Worker threads generate() may use for its per-row pass over the logits
  // between decoder passes (the model's own CPU pool, idle then); null: run
  // that pass on the calling thread.
  virtual ThreadPool* thread_pool() { return nullptr; }
};

}  // namespace dgemma
