// The benchmark slice's config (checkpoint/model_slice.h): the real model cut
// to a few text layers and a few vision layers at the published width, its
// vision_config kept as abbreviated as the real one (docs/model.md §7.1).
#include <gtest/gtest.h>

#include "checkpoint/config.h"
#include "checkpoint/model_slice.h"
#include "checkpoint/tensor_names.h"
#include "checkpoint/vision_shapes.h"

namespace dgemma {
namespace {

TEST(ModelSlice, TwoVisionLayersAtTheRealWidth) {
  ModelConfig c = parse_model_config(slice_config_json(2, 2), "slice/config.json");
  EXPECT_EQ(c.num_layers, 2);
  ASSERT_TRUE(c.vision_tower);
  EXPECT_EQ(c.vision.num_layers, 2);
  EXPECT_EQ(c.vision.hidden_size, 1152);
  EXPECT_FALSE(c.vision.complete());  // as abbreviated as the published copy
  fill_published_tower_sizes(c.vision);
  const std::vector<ExpectedTensor> t = expected_vision_tensors(c);
  EXPECT_EQ(t.size(), size_t(2 * 13 + 5));
  int64_t params = 0;
  for (const ExpectedTensor& e : t) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    params += n;
    if (e.name.find("layers.1.mlp.gate_proj") != std::string::npos) {
      EXPECT_EQ(e.shape, (std::vector<int64_t>{4304, 1152}));
    }
  }
  // Two of the 27 layers: 572,794,416 − 25·20,187,792 (docs/model.md §7.1).
  EXPECT_EQ(params, 572794416 - 25 * int64_t(20187792));
}

TEST(ModelSlice, NoTowerOnRequest) {
  const ModelConfig c = parse_model_config(slice_config_json(2, 0), "slice/config.json");
  EXPECT_FALSE(c.has_vision_config);
  EXPECT_TRUE(expected_vision_tensors(c).empty());
}

}  // namespace
}  // namespace dgemma
