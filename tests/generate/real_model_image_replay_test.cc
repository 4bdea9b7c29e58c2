// Replays the reference generate() run over a prompt with an image (golden V
// generate_image_one) with the REAL model: the vision tower on the case's
// pixels, the prefill with the image's soft tokens under the hf mask
// (docs/model.md §7.7), then text canvases; the recorded draws and, as in
// real_model_replay_test.cc, the recorded self-conditioning. Every step and
// the output must equal the recording.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "generate/generate.h"
#include "generate/recorded_self_conditioning.h"
#include "golden_case.h"
#include "io/safetensors.h"
#include "model/diffusion_gemma.h"
#include "model/image_prompt.h"
#include "model/vision_parity.h"
#include "step_recorder.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

using testing::bits;
using testing::effective_config;
using testing::GoldenCase;
using testing::StepRecorder;

TEST(RealModelImageReplay, MatchesReference) {
  const GoldenCase golden("generate_image_one", testing::golden_v_dir());
  const GenerationConfig config = effective_config(golden);
  const std::vector<int32_t> prompt = golden.ints32("input_ids");

  ModelOptions options;
  options.load_threads = 2;
  auto model = test::load_on_cpu(testing::golden_v_dir(), options);
  ASSERT_EQ(model->options().image_mask, ImageMask::kHf);  // generate()'s rule is the default
  const TensorStore in = TensorStore::open_file(golden.tensors_path());
  const std::vector<VisionInput> images =
      vision_inputs_from_case(in, golden.tensors_path(), model->config().vision.pooling_kernel_size);
  ASSERT_EQ(images.size(), 1u);

  RecordedSelfConditioning anchored(*model, golden.tensors_path());
  ReplayDraws draws(golden.tensors_path());
  StepRecorder recorder;
  const GenerationResult result = generate(anchored, prompt, config, draws, &recorder, {}, images);
  EXPECT_NO_THROW(draws.expect_exhausted());

  EXPECT_EQ(result.sequences, golden.ints32("output.sequences"));
  EXPECT_EQ(bits(result.tokens_per_forward), bits(golden.floats("output.tokens_per_forward").at(0)));
  testing::expect_run_matches(result, recorder, golden, 1e-3);
}

// The model with the case's own soft tokens in place of the vision tower:
// the prefill's merge and mask, and the text canvases after it, apart from
// the tower.
class GoldenSoftTokens final : public DiffusionModel {
 public:
  GoldenSoftTokens(DiffusionGemma& inner, std::vector<Tensor> soft) : inner_(inner), soft_(std::move(soft)) {}
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  int64_t canvas_length() const override { return inner_.canvas_length(); }
  int64_t cache_length() const override { return inner_.cache_length(); }
  void encode(const std::vector<int32_t>& ids) override { inner_.encode(ids); }
  void encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images) override {
    EXPECT_EQ(images.size(), soft_.size());
    inner_.encode_soft_tokens(ids, soft_);
  }
  void decode(const int32_t* canvas, const float* sc, float* logits) override { inner_.decode(canvas, sc, logits); }
  void truncate_cache(int64_t length) override { inner_.truncate_cache(length); }

 private:
  DiffusionGemma& inner_;
  std::vector<Tensor> soft_;
};

TEST(RealModelImageReplay, GoldenSoftTokensMatchReference) {
  const GoldenCase golden("generate_image_one", testing::golden_v_dir());
  const GenerationConfig config = effective_config(golden);
  ModelOptions options;
  options.load_threads = 2;
  auto model = test::load_on_cpu(testing::golden_v_dir(), options);
  const std::vector<float> rows = golden.floats("vision.soft_tokens");
  Tensor soft = Tensor::f32({int64_t(rows.size()) / model->config().hidden_size, model->config().hidden_size});
  soft.f = rows;
  GoldenSoftTokens with_soft(*model, {soft});
  RecordedSelfConditioning anchored(with_soft, golden.tensors_path());
  ReplayDraws draws(golden.tensors_path());
  StepRecorder recorder;
  const std::vector<VisionInput> one_image(1);
  const GenerationResult result =
      generate(anchored, golden.ints32("input_ids"), config, draws, &recorder, {}, one_image);
  EXPECT_NO_THROW(draws.expect_exhausted());
  EXPECT_EQ(result.sequences, golden.ints32("output.sequences"));
  EXPECT_EQ(bits(result.tokens_per_forward), bits(golden.floats("output.tokens_per_forward").at(0)));
  testing::expect_run_matches(result, recorder, golden, 1e-3);
}

// The masks generate() passed to its first encoder call are the hf rule over
// the prompt's image block (the later canvas is a text pass).
TEST(RealModelImageReplay, FirstEncoderCallMasksAreTheHfRule) {
  const GoldenCase golden("generate_image_one", testing::golden_v_dir());
  ModelOptions options;
  options.load_threads = 2;
  auto model = test::load_on_cpu(testing::golden_v_dir(), options);
  const std::vector<int32_t> prompt = golden.ints32("input_ids");
  const int64_t T = int64_t(prompt.size()), window = model->config().sliding_window;
  const std::vector<int32_t> blocks = image_blocks(prompt, model->config().image_token_id);
  ASSERT_EQ(image_runs(prompt, model->config().image_token_id).size(), 1u);
  for (const auto& [tensor, w] : {std::pair<std::string, int64_t>{"canvas.0.encoder_mask.full_attention", 0},
                                  std::pair<std::string, int64_t>{"canvas.0.encoder_mask.sliding_attention", window}}) {
    const std::vector<int64_t> golden_mask = golden.ints(tensor);
    ASSERT_EQ(int64_t(golden_mask.size()), T * T);
    int64_t wrong = 0;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j)
        wrong += image_mask_allows(ImageMask::kHf, w, i, j, blocks) != (golden_mask[size_t(i * T + j)] != 0);
    EXPECT_EQ(wrong, 0) << tensor;
  }
}

// The same prompt without its image is refused: its placeholders need one.
TEST(RealModelImageReplay, PlaceholdersWithoutTheImageAreRefused) {
  const GoldenCase golden("generate_image_one", testing::golden_v_dir());
  ModelOptions options;
  options.load_threads = 2;
  auto model = test::load_on_cpu(testing::golden_v_dir(), options);
  EXPECT_THROW(model->encode_with_images(golden.ints32("input_ids"), {}), Error);
}

}  // namespace
}  // namespace dgemma
