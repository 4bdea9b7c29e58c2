// Replays the reference generate() runs (golden A generate_* cases) through
// our generate(): recorded decoder logits via TapeModel, recorded random draws
// via ReplayDraws. Everything the loop decides must match the reference:
// temperatures bit-exact, entropies within 1e-5, masks/argmax/renoised
// canvases/stop flags/outputs exactly (golden README "Random draws in
// generate()", "Other generate() facts").
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "golden_case.h"
#include "tape_model.h"

namespace dgemma {
namespace {

using testing::GoldenCase;
using testing::TapeModel;

struct RecordedStep {
  int64_t canvas, step, cur_step;
  float temperature, mean_entropy;
  std::vector<int32_t> canvas_in, sampled, argmax, canvas_out;
  std::vector<int64_t> accepted;
  std::vector<float> entropy;
  int64_t n_accepted;
  bool stop;
};

struct RecordedCanvas {
  int64_t canvas, steps;
  std::vector<int32_t> argmax, committed;
  bool eos;
};

class Recorder : public GenerationObserver {
 public:
  void on_step(const StepEvent& e) override {
    steps.push_back({e.canvas, e.step, e.cur_step, e.temperature, e.mean_entropy,
                     {e.canvas_in.begin(), e.canvas_in.end()},
                     {e.sampled.begin(), e.sampled.end()},
                     {e.argmax.begin(), e.argmax.end()},
                     {e.canvas_out.begin(), e.canvas_out.end()},
                     {e.accepted.begin(), e.accepted.end()},
                     {e.entropy.begin(), e.entropy.end()},
                     e.n_accepted,
                     e.stop});
  }
  void on_canvas(const CanvasEvent& e) override {
    canvases.push_back({e.canvas, e.steps, {e.argmax.begin(), e.argmax.end()},
                        {e.committed.begin(), e.committed.end()}, e.eos});
  }
  std::vector<RecordedStep> steps;
  std::vector<RecordedCanvas> canvases;
};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class GenerateGoldenReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(GenerateGoldenReplay, MatchesReference) {
  const GoldenCase golden(GetParam());
  const json::Value& meta = golden.meta();
  const GenerationConfig config =
      parse_generation_config(json::dump(*meta.find("effective_generation_config")), "effective_generation_config");
  const std::vector<int32_t> prompt = golden.ints32("input_ids");

  TapeModel model(golden);
  ReplayDraws draws(golden.tensors_path());
  Recorder recorder;
  const GenerationResult result = generate(model, prompt, config, draws, &recorder);
  EXPECT_NO_THROW(draws.expect_exhausted());

  // Output as returned by the reference generate().
  EXPECT_EQ(result.sequences, golden.ints32("output.sequences"));
  EXPECT_EQ(bits(result.tokens_per_forward), bits(golden.floats("output.tokens_per_forward").at(0)))
      << result.tokens_per_forward << " vs " << golden.floats("output.tokens_per_forward").at(0);
  EXPECT_EQ(result.prompt_length, int64_t(prompt.size()));
  EXPECT_FALSE(result.cancelled);

  // Per-canvas step counts, encoder calls and finalized canvases.
  const json::Array& canvases = meta.find("canvases")->as_array();
  ASSERT_EQ(result.steps_per_canvas.size(), canvases.size());
  ASSERT_EQ(recorder.canvases.size(), canvases.size());
  int64_t total_steps = 0;
  for (size_t c = 0; c < canvases.size(); ++c) {
    const int64_t steps = int64_t(canvases[c].find("steps")->as_array().size());
    total_steps += steps;
    EXPECT_EQ(result.steps_per_canvas[c], steps) << "canvas " << c;
    const std::string prefix = "canvas." + std::to_string(c) + ".";
    const RecordedCanvas& rc = recorder.canvases[c];
    EXPECT_EQ(rc.canvas, int64_t(c));
    EXPECT_EQ(rc.steps, steps);
    EXPECT_EQ(rc.argmax, golden.ints32(prefix + "appended_argmax")) << prefix;
    EXPECT_EQ(rc.committed, golden.ints32(prefix + "finalized")) << prefix;
    EXPECT_EQ(rc.eos, golden.ints(prefix + "finished_sequences").at(0) != 0) << prefix;
    EXPECT_EQ(rc.eos, canvases[c].find("finished_after_canvas")->as_bool()) << prefix;
  }
  EXPECT_EQ(result.stopped_at_eos, recorder.canvases.back().eos);
  EXPECT_EQ(result.decoder_forwards, total_steps);
  EXPECT_EQ(model.decodes(), total_steps);
  int64_t encodes = 0;
  while (golden.has("canvas." + std::to_string(encodes) + ".encoder_input_ids")) ++encodes;
  EXPECT_EQ(model.encodes(), encodes);

  // Every executed step.
  ASSERT_EQ(int64_t(recorder.steps.size()), total_steps);
  size_t k = 0;
  for (size_t c = 0; c < canvases.size(); ++c) {
    const json::Array& steps = canvases[c].find("steps")->as_array();
    for (size_t s = 0; s < steps.size(); ++s, ++k) {
      const RecordedStep& r = recorder.steps[k];
      const std::string p = "step." + std::to_string(c) + "." + std::to_string(s) + ".";
      SCOPED_TRACE(golden.name() + " " + p);
      EXPECT_EQ(r.canvas, int64_t(c));
      EXPECT_EQ(r.step, int64_t(s));
      EXPECT_EQ(r.cur_step, steps[s].find("cur_step")->as_int());
      EXPECT_EQ(bits(r.temperature), bits(golden.floats(p + "temperature").at(0)))
          << r.temperature << " vs " << golden.floats(p + "temperature").at(0);
      EXPECT_EQ(r.canvas_in, golden.ints32(p + "canvas_in"));
      EXPECT_EQ(r.sampled, golden.ints32(p + "denoiser_canvas"));
      EXPECT_EQ(r.argmax, golden.ints32(p + "argmax_canvas"));
      EXPECT_EQ(r.accepted, golden.ints(p + "accepted_mask"));
      EXPECT_EQ(r.canvas_out, golden.ints32(p + "renoised_canvas"));
      EXPECT_EQ(r.n_accepted, steps[s].find("n_accepted")->as_int());
      EXPECT_EQ(r.stop, golden.ints(p + "stop_flag").at(0) != 0);
      const std::vector<float> entropy = golden.floats(p + "entropy");
      ASSERT_EQ(r.entropy.size(), entropy.size());
      for (size_t i = 0; i < entropy.size(); ++i) EXPECT_NEAR(r.entropy[i], entropy[i], 1e-5) << "position " << i;
      EXPECT_NEAR(r.mean_entropy, golden.floats(p + "mean_entropy").at(0), 1e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GoldenA, GenerateGoldenReplay,
                         ::testing::Values("generate_short", "generate_long", "generate_eos"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// The tape itself is checked: a tape with a draw of the wrong kind fails with
// a message naming the draw and what was expected.
TEST(GenerateGoldenReplay, TruncatedRunLeavesDrawsUnused) {
  const GoldenCase golden("generate_short");
  GenerationConfig config =
      parse_generation_config(json::dump(*golden.meta().find("effective_generation_config")), "effective");
  config.max_new_tokens = 16;  // one canvas instead of two
  TapeModel model(golden);
  ReplayDraws draws(golden.tensors_path());
  generate(model, golden.ints32("input_ids"), config, draws);
  EXPECT_EQ(draws.consumed(), size_t(1 + 2 * 10));
  try {
    draws.expect_exhausted();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("used 21 of 42 draws; next unused is draw.021"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dgemma
