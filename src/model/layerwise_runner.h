#pragma once
// Runs DiffusionGemma one layer at a time over many sequences, for PTQ
// calibration (docs/formats.md §3.5): every sequence crosses layer i before
// any crosses layer i+1, so only one layer's weights need to be in memory at
// a time, and the caller keeps each sequence's hidden states between layers.
// The model's own KV cache is used as scratch for the layer being run (its
// other layers stay empty); run nothing else on the model meanwhile.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/diffusion_gemma.h"

namespace dgemma {

class LayerwiseRunner {
 public:
  explicit LayerwiseRunner(DiffusionGemma& model);
  // The encoder's input rows of a prompt (the scaled embedding, image
  // placeholders read as pad as in DiffusionGemma::encode): [n, H].
  Tensor encoder_input(const std::vector<int32_t>& ids);
  // The decoder's input rows of a canvas without self-conditioning: [n, H].
  Tensor decoder_input(const std::vector<int32_t>& canvas);
  // Encoder layer `layer` over a whole prompt's rows x (positions 0..n-1),
  // into a fresh cache for that layer; x becomes the layer's output.
  void encoder_layer(int layer, Tensor& x);
  // Decoder layer `layer` over canvas rows x placed after the prompt last
  // given to encoder_layer(layer), against that prompt's keys; x becomes the
  // layer's output.
  void decoder_layer(int layer, Tensor& x);
  // Hands back the memory layer `layer`'s weights take: the pages of the
  // checkpoint mapping they were read from (read again if touched later) and
  // the copies the backend made of them (Backend::release_weight_copies).
  // Converted copies the model owns (a bf16 run of an f32 checkpoint) stay.
  void release_layer(int layer);

 private:
  DiffusionGemma& model_;
};

}  // namespace dgemma
