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
#include <cstring>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "generate/recorded_self_conditioning.h"
#include "golden_case.h"
#include "model/diffusion_gemma.h"

namespace dgemma {
namespace {

using testing::GoldenCase;

struct Step {
  int64_t canvas, step, cur_step, n_accepted;
  float temperature, mean_entropy;
  std::vector<int32_t> canvas_in, sampled, argmax, canvas_out;
  std::vector<int64_t> accepted;
  std::vector<float> entropy;
  bool stop;
};

class Recorder : public GenerationObserver {
 public:
  void on_step(const StepEvent& e) override {
    steps.push_back({e.canvas, e.step, e.cur_step, e.n_accepted, e.temperature, e.mean_entropy,
                     {e.canvas_in.begin(), e.canvas_in.end()},
                     {e.sampled.begin(), e.sampled.end()},
                     {e.argmax.begin(), e.argmax.end()},
                     {e.canvas_out.begin(), e.canvas_out.end()},
                     {e.accepted.begin(), e.accepted.end()},
                     {e.entropy.begin(), e.entropy.end()},
                     e.stop});
  }
  void on_canvas(const CanvasEvent& e) override {
    committed.emplace_back(e.committed.begin(), e.committed.end());
  }
  std::vector<Step> steps;
  std::vector<std::vector<int32_t>> committed;
};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class RealModelReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelReplay, MatchesReference) {
  const GoldenCase golden(GetParam());
  const json::Value& meta = golden.meta();
  const GenerationConfig config =
      parse_generation_config(json::dump(*meta.find("effective_generation_config")), "effective_generation_config");
  const std::vector<int32_t> prompt = golden.ints32("input_ids");

  ModelOptions options;
  options.threads = 2;
  auto model = DiffusionGemma::load(testing::golden_a_dir(), options);
  RecordedSelfConditioning anchored(*model, golden.tensors_path());
  ReplayDraws draws(golden.tensors_path());
  Recorder recorder;
  const GenerationResult result = generate(anchored, prompt, config, draws, &recorder);
  EXPECT_NO_THROW(draws.expect_exhausted());

  EXPECT_EQ(result.sequences, golden.ints32("output.sequences"));
  EXPECT_EQ(bits(result.tokens_per_forward), bits(golden.floats("output.tokens_per_forward").at(0)));

  const json::Array& canvases = meta.find("canvases")->as_array();
  ASSERT_EQ(result.steps_per_canvas.size(), canvases.size());
  size_t k = 0;
  for (size_t c = 0; c < canvases.size(); ++c) {
    const json::Array& steps = canvases[c].find("steps")->as_array();
    EXPECT_EQ(result.steps_per_canvas[c], int64_t(steps.size())) << "canvas " << c;
    ASSERT_LT(c, recorder.committed.size());
    EXPECT_EQ(recorder.committed[c], golden.ints32("canvas." + std::to_string(c) + ".finalized")) << "canvas " << c;
    for (size_t s = 0; s < steps.size() && k < recorder.steps.size(); ++s, ++k) {
      const Step& r = recorder.steps[k];
      const std::string p = "step." + std::to_string(c) + "." + std::to_string(s) + ".";
      SCOPED_TRACE(golden.name() + " " + p);
      EXPECT_EQ(r.canvas, int64_t(c));
      EXPECT_EQ(r.step, int64_t(s));
      EXPECT_EQ(r.cur_step, steps[s].find("cur_step")->as_int());
      EXPECT_EQ(bits(r.temperature), bits(golden.floats(p + "temperature").at(0)));
      EXPECT_EQ(r.canvas_in, golden.ints32(p + "canvas_in"));
      EXPECT_EQ(r.sampled, golden.ints32(p + "denoiser_canvas"));
      EXPECT_EQ(r.accepted, golden.ints(p + "accepted_mask"));
      EXPECT_EQ(r.argmax, golden.ints32(p + "argmax_canvas"));
      EXPECT_EQ(r.canvas_out, golden.ints32(p + "renoised_canvas"));
      EXPECT_EQ(r.n_accepted, steps[s].find("n_accepted")->as_int());
      EXPECT_EQ(r.stop, golden.ints(p + "stop_flag").at(0) != 0);
      // fp32 model parity (golden README "Tolerances observed": logits ~1e-5).
      const std::vector<float> entropy = golden.floats(p + "entropy");
      ASSERT_EQ(r.entropy.size(), entropy.size());
      for (size_t i = 0; i < entropy.size(); ++i) EXPECT_NEAR(r.entropy[i], entropy[i], 1e-3) << "position " << i;
      EXPECT_NEAR(r.mean_entropy, golden.floats(p + "mean_entropy").at(0), 1e-3);
    }
  }
  EXPECT_EQ(k, recorder.steps.size()) << "more steps executed than recorded";
}

// Free-running: our own self-conditioning. Only the first step is pinned;
// the number of steps that still match is reported (it depends on the
// kernels' summation order).
TEST_P(RealModelReplay, FreeRunningFirstStepMatches) {
  const GoldenCase golden(GetParam());
  const GenerationConfig config = parse_generation_config(
      json::dump(*golden.meta().find("effective_generation_config")), "effective_generation_config");
  ModelOptions options;
  options.threads = 2;
  auto model = DiffusionGemma::load(testing::golden_a_dir(), options);
  ReplayDraws draws(golden.tensors_path());
  Recorder recorder;
  GenerationResult result;
  try {
    result = generate(*model, golden.ints32("input_ids"), config, draws, &recorder);
  } catch (const Error& e) {
    // A drifted run may want more draws than were recorded; that is fine here.
    EXPECT_NE(std::string(e.what()).find("draw"), std::string::npos) << e.what();
  }
  ASSERT_FALSE(recorder.steps.empty());
  const Step& first = recorder.steps[0];
  EXPECT_EQ(first.canvas_in, golden.ints32("step.0.0.canvas_in"));
  EXPECT_EQ(first.sampled, golden.ints32("step.0.0.denoiser_canvas"));
  EXPECT_EQ(first.accepted, golden.ints("step.0.0.accepted_mask"));
  EXPECT_EQ(first.argmax, golden.ints32("step.0.0.argmax_canvas"));
  EXPECT_EQ(first.canvas_out, golden.ints32("step.0.0.renoised_canvas"));
  size_t same = 0;
  for (const Step& r : recorder.steps) {
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
