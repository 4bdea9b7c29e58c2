// Multi-turn chat with KV-cache reuse (docs/model.md §3.6) on the default model: a
// turn that reuses the cache gives exactly the tokens of a fresh run over the
// whole conversation; the last (never encoded) canvas of a reply is part of
// the next turn's input; a reply trimmed inside an encoded canvas forces a
// rebuild (sliding layers cannot be truncated); /reset starts over.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "default_model_fixture.h"
#include "dgemma/error.h"
#include "generate/chat_session.h"
#include "generate/generate.h"
#include "generate/token_stream.h"
#include "image/image_preprocess.h"
#include "image/image_processor_config.h"
#include "model/diffusion_gemma.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

std::unique_ptr<DiffusionGemma> load_model() {
  ModelOptions o;
  o.load_threads = 2;
  return test::load_on_cpu(testing::default_model_test_dir(), o);
}

GenerationConfig chat_config() {
  GenerationConfig c = load_generation_config(testing::default_model_test_dir()).config;
  c.max_new_tokens = 32;  // two canvases: generate() encodes the first only
  c.max_denoising_steps = 2;
  return c;
}

std::vector<int32_t> visible(const GenerationResult& r, const GenerationConfig& c, int64_t max_tokens) {
  TokenStream s(c.eos_token_ids, max_tokens);
  s.push(r.generated());
  return s.tokens();
}

TEST(ChatSession, ReusedCacheGivesTheSameReplyAsAFreshRun) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  const GenerationConfig config = chat_config();
  auto model = load_model();
  ChatSession chat(*model, tok, ChatTemplateKind::kAuto, "", false);

  const ChatSession::TurnInput t0 = chat.begin_turn("Hello");
  EXPECT_EQ(t0.reused, 0);
  EXPECT_FALSE(t0.cache_reset);
  EXPECT_EQ(t0.new_ids, encode_chat(tok, {{"user", "Hello", {}}}, true, false));
  RandomDraws d0(100);
  const GenerationResult r0 = generate(*model, t0.new_ids, config, d0);
  const std::vector<int32_t> reply0 = visible(r0, config, config.max_new_tokens);
  chat.end_turn(r0, reply0);
  // The prompt and the first canvas are in the cache; the second is not.
  EXPECT_EQ(model->cache_length(), int64_t(t0.new_ids.size()) + 16);
  EXPECT_EQ(chat.cached().size(), t0.new_ids.size() + 16);

  const ChatSession::TurnInput t1 = chat.begin_turn("Again?");
  EXPECT_EQ(t1.reused, int64_t(t0.new_ids.size()) + 16);
  EXPECT_FALSE(t1.cache_reset);
  // The conversation: first prompt, reply (up to its EOS), <turn|>\n, next turn.
  std::vector<int32_t> want = t0.new_ids;
  want.insert(want.end(), reply0.begin(), reply0.end());
  const std::vector<int32_t> closing = {tok.token_id("<turn|>"), 107};
  want.insert(want.end(), closing.begin(), closing.end());
  const std::vector<int32_t> turn =
      tok.encode("<|turn>user\nAgain?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>", false);
  want.insert(want.end(), turn.begin(), turn.end());
  EXPECT_EQ(chat.history(), want);
  EXPECT_EQ(t1.new_ids, std::vector<int32_t>(want.begin() + t1.reused, want.end()));

  const std::vector<int32_t> conversation = chat.history();
  RandomDraws d1(101);
  const GenerationResult r1 = generate(*model, t1.new_ids, config, d1);

  // Reference: a fresh model reading the whole conversation at once.
  auto fresh = load_model();
  RandomDraws d1_fresh(101);
  const GenerationResult ref = generate(*fresh, conversation, config, d1_fresh);
  EXPECT_EQ(std::vector<int32_t>(r1.generated().begin(), r1.generated().end()),
            std::vector<int32_t>(ref.generated().begin(), ref.generated().end()));
  EXPECT_EQ(r1.steps_per_canvas, ref.steps_per_canvas);
  EXPECT_EQ(model->cache_length(), fresh->cache_length());
  chat.end_turn(r1, visible(r1, config, config.max_new_tokens));

  chat.reset();
  EXPECT_EQ(model->cache_length(), 0);
  EXPECT_TRUE(chat.history().empty());
  const ChatSession::TurnInput again = chat.begin_turn("Hello");
  EXPECT_EQ(again.new_ids, t0.new_ids);
  EXPECT_EQ(again.reused, 0);
}

