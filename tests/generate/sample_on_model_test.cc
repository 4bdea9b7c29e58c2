// generate() runs a step's per-row sampler pass either on the host, over the
// logits decode() returns, or inside the model (DiffusionGemma::decode_sample:
// the sample op next to the logits, z kept in the model for the next step's
// self-conditioning). On the CPU both must give bit-identical runs: the
// golden A model, seeded and greedy, several canvases, every StepEvent field
// (processed logits included) and every result field; a bad row of logits is
// the same error both ways.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "generate/generate.h"
#include "generate/sampler.h"
#include "golden_case.h"
#include "model/diffusion_gemma.h"
#include "backend/cpu/cpu_backend.h"
#include "sample_paths.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

using testing::DecodeOnly;
using testing::FullRecorder;
using testing::RoutingBackend;

std::unique_ptr<DiffusionGemma> golden_model() {
  ModelOptions o;
  o.load_threads = 2;
  return test::load_on_cpu(testing::golden_a_dir(), o);
}

GenerationConfig three_canvases(bool greedy) {
  GenerationConfig c = load_generation_config(testing::golden_a_dir() + "/generation_config.json").config;
  c.max_new_tokens = 48;   // 3 canvases of 16
  c.entropy_bound = 12.0;  // accept several positions per step (random weights: ~6 nats each)
  c.eos_token_ids = {};    // run every canvas
  c.greedy = greedy;
  return c;
}

const std::vector<int32_t> kPrompt = {2, 105, 17, 300, 41, 7, 99};

struct PathRun {
  GenerationResult result;
  std::unique_ptr<FullRecorder> recorder;
  int64_t sample_ops = 0;
};

// One generate() on a fresh golden model, through the host path (decode only)
// or on the model, with or without an observer.
PathRun run_path(bool on_model, bool greedy, bool observe, uint64_t seed) {
  auto model = golden_model();
  CpuBackend cpu(2);
  RoutingBackend counting(cpu, nullptr);
  model->set_backend(counting);
  DecodeOnly decode_only(*model);
  DiffusionModel& m = on_model ? static_cast<DiffusionModel&>(*model) : decode_only;
  PathRun r;
  if (observe) r.recorder = std::make_unique<FullRecorder>(model->canvas_length() * model->vocab_size());
  RandomDraws draws(seed);
  r.result = generate(m, kPrompt, three_canvases(greedy), draws, r.recorder.get());
  r.sample_ops = counting.samples;
  return r;
}

TEST(SampleOnModel, SeededRunIsBitIdenticalToTheHostPath) {
  const PathRun host = run_path(false, false, true, 11);
  const PathRun fused = run_path(true, false, true, 11);
  EXPECT_EQ(host.sample_ops, 0);
  EXPECT_EQ(fused.sample_ops, fused.result.decoder_forwards);  // every step ran the sample op
  ASSERT_EQ(host.result.steps_per_canvas.size(), 3u);
  testing::expect_same_result(host.result, fused.result);
  testing::expect_same_recording(*host.recorder, *fused.recorder);
  // The run exercises what it compares: self-conditioned steps, several
  // accepted positions, draws that are not the argmax.
  int64_t later_steps = 0, accepted = 0, drawn_not_argmax = 0;
  for (const testing::FullStep& s : fused.recorder->steps) {
    later_steps += s.step > 0;
    accepted += s.n_accepted;
    for (size_t i = 0; i < s.sampled.size(); ++i) drawn_not_argmax += s.sampled[i] != s.argmax[i];
  }
  EXPECT_GE(later_steps, 3);
  EXPECT_GT(accepted, int64_t(fused.recorder->steps.size()));
  EXPECT_GT(drawn_not_argmax, 0);
  // Without an observer the model never hands out its processed logits; same run.
  const PathRun quiet = run_path(true, false, false, 11);
  testing::expect_same_result(host.result, quiet.result);
}

TEST(SampleOnModel, GreedyRunIsBitIdenticalToTheHostPath) {
  const PathRun host = run_path(false, true, true, 5);
  const PathRun fused = run_path(true, true, true, 5);
  EXPECT_EQ(fused.sample_ops, fused.result.decoder_forwards);
  testing::expect_same_result(host.result, fused.result);
  testing::expect_same_recording(*host.recorder, *fused.recorder);
  for (const testing::FullStep& s : fused.recorder->steps) EXPECT_EQ(s.sampled, s.argmax);
}

// A draw source that does not sample by inverse CDF keeps the host path.
class HostSampledDraws final : public DrawSource {
 public:
  void canvas_init(int64_t c, int64_t v, std::span<int32_t> out) override { inner.canvas_init(c, v, out); }
  void sample(int64_t c, int64_t s, const float* z, int64_t v, std::span<int32_t> out) override {
    ++samples;
    inner.sample(c, s, z, v, out);
  }
  void renoise(int64_t c, int64_t s, int64_t v, std::span<int32_t> out) override { inner.renoise(c, s, v, out); }
  RandomDraws inner{3};
  int64_t samples = 0;
};

