#include "model/diffusion_model.h"

#include <string>

#include "dgemma/error.h"

namespace dgemma {

void DiffusionModel::decode_sample(const int32_t*, bool, float, const double*, RowSamples&) {
  throw Error("decode_sample: this model does not run the sampler pass itself (samples_rows() is false)");
}

void DiffusionModel::encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images) {
  if (!images.empty()) throw Error("encode: this model takes no images (" + std::to_string(images.size()) + " given)");
  encode(ids);
}

void DiffusionModel::processed_logits(float*) {
  throw Error("processed_logits: this model does not keep processed logits (samples_rows() is false)");
}

}  // namespace dgemma
