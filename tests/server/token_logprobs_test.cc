// Log-probabilities of answer tokens (src/server/token_logprobs.h), on rows
// whose softmax is known by hand.
#include "server/token_logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "generate/default_model_fixture.h"

namespace dgemma::server {
namespace {

// z = log(1, 2, 2, 3): probabilities 1/8, 2/8, 2/8, 3/8.
TEST(TokenLogprobs, LogSoftmaxAndTheMostLikelyTokensWithTiesByLowerId) {
  const std::vector<float> z = {0.0f, std::log(2.0f), std::log(2.0f), std::log(3.0f)};
  const PositionLogprobs p = position_logprobs(z, 3, 3);
  EXPECT_EQ(p.id, 3);
  EXPECT_NEAR(p.logprob, std::log(3.0 / 8.0), 1e-6);
  ASSERT_EQ(p.top.size(), 3u);
  EXPECT_EQ(p.top[0].id, 3);
  EXPECT_EQ(p.top[1].id, 1);  // ties with id 2: the lower id first
  EXPECT_EQ(p.top[2].id, 2);
  EXPECT_NEAR(p.top[1].logprob, std::log(2.0 / 8.0), 1e-6);
  EXPECT_NEAR(position_logprobs(z, 0, 0).logprob, std::log(1.0 / 8.0), 1e-6);
  EXPECT_TRUE(position_logprobs(z, 0, 0).top.empty());
  EXPECT_EQ(position_logprobs(z, 0, 10).top.size(), 4u);  // no more alternatives than tokens
}

// Large logits do not overflow: the maximum is subtracted before exp.
TEST(TokenLogprobs, LargeLogitsStayFinite) {
  const std::vector<float> z = {1000.0f, 1000.0f};
  EXPECT_NEAR(position_logprobs(z, 1, 1).logprob, std::log(0.5), 1e-9);
}

TEST(TokenLogprobs, TokenTextAndBytes) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  const int32_t byte = tok.token_id("<0xE4>");
  ASSERT_GE(byte, 0);
  const TokenText b = token_text(tok, byte);
  EXPECT_EQ(b.bytes, std::vector<uint8_t>{0xE4});  // one byte of a UTF-8 sequence, not text on its own
  const int32_t world = tok.token_id("\u2581world");
  ASSERT_GE(world, 0);
  const TokenText w = token_text(tok, world);
  EXPECT_EQ(w.text, " world");
  EXPECT_EQ(w.bytes, (std::vector<uint8_t>{' ', 'w', 'o', 'r', 'l', 'd'}));
}

}  // namespace
}  // namespace dgemma::server
