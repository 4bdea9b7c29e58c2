#pragma once
// One sequence's part of a batched decoder pass (DiffusionGemma::decode_batch,
// and the server's batches of concurrent requests, server/scheduler.h). An
// item either gets its logits on the host (`logits`, self-conditioning from
// `self_conditioning`), or, with `samples` set, the sampler pass of
// decode_sample() where the logits are: its processed logits z stay in the
// sequence's own tensor `z` (on the model's device), which conditions the
// sequence's next step, and only O(n) values reach the host.
#include <cstdint>

#include "model/diffusion_model.h"
#include "model/kv_cache.h"
#include "core/tensor.h"

namespace dgemma {

struct DecodeItem {
  // The sequence's KV cache, with this model's layout (empty_cache()); only
  // read, never changed. nullptr: the model's own cache.
  const KvCache* cache = nullptr;
  const int32_t* canvas = nullptr;           // [n] canvas ids
  int64_t n = 0;                             // canvas positions; 0: canvas_length()
  const float* self_conditioning = nullptr;  // [n, vocab], or null (a canvas's first step)
  float* logits = nullptr;                   // out: [n, vocab] soft-capped logits
  // The sampler pass (decode_sample per sequence): argmax, entropy and draw
  // per position into *samples. `z` is the sequence's z: with
  // z_self_conditioning, its [n, vocab] contents (the previous pass's z)
  // condition this pass; afterwards it holds this pass's z — replaced only
  // when the whole pass succeeded, so a failed batch leaves every z as it
  // was. `uniforms`: n values in [0, 1) for the draw, or null (no draw).
  RowSamples* samples = nullptr;
  Tensor* z = nullptr;
  bool z_self_conditioning = false;
  float temperature = 1.0f;
  const double* uniforms = nullptr;
};

}  // namespace dgemma
