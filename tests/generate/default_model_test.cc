// The embedded default model: tiny-B shape (docs/model.md §5.2) with the real
// vocabulary, a Gemma-4-style tokenizer whose chat template gives the real
// Gemma 4 prompt ids (docs/model.md §3.6), deterministic files, and a generation run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "default_model_fixture.h"
#include "dgemma/error.h"
#include "generate/generate.h"
#include "generate/generation_config.h"
#include "model/diffusion_gemma.h"
#include "tokenizer/chat_template.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

testing::DefaultModelCleanup cleanup;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DefaultModel, ShapeIsTinyBWithRealVocabulary) {
  ModelOptions o;
  o.load_threads = 2;
  auto model = test::load_on_cpu(testing::default_model_test_dir(), o);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_EQ(c.hidden_size, 96);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.layer(3).type, LayerType::kFull);
  EXPECT_EQ(c.layer(0).type, LayerType::kSliding);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.global_head_dim, 32);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.canvas_length, 16);
  EXPECT_EQ(model->weights().embed.dtype, DType::kBF16);
  const LoadedGenerationConfig g = load_generation_config(testing::default_model_test_dir());
  EXPECT_TRUE(g.file_found);
  EXPECT_EQ(g.config.max_denoising_steps, 8);
  EXPECT_EQ(g.config.eos_token_ids, (std::vector<int32_t>{1, 106, 50}));
}

// A small vision tower (docs/model.md §7.1) with its processor settings: an
// image of 6x9 patches (2x3 cells of 3x3) gives 6 soft tokens of the text width.
TEST(DefaultModel, HasASmallVisionTower) {
  auto model = test::load_on_cpu(testing::default_model_test_dir());
  ASSERT_TRUE(model->has_vision_tower());
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.vision.hidden_size, 32);
  EXPECT_EQ(c.vision.num_layers, 2);
  EXPECT_EQ(c.vision.patch_size, 4);
  EXPECT_EQ(c.image_token_id, 258880);
  EXPECT_EQ(c.boi_token_id, 255999);
  EXPECT_EQ(c.eoi_token_id, 258882);
  EXPECT_EQ(model->weights().vision.input_proj.dtype, DType::kBF16);
  const std::string pre = slurp(testing::default_model_test_dir() + "/preprocessor_config.json");
  EXPECT_NE(pre.find("\"max_soft_tokens\": 70"), std::string::npos) << pre;
  EXPECT_NE(pre.find("\"patch_size\": 4"), std::string::npos) << pre;
  VisionInput im;
  im.grid_h = 6;
  im.grid_w = 9;
  im.n_soft = 6;
  im.pixel_values = Tensor::f32({54, 48});
  for (size_t k = 0; k < im.pixel_values.f.size(); ++k) im.pixel_values.f[k] = float(k % 256) / 255.0f;
  im.positions = Tensor::i32({54, 2});
  for (int32_t r = 0; r < 54; ++r) {
    im.positions.i[size_t(2 * r)] = r % 9;
    im.positions.i[size_t(2 * r + 1)] = r / 9;
  }
  const Tensor soft = model->image_soft_tokens(im);
  EXPECT_EQ(soft.shape, (std::vector<int64_t>{6, 96}));
  for (float x : soft.f) ASSERT_TRUE(std::isfinite(x));
}

TEST(DefaultModel, TokenizerIsGemma4Style) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 262144u);
  EXPECT_EQ(tok.token_id("<|turn>"), 105);
  EXPECT_EQ(tok.token_id("<turn|>"), 106);
  EXPECT_EQ(tok.token_id("<|channel>"), 100);
  EXPECT_EQ(tok.token_id("<|tool_response>"), 50);
  EXPECT_EQ(tok.token_id("<start_of_turn>"), -1);
  EXPECT_EQ(detect_chat_template(tok), ChatTemplateKind::kGemma4);
  // docs/model.md §3.6 golden, thinking off.
  const std::vector<ChatMessage> m = {{"user", "Write a long essay about Portugal.", {}}};
  const std::vector<int32_t> want = {2,      105, 2364, 107, 6974, 496, 1440, 20494, 1003, 23613,
                                     236761, 106, 107,  105, 4368, 107, 100,  45518, 107,  101};
  EXPECT_EQ(encode_chat(tok, m, true, false), want);
  EXPECT_EQ(tok.encode("Hello", true), (std::vector<int32_t>{2, 9259}));
  // The image markers carry the Gemma 4 names and ids (docs/model.md §7.6).
  EXPECT_EQ(tok.token_id("<|image>"), 255999);
  EXPECT_EQ(tok.token_id("<|image|>"), 258880);
  EXPECT_EQ(tok.token_id("<image|>"), 258882);
  EXPECT_EQ(tok.token_id("<start_of_image>"), -1);
  const std::vector<ChatMessage> pic = {
      {"user", "", std::vector<ChatContentPart>{{"image", "", ""}, {"text", "Describe it.", ""}}}};
  EXPECT_EQ(render_chat(tok, pic, true, false),
            "<bos><|turn>user\n\n\n<|image|>\n\nDescribe it.<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  const std::vector<int32_t> ids = encode_chat(tok, pic, true, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 258880), 1);
}

TEST(DefaultModel, Gemma4TokenizerRejectsOtherFiles) {
  EXPECT_THROW(gemma4_style_tokenizer_json("{\"added_tokens\": []}", "x.json"), Error);
}

TEST(DefaultModel, GenerationIsDeterministic) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("dgemma_default_model_again_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  write_default_model(dir, default_tokenizer_source());
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "model.safetensors"})
    EXPECT_TRUE(slurp(dir + "/" + f) == slurp(testing::default_model_test_dir() + "/" + f)) << f;
  std::filesystem::remove_all(dir);
}

TEST(DefaultModel, Generates) {
  ModelOptions o;
  o.load_threads = 2;
  auto model = test::load_on_cpu(testing::default_model_test_dir(), o);
  GenerationConfig config = load_generation_config(testing::default_model_test_dir()).config;
  config.max_new_tokens = 16;
  config.max_denoising_steps = 2;
  RandomDraws draws(1);
  const std::vector<int32_t> prompt = testing::default_model_tokenizer().encode("Hello", true);
  const GenerationResult r = generate(*model, prompt, config, draws);
  EXPECT_EQ(r.sequences.size(), prompt.size() + 16);
  ASSERT_EQ(r.steps_per_canvas.size(), 1u);
  EXPECT_LE(r.steps_per_canvas[0], 2);
  EXPECT_NO_THROW(testing::default_model_tokenizer().decode(r.generated()));
}

}  // namespace
}  // namespace dgemma
