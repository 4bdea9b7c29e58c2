// The visible text of a completion (src/server/completion_text.h): exact
// max_tokens across canvases, EOS, and OpenAI stop strings, also when one
// straddles two canvases.
#include "server/completion_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer_test_util.h"

namespace dgemma::server {
namespace {

constexpr int32_t kEos = 1;

const Tokenizer& tok() { return test::gemma3(); }

std::vector<int32_t> ids(const std::string& text) { return tok().encode(text, false); }

std::string decode(std::span<const int32_t> t) { return tok().decode(t, true); }

// Pushes `all` in canvases of `width` ids; returns the concatenated text.
std::string run(CompletionText& c, const std::vector<int32_t>& all, size_t width,
                std::vector<std::string>* pieces = nullptr) {
  std::string out;
  for (size_t i = 0; i < all.size() && !c.finished(); i += width) {
    const std::span<const int32_t> canvas(all.data() + i, std::min(width, all.size() - i));
    const std::string piece = c.push(canvas);
    if (pieces) pieces->push_back(piece);
    out += piece;
  }
  if (!c.finished()) out += c.finish();
  return out;
}

TEST(CompletionText, MaxTokensIsExactAcrossCanvases) {
  const std::vector<int32_t> all = ids("The quick brown fox jumps over the lazy dog and runs away into the forest.");
  ASSERT_GT(all.size(), 12u);
  CompletionText c(tok(), {kEos}, 7, {});
  const std::string text = run(c, all, 4);
  EXPECT_EQ(text, decode(std::span<const int32_t>(all.data(), 7)));
  EXPECT_EQ(c.completion_tokens(), 7);
  EXPECT_EQ(c.reason(), FinishReason::kLength);
  EXPECT_EQ(c.text(), text);
}

TEST(CompletionText, EosEndsTheTextWithStop) {
  std::vector<int32_t> all = ids("Hello there, friend");
  const size_t before = all.size();
  all.push_back(kEos);
  for (const int32_t t : ids(" never shown")) all.push_back(t);
  CompletionText c(tok(), {kEos}, 100, {});
  EXPECT_EQ(run(c, all, 3), decode(std::span<const int32_t>(all.data(), before)));
  EXPECT_EQ(c.reason(), FinishReason::kStop);
  EXPECT_EQ(c.completion_tokens(), int64_t(before));
}

TEST(CompletionText, RunOutOfCanvasesIsLength) {
  const std::vector<int32_t> all = ids("Just a few words");
  CompletionText c(tok(), {kEos}, 100, {});
  EXPECT_EQ(run(c, all, 2), "Just a few words");
  EXPECT_EQ(c.reason(), FinishReason::kLength);
  EXPECT_EQ(c.completion_tokens(), int64_t(all.size()));
}

TEST(CompletionText, StopStringStraddlingTwoCanvases) {
  const std::string full = "alpha beta gamma delta epsilon zeta eta theta";
  const std::string stop = "gamma delta";
  const std::vector<int32_t> all = ids(full);
  // Every canvas width whose boundary falls inside "gamma delta".
  const size_t at = full.find(stop);
  int straddled = 0;
  for (size_t width = 1; width <= all.size(); ++width) {
    bool inside = false;
    for (size_t k = width; k < all.size(); k += width) {
      const size_t len = decode(std::span<const int32_t>(all.data(), k)).size();
      inside = inside || (len > at && len < at + stop.size());
    }
    if (!inside) continue;
    ++straddled;
    std::vector<std::string> pieces;
    CompletionText c(tok(), {kEos}, 100, {"zzz", stop});
    const std::string text = run(c, all, width, &pieces);
    EXPECT_EQ(text, full.substr(0, at)) << "width " << width;
    EXPECT_EQ(c.reason(), FinishReason::kStop);
    // The tokens up to the one that completed the stop string.
    const int64_t n = c.completion_tokens();
    EXPECT_GE(decode(std::span<const int32_t>(all.data(), size_t(n))).size(), at + stop.size());
    EXPECT_LT(decode(std::span<const int32_t>(all.data(), size_t(n - 1))).size(), at + stop.size());
    // No piece ever showed part of the stop string.
    for (const std::string& p : pieces) EXPECT_EQ(p.find("gam"), std::string::npos) << p;
  }
  EXPECT_GT(straddled, 0);
}

TEST(CompletionText, HeldBackPrefixIsReleasedWhenItIsNoStop) {
  // "Hello wor" could start "world peace": held back until the next canvas
  // shows "world war" instead.
  const std::vector<int32_t> a = ids("Hello wor");
  const std::vector<int32_t> b = ids("ld war");
  CompletionText c(tok(), {kEos}, 100, {"world peace"});
  const std::string first = c.push(a);
  EXPECT_EQ(first.find("wor"), std::string::npos) << first;
  std::string rest = c.push(b);
  rest += c.finish();
  EXPECT_EQ(first + rest, decode(a) + decode(b));
  EXPECT_EQ(c.reason(), FinishReason::kLength);
}

TEST(CompletionText, StopAtTheVeryStartGivesEmptyText) {
  CompletionText c(tok(), {kEos}, 100, {"Hello"});
  EXPECT_EQ(run(c, ids("Hello world"), 8), "");
  EXPECT_EQ(c.reason(), FinishReason::kStop);
  EXPECT_EQ(c.completion_tokens(), 1);
}

TEST(CompletionText, DraftsAreCutAtEosAndTheTokenBudget) {
  const std::vector<int32_t> words = ids("one two three four five");
  CompletionText c(tok(), {kEos}, 3, {});
  EXPECT_EQ(c.draft(words), decode(std::span<const int32_t>(words.data(), 3)));
  std::vector<int32_t> with_eos = {words[0], kEos, words[1]};
  EXPECT_EQ(c.draft(with_eos), decode(std::span<const int32_t>(words.data(), 1)));
  c.push(std::span<const int32_t>(words.data(), 2));
  EXPECT_EQ(c.draft(words), decode(std::span<const int32_t>(words.data(), 1)));
}

}  // namespace
}  // namespace dgemma::server
