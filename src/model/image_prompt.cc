#include "model/image_prompt.h"

#include "dgemma/error.h"

namespace dgemma {

ImageMask parse_image_mask(const std::string& name) {
  if (name == "hf") return ImageMask::kHf;
  if (name == "jax") return ImageMask::kJax;
  if (name == "causal") return ImageMask::kCausal;
  throw Error("unknown image mask '" + name + "' (expected hf, jax or causal)");
}

std::string_view image_mask_name(ImageMask mask) {
  switch (mask) {
    case ImageMask::kHf: return "hf";
    case ImageMask::kJax: return "jax";
    case ImageMask::kCausal: return "causal";
  }
  return "?";
}

std::vector<ImageRun> image_runs(std::span<const int32_t> ids, int64_t image_token_id) {
  std::vector<ImageRun> runs;
  const int64_t n = int64_t(ids.size());
  for (int64_t k = 0; k < n;) {
    if (ids[size_t(k)] != image_token_id) {
      ++k;
      continue;
    }
    ImageRun r{k, 0};
    while (k < n && ids[size_t(k)] == image_token_id) ++k, ++r.count;
    runs.push_back(r);
  }
  return runs;
}

std::vector<int32_t> image_blocks(std::span<const int32_t> ids, int64_t image_token_id) {
  std::vector<int32_t> blocks(ids.size(), -1);
  const std::vector<ImageRun> runs = image_runs(ids, image_token_id);
  for (size_t b = 0; b < runs.size(); ++b)
    for (int64_t k = 0; k < runs[b].count; ++k) blocks[size_t(runs[b].first + k)] = int32_t(b);
  return blocks;
}

std::vector<ImageRun> match_image_runs(std::span<const int32_t> ids, int64_t image_token_id,
                                       std::span<const int64_t> n_soft, const std::string& who) {
  std::vector<ImageRun> runs = image_runs(ids, image_token_id);
  if (runs.size() != n_soft.size())
    throw Error(who + ": the prompt has " + std::to_string(runs.size()) + " run(s) of image placeholder ids (id " +
                std::to_string(image_token_id) + ") but " + std::to_string(n_soft.size()) + " image(s) were given");
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].count != n_soft[i])
      throw Error(who + ": image " + std::to_string(i) + " has " + std::to_string(n_soft[i]) +
                  " soft tokens but its run of placeholder ids at positions " + std::to_string(runs[i].first) + ".." +
                  std::to_string(runs[i].first + runs[i].count - 1) + " holds " + std::to_string(runs[i].count));
  return runs;
}

bool image_mask_allows(ImageMask mask, int64_t window, int64_t i, int64_t j, std::span<const int32_t> blocks) {
  const bool causal = j <= i;
  const bool in_window = window <= 0 || i - j < window;
  const int32_t bi = blocks[size_t(i)], bj = blocks[size_t(j)];
  const bool same_block = bi >= 0 && bi == bj;
  switch (mask) {
    case ImageMask::kCausal: return causal && in_window;
    case ImageMask::kHf: return (causal && in_window) || same_block;
    case ImageMask::kJax:
      if (window <= 0) return causal;  // full layers: images causal
      return (causal || same_block) && i - j < window && j - i < window;
  }
  return false;
}

}  // namespace dgemma