TEST(ChatSession, ReplyTrimmedInsideAnEncodedCanvasRebuildsTheCache) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  const GenerationConfig config = chat_config();
  auto model = load_model();
  ChatSession chat(*model, tok, ChatTemplateKind::kAuto, "Be brief.", false);
  const ChatSession::TurnInput t0 = chat.begin_turn("Hello");
  RandomDraws d0(7);
  const GenerationResult r0 = generate(*model, t0.new_ids, config, d0);
  // Show only 5 tokens although the first canvas (16) is already encoded:
  // the cache holds tokens the conversation no longer has.
  chat.end_turn(r0, visible(r0, config, 5));
  const ChatSession::TurnInput t1 = chat.begin_turn("More");
  EXPECT_TRUE(t1.cache_reset);
  EXPECT_EQ(t1.reused, 0);
  EXPECT_EQ(t1.new_ids, chat.history());
  EXPECT_EQ(model->cache_length(), 0);
  RandomDraws d1(8);
  EXPECT_NO_THROW(generate(*model, t1.new_ids, config, d1));
}

// Context limit: when the next turn would not fit, the oldest turns go; the
// first kept turn is re-rendered as a first turn (with the system prompt),
// the cache keeps the common prefix, and the reply equals a fresh run over
// the truncated conversation. A turn that cannot fit alone is refused and
// leaves the session unchanged.
TEST(ChatSession, ContextLimitDropsTheOldestTurns) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  GenerationConfig config = chat_config();
  config.max_new_tokens = 16;  // one canvas per reply
  auto model = load_model();
  ChatSession chat(*model, tok, ChatTemplateKind::kAuto, "Be brief.", false);
  const auto turn = [&](const std::string& text, uint64_t seed) {
    const ChatSession::TurnInput in = chat.begin_turn(text);
    RandomDraws d(seed);
    const GenerationResult r = generate(*model, in.new_ids, config, d);
    chat.end_turn(r, visible(r, config, config.max_new_tokens));
    return in;
  };
  const ChatSession::TurnInput t0 = turn("One", 1);
  const size_t after_one = chat.history().size();
  turn("Two", 2);
  // Room for the history so far plus a bit, but not for a third turn.
  const int64_t limit = int64_t(chat.history().size()) + 16 + 4;
  chat.set_context_limit(limit, 16);
  const ChatSession::TurnInput t2 = chat.begin_turn("Three");
  EXPECT_EQ(t2.dropped_turns, 1);
  EXPECT_EQ(chat.turns(), 2u);
  EXPECT_LE(int64_t(chat.history().size()) + 16, limit);
  // The kept conversation starts as a first turn with the system prompt.
  const std::vector<int32_t> first = encode_chat(tok, {{"system", "Be brief.", {}}, {"user", "Two", {}}}, true, false);
  ASSERT_GE(chat.history().size(), first.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), chat.history().begin()));
  // The cache keeps at most the common prefix (the system turn), or is
  // rebuilt when a sliding layer no longer holds the rows for that.
  EXPECT_TRUE(t2.cache_reset || (t2.reused > 0 && t2.reused < int64_t(after_one)));
  const std::vector<int32_t> conversation = chat.history();
  RandomDraws d(3);
  const GenerationResult r = generate(*model, t2.new_ids, config, d);
  auto fresh = load_model();
  RandomDraws d_fresh(3);
  const GenerationResult ref = generate(*fresh, conversation, config, d_fresh);
  EXPECT_EQ(std::vector<int32_t>(r.generated().begin(), r.generated().end()),
            std::vector<int32_t>(ref.generated().begin(), ref.generated().end()));
  chat.end_turn(r, visible(r, config, config.max_new_tokens));

  // Too long for the limit even alone: refused, nothing changes.
  const std::vector<int32_t> before = chat.history();
  std::string huge;
  for (int i = 0; i < 200; ++i) huge += "word ";
  try {
    chat.begin_turn(huge);
    FAIL() << "a turn larger than the context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(-c/--ctx-size)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(chat.history(), before);
  EXPECT_EQ(chat.turns(), 2u);
  (void)t0;
}

}  // namespace
}  // namespace dgemma

