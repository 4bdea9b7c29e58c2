#pragma once
// One image made ready for the vision tower (docs/image.md, docs/model.md §7):
// the layer `image` fills it from a file's bytes, the layer `model` reads it.
// Only the real patches are carried; the reference's padding to
// max_soft_tokens·k² rows is added only where a golden-shaped tensor is
// written (`dgemma forward --image`).
#include <cstdint>

#include "core/tensor.h"

namespace dgemma {

struct VisionInput {
  // [n, 3·p²] F32: patch n = py·grid_w + px in raster order, each patch's
  // pixels in (row, column, channel) order, channel fastest, rescaled to [0, 1].
  Tensor pixel_values;
  // [n, 2] I32: (column px, row py) of each patch.
  Tensor positions;
  int64_t grid_h = 0, grid_w = 0;  // patches down and across (n = grid_h·grid_w)
  int64_t n_soft = 0;              // soft tokens: (grid_h / k)·(grid_w / k), k the pooling kernel
};

}  // namespace dgemma
