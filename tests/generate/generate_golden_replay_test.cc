// Replays the reference generate() runs (golden A generate_* cases) through
// our generate(): recorded decoder logits via TapeModel, recorded random draws
// via ReplayDraws. Everything the loop decides must match the reference:
// temperatures bit-exact, entropies within 1e-5, masks/argmax/renoised
// canvases/stop flags/outputs exactly (golden README "Random draws in
// generate()", "Other generate() facts").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "generate/generate.h"
#include "golden_case.h"
#include "step_recorder.h"
#include "tape_model.h"

namespace dgemma {
namespace {

using testing::bits;
using testing::effective_config;
using testing::GoldenCase;
using testing::StepRecorder;
using testing::TapeModel;

class GenerateGoldenReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(GenerateGoldenReplay, MatchesReference) {
  const GoldenCase golden(GetParam());
  const json::Value& meta = golden.meta();
  const GenerationConfig config = effective_config(golden);
  const std::vector<int32_t> prompt = golden.ints32("input_ids");

  TapeModel model(golden);
  ReplayDraws draws(golden.tensors_path());
  StepRecorder recorder;
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
    const testing::RecordedCanvas& rc = recorder.canvases[c];
    EXPECT_EQ(rc.canvas, int64_t(c));
    EXPECT_EQ(rc.steps, steps);
    EXPECT_EQ(rc.argmax, golden.ints32(prefix + "appended_argmax")) << prefix;
    EXPECT_EQ(rc.committed, golden.ints32(prefix + "finalized")) << prefix;
    EXPECT_EQ(rc.eos, golden.ints(prefix + "finished_sequences").at(0) != 0) << prefix;
    EXPECT_EQ(rc.eos, canvases[c].find("finished_after_canvas")->as_bool()) << prefix;
    // The trajectory figures: the last step's mean entropy and stop flag.
    const std::string last = "step." + std::to_string(c) + "." + std::to_string(steps - 1) + ".";
    ASSERT_LT(c, result.halt_entropy.size());
    EXPECT_NEAR(result.halt_entropy[c], golden.floats(last + "mean_entropy").at(0), 1e-5) << prefix;
    EXPECT_EQ(result.converged[c], golden.ints(last + "stop_flag").at(0) != 0) << prefix;
  }
  EXPECT_EQ(result.halt_entropy.size(), canvases.size());
  EXPECT_EQ(result.converged.size(), canvases.size());
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
    for (size_t s = 0; s < steps.size(); ++s, ++k) expect_step_matches(recorder.steps[k], golden, c, s, steps[s], 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(GoldenA, GenerateGoldenReplay,
                         ::testing::Values("generate_short", "generate_long", "generate_eos"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// The tape itself is checked: a tape with a draw of the wrong kind fails with
// a message naming the draw and what was expected.
TEST(GenerateGoldenReplay, TruncatedRunLeavesDrawsUnused) {
  const GoldenCase golden("generate_short");
  GenerationConfig config = effective_config(golden);
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
