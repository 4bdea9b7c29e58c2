// generate() with sampling controls (docs/model.md §3.7): penalties move the
// committed argmax exactly as a hand calculation says, counting only the
// canvases this generation committed; filters never change a greedy run and
// top_k 1 makes every draw the argmax; the runs that need them take the host
// row pass even on a model that samples rows itself.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dgemma/error.h"
#include "generate/draws.h"
#include "generate/generate.h"

namespace dgemma {
namespace {

constexpr int64_t kVocab = 8;
constexpr int64_t kLength = 2;

// Every row's raw logits: token 3 at 2.0, token 5 at 1.5, the rest 0,
// whatever the canvas. Unpenalized, every canvas commits {3, 3}.
class TwoPeakModel final : public DiffusionModel {
 public:
  explicit TwoPeakModel(bool samples_rows = false) : samples_rows_(samples_rows) {}
  int64_t vocab_size() const override { return kVocab; }
  int64_t canvas_length() const override { return kLength; }
  int64_t cache_length() const override { return cache_; }
  void encode(const std::vector<int32_t>& ids) override { cache_ += int64_t(ids.size()); }
  void decode(const int32_t* /*canvas*/, const float* /*sc*/, float* logits) override {
    ++decodes;
    for (int64_t i = 0; i < kLength; ++i)
      for (int64_t v = 0; v < kVocab; ++v) logits[i * kVocab + v] = v == 3 ? 2.0f : v == 5 ? 1.5f : 0.0f;
  }
  void truncate_cache(int64_t length) override { cache_ = length; }
  bool samples_rows() const override { return samples_rows_; }
  // The model's own sampler pass: the argmax of the unpenalized row (3), as
  // a backend's sample op would give it.
  void decode_sample(const int32_t*, bool, float, const double*, RowSamples& out) override {
    ++decode_samples;
    out.argmax.assign(kLength, 3);
    out.entropy.assign(kLength, 1.0f);
    out.sample.assign(kLength, 3);
  }
  void processed_logits(float*) override { throw Error("TwoPeakModel: no processed logits"); }

  int decodes = 0, decode_samples = 0;