TEST(SampleOnModel, DrawSourcesWithoutAnInverseCdfStayOnTheHost) {
  auto model = golden_model();
  CpuBackend cpu(2);
  RoutingBackend counting(cpu, nullptr);
  model->set_backend(counting);
  HostSampledDraws draws;
  GenerationConfig config = three_canvases(false);
  config.max_new_tokens = 16;
  const GenerationResult r = generate(*model, kPrompt, config, draws);
  EXPECT_EQ(counting.samples, 0);
  EXPECT_EQ(draws.samples, r.decoder_forwards);
  // The same run through the model's own pass gives the same tokens (the
  // RandomDraws inverse CDF is the one the sample op uses).
  auto model2 = golden_model();
  RandomDraws seeded(3);
  EXPECT_EQ(generate(*model2, kPrompt, config, seeded).sequences, r.sequences);
}

std::string generate_error(bool on_model) {
  auto model = golden_model();
  CpuBackend cpu(2);
  RoutingBackend nan(cpu, nullptr);
  nan.nan_step = 1;  // canvas 0, step 1
  nan.nan_row = 9;
  nan.nan_logit = 77;
  model->set_backend(nan);
  DecodeOnly decode_only(*model);
  RandomDraws draws(1);
  try {
    generate(on_model ? static_cast<DiffusionModel&>(*model) : decode_only, kPrompt, three_canvases(false), draws);
  } catch (const BadLogitsRow& e) {
    return e.what();
  }
  return "no error";
}

// The model that samples next to its logits, counting the copies of z that
// observers cost (DiffusionModel::processed_logits).
class CountingZ final : public testing::ForwardingModel {
 public:
  using ForwardingModel::ForwardingModel;
  void processed_logits(float* out) override {
    ++copies;
    ForwardingModel::processed_logits(out);
  }
  int64_t copies = 0;
};

// Asks for z on the last step of each canvas only (what a log-probability
// reader needs), or never.
class LastStepReader final : public GenerationObserver {
 public:
  explicit LastStepReader(bool ask) : ask_(ask) {}
  bool wants_processed_logits(const StepEvent& e) override { return ask_ && (e.stop || e.cur_step == 1); }
  void on_step(const StepEvent& e) override {
    ++steps;
    if (e.processed_logits != nullptr) ++with_logits;
  }
  int64_t steps = 0, with_logits = 0;

 private:
  bool ask_;
};

// An observer costs no copy of z unless it asks, and then one per step asked
// for; the run is the same either way.
TEST(SampleOnModel, ProcessedLogitsAreFetchedOnlyForTheStepsAnObserverAsksFor) {
  std::vector<int32_t> sequences[2];
  for (const bool ask : {false, true}) {
    auto model = golden_model();
    CountingZ counting(*model);
    ASSERT_TRUE(counting.samples_rows());
    LastStepReader reader(ask);
    RandomDraws draws(5);
    const GenerationResult r = generate(counting, kPrompt, three_canvases(false), draws, &reader);
    ASSERT_EQ(r.steps_per_canvas.size(), 3u);
    EXPECT_GT(reader.steps, 3);  // more steps than canvases, so asking for the last ones only is visible
    EXPECT_EQ(reader.with_logits, ask ? 3 : 0);
    EXPECT_EQ(counting.copies, ask ? 3 : 0);
    sequences[ask] = r.sequences;
  }
  EXPECT_EQ(sequences[0], sequences[1]);
}

TEST(SampleOnModel, BadRowIsTheSameErrorBothWays) {
  const std::string want = "generate: canvas 0 step 1 row 9: logit 77 is nan";
  EXPECT_EQ(generate_error(false), want);
  EXPECT_EQ(generate_error(true), want);
}

TEST(SampleOnModel, SelfConditioningNeedsThePreviousSamplePass) {
  auto model = golden_model();
  model->encode(kPrompt);
  const int64_t L = model->canvas_length();
  std::vector<int32_t> canvas(static_cast<size_t>(L), 5);
  RowSamples rows;
  EXPECT_THROW(model->decode_sample(canvas.data(), true, 0.8f, nullptr, rows), Error);
  EXPECT_THROW(model->processed_logits(nullptr), Error);
  model->decode_sample(canvas.data(), false, 0.8f, nullptr, rows);
  EXPECT_EQ(rows.sample, std::vector<int32_t>(size_t(L), -1));
  // z = logits / T of that pass, bit for bit.
  std::vector<float> z(size_t(L * model->vocab_size())), logits(z.size());
  model->processed_logits(z.data());
  model->truncate_cache(model->cache_length());  // voids z
  EXPECT_THROW(model->decode_sample(canvas.data(), true, 0.8f, nullptr, rows), Error);
  model->decode(canvas.data(), nullptr, logits.data());
  for (size_t k = 0; k < z.size(); ++k) {
    const float want = logits[k] / 0.8f;
    ASSERT_EQ(testing::float_bits(&z[k], 1), testing::float_bits(&want, 1)) << k;
  }
}

}  // namespace
}  // namespace dgemma
