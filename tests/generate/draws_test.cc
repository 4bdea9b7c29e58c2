// Draw sources (docs/model.md §3.5): RandomDraws is a pure function of (seed, canvas,
// step, purpose, position); ReplayDraws enforces the reference tape order and
// shapes with readable errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "generate/draws.h"
#include "io/safetensors.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

constexpr int64_t kVocab = 512;
constexpr size_t kLength = 16;

std::vector<float> test_logits(size_t length, int64_t vocab) { return normal_values(int64_t(length) * vocab, 1, 3.0f); }

TEST(RandomDraws, PositionsAreIndependentOfCallOrder) {
  RandomDraws draws(1234);
  std::vector<int32_t> init(kLength), noise(kLength), sample(kLength);
  const std::vector<float> z = test_logits(kLength, kVocab);
  draws.canvas_init(2, kVocab, init);
  draws.renoise(2, 5, kVocab, noise);
  draws.sample(2, 5, z.data(), kVocab, sample);

  // Visit positions in a shuffled order on a fresh object.
  std::vector<size_t> order(kLength);
  std::iota(order.begin(), order.end(), size_t(0));
  std::shuffle(order.begin(), order.end(), Rng(7));
  const RandomDraws fresh(1234);
  for (size_t i : order) {
    EXPECT_EQ(fresh.uniform_token(2, 0, DrawPurpose::kInit, int64_t(i), kVocab), init[i]);
    EXPECT_EQ(fresh.uniform_token(2, 5, DrawPurpose::kRenoise, int64_t(i), kVocab), noise[i]);
    EXPECT_EQ(fresh.sample_token(2, 5, int64_t(i), z.data() + i * kVocab, kVocab), sample[i]);
  }
}

TEST(RandomDraws, HistoryDoesNotMatter) {
  // Drawing other canvases first must not change canvas 3's draws.
  RandomDraws a(99), b(99);
  std::vector<int32_t> scratch(kLength), from_a(kLength), from_b(kLength);
  for (int64_t c = 0; c < 3; ++c) {
    a.canvas_init(c, kVocab, scratch);
    a.renoise(c, 0, kVocab, scratch);
  }
  a.canvas_init(3, kVocab, from_a);
  b.canvas_init(3, kVocab, from_b);
  EXPECT_EQ(from_a, from_b);
}

TEST(RandomDraws, SeedsCanvasesStepsAndPurposesDiffer) {
  auto init = [](uint64_t seed, int64_t canvas) {
    RandomDraws d(seed);
    std::vector<int32_t> out(64);
    d.canvas_init(canvas, kVocab, out);
    return out;
  };
  auto noise = [](uint64_t seed, int64_t canvas, int64_t step) {
    RandomDraws d(seed);
    std::vector<int32_t> out(64);
    d.renoise(canvas, step, kVocab, out);
    return out;
  };
  EXPECT_NE(init(1, 0), init(2, 0));
  EXPECT_NE(init(1, 0), init(1, 1));
  EXPECT_NE(noise(1, 0, 0), noise(1, 0, 1));
  EXPECT_NE(init(1, 0), noise(1, 0, 0));
  for (int32_t t : init(1, 0)) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, kVocab);
  }
}

TEST(RandomDraws, SampleFollowsTheSoftmax) {
  // Probabilities 0.1 / 0.2 / 0.3 / 0.4 over tokens 0..3, token 4 impossible.
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> row = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f), ninf};
  const RandomDraws draws(31337);
  constexpr int64_t kDraws = 40000;
  std::vector<int64_t> counts(5);
  for (int64_t i = 0; i < kDraws; ++i) ++counts[size_t(draws.sample_token(i / 100, 0, i % 100, row.data(), 5))];
  EXPECT_EQ(counts[4], 0);
  const double expected[4] = {0.1, 0.2, 0.3, 0.4};
  double x2 = 0;
  for (int k = 0; k < 4; ++k) {
    const double e = expected[k] * kDraws;
    x2 += (double(counts[size_t(k)]) - e) * (double(counts[size_t(k)]) - e) / e;
  }
  EXPECT_LT(x2, 16.3);  // 0.999 quantile of chi-square, 3 dof
}