 private:
  bool samples_rows_;
  int64_t cache_ = 0;
};

GenerationConfig greedy_config(int64_t canvases) {
  GenerationConfig c;
  c.max_new_tokens = canvases * kLength;
  c.max_denoising_steps = 2;
  c.eos_token_ids = {7};
  c.greedy = true;
  return c;
}

// The prompt holds token 3 three times: the penalties do not count it.
const std::vector<int32_t> kPrompt = {3, 3, 3};

std::vector<int32_t> generated(const GenerationConfig& c, bool samples_rows = false) {
  TwoPeakModel model(samples_rows);
  RandomDraws draws(5);
  const GenerationResult r = generate(model, kPrompt, c, draws);
  return std::vector<int32_t>(r.generated().begin(), r.generated().end());
}

TEST(SamplingControls, PresencePenaltyMovesTheArgmaxByHand) {
  EXPECT_EQ(generated(greedy_config(2)), (std::vector<int32_t>{3, 3, 3, 3}));
  GenerationConfig c = greedy_config(3);
  // Canvas 0: no context (the prompt does not count): {3, 3}. Canvas 1: 3
  // counted, 2 - 1 = 1 < 1.5: {5, 5}. Canvas 2: 3 and 5 counted, 3 at 1.0,
  // 5 at 0.5, the rest 0: {3, 3}.
  c.presence_penalty = 1.0;
  EXPECT_EQ(generated(c), (std::vector<int32_t>{3, 3, 5, 5, 3, 3}));
  // 2 - 0.4 = 1.6 > 1.5: the argmax stays.
  c.presence_penalty = 0.4;
  EXPECT_EQ(generated(c), (std::vector<int32_t>{3, 3, 3, 3, 3, 3}));
}

TEST(SamplingControls, FrequencyPenaltyCountsOccurrences) {
  GenerationConfig c = greedy_config(3);
  // Canvas 1: 3 occurs twice, 2 - 2 x 0.3 = 1.4 < 1.5: {5, 5}. Canvas 2: 3 at
  // 1.4, 5 at 1.5 - 0.6 = 0.9: {3, 3}.
  c.frequency_penalty = 0.3;
  EXPECT_EQ(generated(c), (std::vector<int32_t>{3, 3, 5, 5, 3, 3}));
  // Canvas 1: 2 - 2 x 0.2 = 1.6 > 1.5: {3, 3}. Canvas 2: 3 now occurs four
  // times, 2 - 4 x 0.2 = 1.2 < 1.5: {5, 5}.
  c.frequency_penalty = 0.2;
  EXPECT_EQ(generated(c), (std::vector<int32_t>{3, 3, 3, 3, 5, 5}));
  // A negative penalty rewards repetition: 5 never overtakes 3.
  c.frequency_penalty = -1.0;
  EXPECT_EQ(generated(c), (std::vector<int32_t>{3, 3, 3, 3, 3, 3}));
}

TEST(SamplingControls, RepeatPenaltyDividesAPositiveLogit) {
  GenerationConfig c = greedy_config(2);
  c.repeat_penalty = 1.5;  // 2 / 1.5 = 1.33 < 1.5
  EXPECT_EQ(generated(c), (std::vector<int32_t>{3, 3, 5, 5}));
  c.repeat_penalty = 1.25;  // 2 / 1.25 = 1.6 > 1.5
  EXPECT_EQ(generated(c), (std::vector<int32_t>{3, 3, 3, 3}));
}

TEST(SamplingControls, PenaltiesTakeTheHostRowPassOnAModelThatSamplesRows) {
  // The model's own sampler pass ignores penalties (it would commit {3, 3}
  // twice), so a penalized run must not use it.
  GenerationConfig c = greedy_config(2);
  c.presence_penalty = 1.0;
  TwoPeakModel model(/*samples_rows=*/true);
  RandomDraws draws(5);
  const GenerationResult r = generate(model, kPrompt, c, draws);
  EXPECT_EQ(std::vector<int32_t>(r.generated().begin(), r.generated().end()), (std::vector<int32_t>{3, 3, 5, 5}));
  EXPECT_EQ(model.decode_samples, 0);
  EXPECT_EQ(model.decodes, 4);
  // Without controls, and with filters on a greedy run, the model's pass is used.
  for (GenerationConfig plain : {greedy_config(2), [] {
                                   GenerationConfig f = greedy_config(2);
                                   f.top_k = 1;
                                   f.top_p = 0.5;
                                   return f;
                                 }()}) {
    TwoPeakModel m(true);
    RandomDraws d(5);
    generate(m, kPrompt, plain, d);
    EXPECT_EQ(m.decode_samples, 4);
    EXPECT_EQ(m.decodes, 0);
  }
  // Filters on a sampled run take the host pass.
  GenerationConfig sampled = greedy_config(2);
  sampled.greedy = false;
  sampled.min_p = 0.5;
  TwoPeakModel m(true);
  RandomDraws d(5);
  generate(m, kPrompt, sampled, d);
  EXPECT_EQ(m.decode_samples, 0);
  EXPECT_EQ(m.decodes, 4);
}

// Records what every step sampled and its argmax and entropies.
class StepLog : public GenerationObserver {
 public:
  void on_step(const StepEvent& e) override {
    sampled.emplace_back(e.sampled.begin(), e.sampled.end());
    argmax.emplace_back(e.argmax.begin(), e.argmax.end());
    entropy.emplace_back(e.entropy.begin(), e.entropy.end());
  }
  std::vector<std::vector<int32_t>> sampled, argmax;
  std::vector<std::vector<float>> entropy;
};

StepLog run_logged(const GenerationConfig& c, uint64_t seed) {
  TwoPeakModel model;
  RandomDraws draws(seed);
  StepLog log;
  generate(model, kPrompt, c, draws, &log);
  return log;
}

TEST(SamplingControls, FiltersLeaveGreedyRunsAndTheEntropyAlone) {
  GenerationConfig plain = greedy_config(3);
  GenerationConfig filtered = plain;
  filtered.top_k = 2;
  filtered.top_p = 0.3;
  filtered.min_p = 0.9;
  EXPECT_EQ(generated(filtered), generated(plain));
  const StepLog a = run_logged(plain, 9), b = run_logged(filtered, 9);
  EXPECT_EQ(a.sampled, b.sampled);
  EXPECT_EQ(a.argmax, b.argmax);
  EXPECT_EQ(a.entropy, b.entropy);
}

TEST(SamplingControls, TopKOneMakesEverySampledDrawTheArgmax) {
  GenerationConfig c = greedy_config(3);
  c.greedy = false;
  c.t_min = 1.0;  // a broad distribution: 6 of 8 tokens share logit 0
  c.t_max = 2.0;
  const StepLog open = run_logged(c, 21);
  int differ = 0;
  for (size_t s = 0; s < open.sampled.size(); ++s) differ += open.sampled[s] != open.argmax[s];
  EXPECT_GT(differ, 0) << "without a filter some draw should leave the argmax";
  c.top_k = 1;
  const StepLog top1 = run_logged(c, 21);
  ASSERT_EQ(top1.sampled.size(), open.sampled.size());
  for (size_t s = 0; s < top1.sampled.size(); ++s) {
    EXPECT_EQ(top1.sampled[s], top1.argmax[s]) << "step " << s;
    EXPECT_EQ(top1.entropy[s], open.entropy[s]) << "step " << s;  // unfiltered entropy
  }
}

// A draw source whose draw B is not an inverse CDF (a replayed tape).
class TapeLikeDraws final : public DrawSource {
 public:
  void canvas_init(int64_t c, int64_t v, std::span<int32_t> out) override { inner_.canvas_init(c, v, out); }
  void sample(int64_t, int64_t, const float*, int64_t, std::span<int32_t> out) override {
    for (int32_t& t : out) t = 0;
  }
  void renoise(int64_t c, int64_t s, int64_t v, std::span<int32_t> out) override { inner_.renoise(c, s, v, out); }

