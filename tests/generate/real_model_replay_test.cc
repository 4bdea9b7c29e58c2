// Replays the reference generate() runs (golden A generate_* cases) with the
// REAL model: DiffusionGemma on the golden A checkpoint computes the logits
// (not the recorded ones of generate_golden_replay_test.cc), ReplayDraws
// supplies the recorded random draws.
//
// Self-conditioning amplifies float32 rounding differences ~10x per step
// (see generate/recorded_self_conditioning.h), so the exact check takes each
// step's self-conditioning input from the recording (RecordedSelfConditioning);
// the canvases, the cache, the acceptance/stop decisions and the committed
// canvases are all ours. Every recorded per-step tensor that the
// GenerationObserver exposes must then match: canvas_in, sampled (denoiser)
// canvas, accepted mask, argmax canvas, renoised canvas, stop flag, the
// temperatures bit-exactly, entropies within fp32 parity. A free-running
// replay (our own self-conditioning) must still match the first step of the
// first canvas exactly, the only step without self-conditioning input from
// an earlier step.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "generate/recorded_self_conditioning.h"
#include "golden_case.h"
#include "model/diffusion_gemma.h"
#include "step_recorder.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

using testing::bits;
using testing::effective_config;
using testing::GoldenCase;
using testing::RecordedStep;
using testing::StepRecorder;

class RealModelReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelReplay, MatchesReference) {
  const GoldenCase golden(GetParam());
  const GenerationConfig config = effective_config(golden);
  const std::vector<int32_t> prompt = golden.ints32("input_ids");

  ModelOptions options;
  options.load_threads = 2;
  auto model = test::load_on_cpu(testing::golden_a_dir(), options);
  RecordedSelfConditioning anchored(*model, golden.tensors_path());
  ReplayDraws draws(golden.tensors_path());
  StepRecorder recorder;
  const GenerationResult result = generate(anchored, prompt, config, draws, &recorder);
  EXPECT_NO_THROW(draws.expect_exhausted());

  EXPECT_EQ(result.sequences, golden.ints32("output.sequences"));
  EXPECT_EQ(bits(result.tokens_per_forward), bits(golden.floats("output.tokens_per_forward").at(0)));

  // fp32 model parity (golden README "Tolerances observed": logits ~1e-5).
  testing::expect_run_matches(result, recorder, golden, 1e-3);
}

// Free-running: our own self-conditioning. Only the first step is pinned;
// the number of steps that still match is reported (it depends on the
// kernels' summation order).
TEST_P(RealModelReplay, FreeRunningFirstStepMatches) {
  const GoldenCase golden(GetParam());
  const GenerationConfig config = effective_config(golden);
  ModelOptions options;
  options.load_threads = 2;
  auto model = test::load_on_cpu(testing::golden_a_dir(), options);
  ReplayDraws draws(golden.tensors_path());
  StepRecorder recorder;
  GenerationResult result;
  try {
    result = generate(*model, golden.ints32("input_ids"), config, draws, &recorder);
  } catch (const Error& e) {
    // A drifted run may want more draws than were recorded; that is fine here.
    EXPECT_NE(std::string(e.what()).find("draw"), std::string::npos) << e.what();
  }
  ASSERT_FALSE(recorder.steps.empty());
  const RecordedStep& first = recorder.steps[0];
  EXPECT_EQ(first.canvas_in, golden.ints32("step.0.0.canvas_in"));
  EXPECT_EQ(first.sampled, golden.ints32("step.0.0.denoiser_canvas"));
  EXPECT_EQ(first.accepted, golden.ints("step.0.0.accepted_mask"));
  EXPECT_EQ(first.argmax, golden.ints32("step.0.0.argmax_canvas"));
  EXPECT_EQ(first.canvas_out, golden.ints32("step.0.0.renoised_canvas"));
  size_t same = 0;
  for (const RecordedStep& r : recorder.steps) {
    const std::string p = "step." + std::to_string(r.canvas) + "." + std::to_string(r.step) + ".";
    if (!golden.has(p + "argmax_canvas") || r.argmax != golden.ints32(p + "argmax_canvas") ||
        r.accepted != golden.ints(p + "accepted_mask"))
      break;
    ++same;
  }
  std::printf("[%s] free-running replay: first %zu of %zu steps identical to the recording\n", GetParam(), same,
              recorder.steps.size());
}

INSTANTIATE_TEST_SUITE_P(GoldenA, RealModelReplay, ::testing::Values("generate_short", "generate_long", "generate_eos"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace dgemma
