#pragma once
// The Gemma 4 vision tower and embed_vision on the op vocabulary
// (docs/model.md §7.2-§7.5): one image's real patches in, its soft tokens
// [n_soft, H_text] out, ready to replace the image's placeholder rows of
// the prompt. Ops are labelled Pass::kVision; the observer sees the taps
// vision.patch_embeddings, vision.layer_out.{l}, vision.pooled,
// vision.standardized (with standardization) and vision.soft_tokens, each
// over the real rows only (the reference pads to max_soft_tokens·k² patches
// and max_soft_tokens cells; `dgemma forward` pads them back).
#include <vector>

#include "checkpoint/config.h"
#include "core/tensor.h"
#include "core/vision_input.h"
#include "model/vision_weights.h"
#include "model/workspace.h"
#include "ops/backend.h"

namespace dgemma {

class VisionTower {
 public:
  // `config` and `weights` must outlive the tower. bf16_run: the model runs
  // like the reference in bf16 (docs/model.md §7.8).
  VisionTower(const ModelConfig& config, const VisionWeights& weights, bool bf16_run);
  VisionTower(const VisionTower&) = delete;
  VisionTower& operator=(const VisionTower&) = delete;

  // Soft tokens [image.n_soft, H_text] of `image`, computed with ops on `ex`,
  // in the tower's own workspace (valid until the next call). Throws
  // dgemma::Error naming the field when the image does not fit the tower
  // (patch size, grid, positions beyond the position table, soft-token count).
  const Tensor& soft_tokens(Executor& ex, const VisionInput& image);

 private:
  void check_input(const VisionInput& image) const;
  Tensor& patch_embeddings(Executor& ex, const VisionInput& image);
  void run_layer(Executor& ex, int layer, Tensor& x, const Tensor& positions);

  const ModelConfig& config_;
  const VisionWeights& w_;
  bool bf16_run_;
  Workspace ws_;
  // Model-owned constants, as weights of the ops that take them: the patch
  // input's affine map 2·(p − 0.5) and the pooler's √Hv.
  std::vector<float> half_, two_, root_hidden_;
  WeightRef pixel_shift_, pixel_scale_, root_hidden_ref_;
  Tensor x_;  // the residual stream between layers
};

}  // namespace dgemma
