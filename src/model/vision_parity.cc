#include "model/vision_parity.h"

#include <algorithm>

#include "dgemma/error.h"
#include "io/tensor_io.h"
#include "model/tap_recorder.h"

namespace dgemma {
namespace {

Tensor required(const TensorStore& in, const std::string& name, const std::string& file) {
  const TensorView* v = in.find(name);
  if (!v) throw Error(file + ": tensor \"" + name + "\" is missing");
  return tensor_from_view(*v);
}

// `t` [rows, W] (or [1, rows, W]) as [1, total, W] with zero rows after its own.
Tensor padded(const Tensor& t, int64_t total) {
  const int64_t rows = t.rows(), w = t.shape.back();
  Tensor o = Tensor::f32({1, std::max(total, rows), w});
  std::copy(t.f.begin(), t.f.end(), o.f.begin());
  return o;
}

}  // namespace

bool is_vision_case(const TensorStore& in) { return in.find("pixel_values") && !in.find("input_ids"); }

std::vector<VisionInput> vision_inputs_from_case(const TensorStore& in, const std::string& file, int k) {
  const Tensor px = required(in, "pixel_values", file), pos = required(in, "image_position_ids", file);
  if (px.dtype != DType::kF32 || px.shape.size() != 3)
    throw Error(file + ": \"pixel_values\" must be float [B, patches, 3·p²], got " + px.shape_string());
  const int64_t B = px.dim(0), P = px.dim(1), W = px.dim(2);
  if (pos.dtype != DType::kI32 || pos.shape != std::vector<int64_t>{B, P, 2})
    throw Error(file + ": \"image_position_ids\" must be integers [" + std::to_string(B) + ", " + std::to_string(P) +
                ", 2], got " + pos.shape_string());
  std::vector<VisionInput> images;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* p = pos.i.data() + b * P * 2;
    int64_t n = 0;
    while (n < P && p[2 * n] >= 0) ++n;
    for (int64_t r = n; r < P; ++r)
      if (p[2 * r] != -1 || p[2 * r + 1] != -1)
        throw Error(file + ": image " + std::to_string(b) + " has a real patch at row " + std::to_string(r) +
                    " after the padding that starts at row " + std::to_string(n));
    VisionInput im;
    im.pixel_values = Tensor::f32({n, W});
    std::copy(px.f.begin() + b * P * W, px.f.begin() + (b * P + n) * W, im.pixel_values.f.begin());
    im.positions = Tensor::i32({n, 2});
    std::copy(p, p + 2 * n, im.positions.i.begin());
    for (int64_t r = 0; r < n; ++r) {
      im.grid_w = std::max<int64_t>(im.grid_w, p[2 * r] + 1);
      im.grid_h = std::max<int64_t>(im.grid_h, p[2 * r + 1] + 1);
    }
    im.n_soft = k > 0 ? (im.grid_h / k) * (im.grid_w / k) : 0;
    images.push_back(std::move(im));
  }
  return images;
}

NamedTensors run_vision_taps(DiffusionGemma& model, const VisionInput& image, int64_t max_patches) {
  const int k = model.config().vision.pooling_kernel_size;
  const int64_t max_cells = max_patches / (int64_t(k) * k);
  TapRecorder rec;
  model.set_observer(&rec);
  struct Reset {
    DiffusionGemma& m;
    ~Reset() { m.set_observer(nullptr); }
  } reset{model};
  model.image_soft_tokens(image);
  NamedTensors out;
  for (const auto& [name, t] : rec.taps()) {
    if (name.rfind("vision.", 0) != 0) continue;
    if (name == "vision.pooled")
      out[name] = padded(t, max_cells);
    else if (name == "vision.standardized" || name == "vision.soft_tokens")
      out[name] = t;
    else
      out[name] = padded(t, max_patches);
  }
  Tensor mask = Tensor::i32({1, std::max(max_cells, image.n_soft)});
  for (int64_t c = 0; c < image.n_soft; ++c) mask.i[size_t(c)] = 1;
  out["vision.pooled_mask"] = std::move(mask);
  return out;
}

NamedTensors run_vision_case(DiffusionGemma& model, const std::string& file) {
  const TensorStore in = TensorStore::open_file(file);
  const int k = model.config().vision.pooling_kernel_size;
  std::vector<VisionInput> images = vision_inputs_from_case(in, file, k);
  if (images.size() != 1)
    throw Error(file + ": a vision case holds one image, this one " + std::to_string(images.size()));
  return run_vision_taps(model, images[0], in.find("pixel_values")->shape()[1]);
}

}  // namespace dgemma