TEST(RandomDraws, PeakedRowAlwaysGivesThePeak) {
  std::vector<float> row(kVocab, -30.f);
  row[77] = 30.f;
  const RandomDraws draws(5);
  for (int64_t pos = 0; pos < 200; ++pos) EXPECT_EQ(draws.sample_token(0, 0, pos, row.data(), kVocab), 77);
}

TEST(RandomDraws, NanRowIsAnError) {
  std::vector<float> row(8, 0.f);
  row[3] = std::numeric_limits<float>::quiet_NaN();
  const RandomDraws draws(5);
  EXPECT_THROW(draws.sample_token(0, 0, 0, row.data(), 8), Error);
}

// ---- ReplayDraws ------------------------------------------------------------

struct TapeEntry {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
};

std::string write_tape(const std::string& name, const std::vector<std::pair<std::string, TapeEntry>>& entries) {
  SafetensorsWriter writer;
  for (const auto& [tensor, entry] : entries) writer.add(tensor, DType::kI64, entry.shape, entry.values.data());
  const std::string path = ::testing::TempDir() + "dgemma_tape_" + name + ".safetensors";
  writer.write(path);
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ReplayDraws, ReplaysInOrderAndChecksKinds) {
  const std::string path = write_tape(
      "ok", {{"draw.000", {{1, 3}, {5, 6, 7}}}, {"draw.001", {{3, 1}, {1, 2, 3}}}, {"draw.002", {{1, 3}, {9, 8, 7}}}});
  ReplayDraws tape(path);
  EXPECT_EQ(tape.size(), 3u);
  std::vector<int32_t> out(3);
  tape.canvas_init(0, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 7}));
  tape.sample(0, 0, nullptr, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3}));
  tape.renoise(0, 0, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 8, 7}));
  EXPECT_NO_THROW(tape.expect_exhausted());
  const std::string err = error_of([&] { tape.sample(0, 1, nullptr, 10, out); });
  EXPECT_NE(err.find("replay tape " + path + ": ran out after 3 draws"), std::string::npos) << err;
  EXPECT_NE(err.find("draw.003"), std::string::npos) << err;
}

TEST(ReplayDraws, WrongShapeNamesDrawAndExpectation) {
  const std::string path =
      write_tape("shape", {{"draw.000", {{1, 4}, {0, 1, 2, 3}}}, {"draw.001", {{1, 4}, {0, 1, 2, 3}}}});
  ReplayDraws tape(path);
  std::vector<int32_t> out(4);
  tape.canvas_init(0, 10, out);
  const std::string err = error_of([&] { tape.sample(0, 0, nullptr, 10, out); });
  EXPECT_NE(err.find("replay tape " + path + ": draw.001 has shape [1,4], expected sample [4,1]"), std::string::npos)
      << err;
}

TEST(ReplayDraws, OutOfVocabularyValue) {
  const std::string path = write_tape("range", {{"draw.000", {{1, 2}, {3, 600}}}});
  ReplayDraws tape(path);
  std::vector<int32_t> out(2);
  const std::string err = error_of([&] { tape.canvas_init(0, 512, out); });
  EXPECT_NE(err.find("draw.000[1] = 600 is outside the vocabulary [0, 512)"), std::string::npos) << err;
}

TEST(ReplayDraws, GapsAndEmptyTapesAreRejected) {
  const std::string gap = write_tape("gap", {{"draw.000", {{1, 1}, {0}}}, {"draw.002", {{1, 1}, {0}}}});
  std::string err = error_of([&] { ReplayDraws tape(gap); });
  EXPECT_NE(err.find("draw.001 is missing"), std::string::npos) << err;
  const std::string empty = write_tape("empty", {{"input_ids", {{1, 1}, {0}}}});
  err = error_of([&] { ReplayDraws tape(empty); });
  EXPECT_NE(err.find("no draw.000"), std::string::npos) << err;
}

TEST(ReplayDraws, UnusedDrawsAreReported) {
  const std::string path = write_tape("unused", {{"draw.000", {{1, 1}, {0}}}, {"draw.001", {{1, 1}, {0}}}});
  ReplayDraws tape(path);
  std::vector<int32_t> out(1);
  tape.canvas_init(0, 4, out);
  const std::string err = error_of([&] { tape.expect_exhausted(); });
  EXPECT_NE(err.find("used 1 of 2 draws; next unused is draw.001"), std::string::npos) << err;
}

}  // namespace
}  // namespace dgemma
