#include "tokenizer/image_placeholders.h"

#include <algorithm>
#include <string>

#include "dgemma/error.h"

namespace dgemma {

std::vector<int32_t> expand_image_placeholders(std::span<const int32_t> ids, std::span<const int64_t> soft_counts,
                                               const ImageTokenIds& tokens) {
  if (tokens.image < 0 || tokens.boi < 0 || tokens.eoi < 0)
    throw Error("image placeholders: the model has no image, begin-of-image or end-of-image token id");
  const auto placeholders = size_t(std::count(ids.begin(), ids.end(), tokens.image));
  if (placeholders != soft_counts.size())
    throw Error("image placeholders: the prompt has " + std::to_string(placeholders) + " image placeholder" +
                (placeholders == 1 ? "" : "s") + " but " + std::to_string(soft_counts.size()) + " image" +
                (soft_counts.size() == 1 ? " was" : "s were") + " given");
  int64_t extra = 0;
  for (size_t k = 0; k < soft_counts.size(); ++k) {
    if (soft_counts[k] < 1)
      throw Error("image placeholders: image " + std::to_string(k) + " has " + std::to_string(soft_counts[k]) +
                  " soft tokens");
    extra += soft_counts[k] + 1;  // BOI + n placeholders + EOI replace one placeholder
  }
  std::vector<int32_t> out;
  out.reserve(ids.size() + size_t(extra));
  size_t image = 0;
  for (int32_t id : ids) {
    if (id != tokens.image) {
      out.push_back(id);
      continue;
    }
    out.push_back(tokens.boi);
    out.insert(out.end(), size_t(soft_counts[image++]), tokens.image);
    out.push_back(tokens.eoi);
  }
  return out;
}

}  // namespace dgemma