namespace dgemma {
namespace {

// A deterministic picture for the default model's processor (docs/image.md).
VisionInput test_picture(int64_t height, int64_t width, int seed) {
  RgbImage img = RgbImage::zeros(height, width);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = uint8_t((i * 37 + size_t(seed) * 101) % 251);
  return preprocess_image(std::move(img), read_image_processor_config(testing::default_model_test_dir())).input;
}

const ImageTokenIds kGemma4Images{258880, 255999, 258882};

TEST(ChatSession, APictureIsEncodedWithItsTurnAndReusedAfter) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  const GenerationConfig config = chat_config();
  auto model = load_model();
  ChatSession chat(*model, tok, ChatTemplateKind::kAuto, "", false);
  chat.set_image_tokens(kGemma4Images);
  const VisionInput picture = test_picture(40, 60, 1);
  ASSERT_GT(picture.n_soft, 0);

  const ChatSession::TurnInput t0 = chat.begin_turn("Look.", {picture});
  ASSERT_EQ(t0.images.size(), 1u);
  EXPECT_EQ(std::count(t0.new_ids.begin(), t0.new_ids.end(), 258880), picture.n_soft);
  const auto boi = std::find(t0.new_ids.begin(), t0.new_ids.end(), 255999);
  ASSERT_NE(boi, t0.new_ids.end());
  EXPECT_EQ(*(boi + 1 + picture.n_soft), 258882);  // BOI, the run, EOI
  RandomDraws d0(5);
  const GenerationResult r0 = generate(*model, t0.new_ids, config, d0, nullptr, {}, t0.images);
  chat.end_turn(r0, visible(r0, config, config.max_new_tokens));

  // The next turn re-encodes no picture: its run is in the cache.
  const ChatSession::TurnInput t1 = chat.begin_turn("And?");
  EXPECT_TRUE(t1.images.empty());
  EXPECT_EQ(std::count(t1.new_ids.begin(), t1.new_ids.end(), 258880), 0);
  RandomDraws d1(6);
  const GenerationResult r1 = generate(*model, t1.new_ids, config, d1, nullptr, {}, t1.images);
  // A fresh model over the whole conversation, the picture given again, answers alike.
  auto fresh = load_model();
  RandomDraws d_fresh(6);
  const std::vector<VisionInput> again = {picture};
  const GenerationResult ref = generate(*fresh, chat.history(), config, d_fresh, nullptr, {}, again);
  EXPECT_EQ(std::vector<int32_t>(r1.generated().begin(), r1.generated().end()),
            std::vector<int32_t>(ref.generated().begin(), ref.generated().end()));
}

TEST(ChatSession, AnotherPictureOfTheSameSizeIsNotTakenFromTheCache) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  GenerationConfig config = chat_config();
  config.max_new_tokens = 16;
  auto model = load_model();
  ChatSession chat(*model, tok, ChatTemplateKind::kAuto, "Be brief.", false);
  chat.set_image_tokens(kGemma4Images);
  const auto turn = [&](const std::string& text, std::vector<VisionInput> pictures, uint64_t seed) {
    const ChatSession::TurnInput in = chat.begin_turn(text, std::move(pictures));
    RandomDraws d(seed);
    const GenerationResult r = generate(*model, in.new_ids, config, d, nullptr, {}, in.images);
    chat.end_turn(r, visible(r, config, config.max_new_tokens));
    return in;
  };
  turn("One", {test_picture(40, 60, 1)}, 1);
  turn("Two", {test_picture(40, 60, 2)}, 2);  // same size: the same ids as the first picture's
  // Room for the history so far plus a bit, not for a third turn: the first
  // is dropped, and the conversation now starts with the second picture
  // where the cache holds the first.
  chat.set_context_limit(int64_t(chat.history().size()) + 16 + 4, 16);
  const ChatSession::TurnInput t2 = chat.begin_turn("Three");
  EXPECT_GE(t2.dropped_turns, 1);
  ASSERT_EQ(t2.images.size(), 1u);
  const auto run = std::find(chat.history().begin(), chat.history().end(), 258880);
  ASSERT_NE(run, chat.history().end());
  EXPECT_LE(t2.reused, int64_t(run - chat.history().begin()));  // the cache stops before the run
  EXPECT_EQ(std::count(t2.new_ids.begin(), t2.new_ids.end(), 258880), t2.images[0].n_soft);
}

TEST(ChatSession, PicturesNeedTheModelsImageIds) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  auto model = load_model();
  ChatSession chat(*model, tok, ChatTemplateKind::kAuto, "", false);
  EXPECT_THROW(chat.begin_turn("Look.", {test_picture(40, 60, 1)}), Error);
}

}  // namespace
}  // namespace dgemma
