#pragma once
// The vision half of the parity tool (`dgemma forward --inputs vision_X`):
// golden-style image inputs in, the tower's taps out in the golden's padded
// shapes (docs/model.md §7, docs/reference-data.md "Tensor naming").
//   pixel_values [B, max_patches, 3·p²] F32 and image_position_ids
//   [B, max_patches, 2] (column, row; padding rows (-1, -1)): B images
#include <string>
#include <vector>

#include "core/vision_input.h"
#include "io/safetensors.h"
#include "model/diffusion_gemma.h"
#include "model/parity.h"

namespace dgemma {

// Whether `in` is a vision case: image inputs and no prompt (an encoder case
// with images also holds input_ids).
bool is_vision_case(const TensorStore& in);

// The images of a case, each with its real patches only (the rows whose
// position is not (-1, -1), which must come first): grid from the largest
// column and row, n_soft = (grid_h/k)·(grid_w/k). Throws dgemma::Error
// naming `file` and the tensor for a malformed input.
std::vector<VisionInput> vision_inputs_from_case(const TensorStore& in, const std::string& file,
                                                 int pooling_kernel_size);

// Runs the tower on the one image of the vision case `file` and returns
// vision.patch_embeddings and vision.layer_out.{l} [1, max_patches, Hv],
// vision.pooled [1, max_patches/k², Hv] (padding rows zero, as the
// reference), vision.pooled_mask [1, max_patches/k²] (1 on the real cells),
// vision.standardized [n_soft, Hv] (with standardization) and
// vision.soft_tokens [n_soft, H_text]. Padding rows of the patch tensors
// are zero: the reference computes them but never uses them (compare only
// the real rows: `dgemma compare --rows N`).
NamedTensors run_vision_case(DiffusionGemma& model, const std::string& file);

// The same taps for one image, padded to `max_patches` rows (the processor's
// max_soft_tokens·k²): what `dgemma forward --image` writes.
NamedTensors run_vision_taps(DiffusionGemma& model, const VisionInput& image, int64_t max_patches);

}  // namespace dgemma