 private:
  RandomDraws inner_{1};
};

TEST(SamplingControls, FiltersRefuseADrawSourceThatSuppliesTheSample) {
  GenerationConfig c = greedy_config(1);
  c.greedy = false;
  c.top_p = 0.9;
  TwoPeakModel model;
  TapeLikeDraws draws;
  try {
    generate(model, kPrompt, c, draws);
    ADD_FAILURE() << "filters with a replayed draw B were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
  c.greedy = true;  // greedy: the filters do nothing, so nothing to refuse
  TwoPeakModel m2;
  EXPECT_NO_THROW(generate(m2, kPrompt, c, draws));
}

TEST(SamplingControls, ConfigRejectsOutOfRangeControlsNamingThem) {
  const std::vector<std::pair<std::string, void (*)(GenerationConfig&)>> bad = {
      {"top_k", [](GenerationConfig& c) { c.top_k = -1; }},
      {"top_p", [](GenerationConfig& c) { c.top_p = 0.0; }},
      {"top_p", [](GenerationConfig& c) { c.top_p = 1.5; }},
      {"min_p", [](GenerationConfig& c) { c.min_p = -0.1; }},
      {"presence_penalty", [](GenerationConfig& c) { c.presence_penalty = 2.5; }},
      {"frequency_penalty", [](GenerationConfig& c) { c.frequency_penalty = -3; }},
      {"repeat_penalty", [](GenerationConfig& c) { c.repeat_penalty = 0; }},
  };
  for (const auto& [field, set] : bad) {
    GenerationConfig c;
    set(c);
    try {
      validate_generation_config(c, "test");
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
  GenerationConfig defaults;
  EXPECT_FALSE(has_sampling_filters(defaults));
  EXPECT_FALSE(has_penalties(defaults));
  EXPECT_NO_THROW(validate_generation_config(defaults, "test"));
}

}  // namespace
}  // namespace dgemma
