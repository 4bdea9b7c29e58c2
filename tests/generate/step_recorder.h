#pragma once
// What the golden replay tests record of a generate() run (every step and
// every finished canvas, through GenerationObserver) and the checks they
// share: the effective generation config of a golden case, float bits, and
// one executed step against the recorded one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/json.h"
#include "generate/generate.h"
#include "generate/generation_config.h"
#include "golden_case.h"

namespace dgemma::testing {

struct RecordedStep {
  int64_t canvas, step, cur_step, n_accepted;
  float temperature, mean_entropy;
  std::vector<int32_t> canvas_in, sampled, argmax, canvas_out;
  std::vector<int64_t> accepted;
  std::vector<float> entropy;
  bool stop;
};

struct RecordedCanvas {
  int64_t canvas, steps;
  std::vector<int32_t> argmax, committed;
  bool eos;
};

class StepRecorder : public GenerationObserver {
 public:
  void on_step(const StepEvent& e) override {
    steps.push_back({e.canvas,
                     e.step,
                     e.cur_step,
                     e.n_accepted,
                     e.temperature,
                     e.mean_entropy,
                     {e.canvas_in.begin(), e.canvas_in.end()},
                     {e.sampled.begin(), e.sampled.end()},
                     {e.argmax.begin(), e.argmax.end()},
                     {e.canvas_out.begin(), e.canvas_out.end()},
                     {e.accepted.begin(), e.accepted.end()},
                     {e.entropy.begin(), e.entropy.end()},
                     e.stop});
  }
  void on_canvas(const CanvasEvent& e) override {
    canvases.push_back(
        {e.canvas, e.steps, {e.argmax.begin(), e.argmax.end()}, {e.committed.begin(), e.committed.end()}, e.eos});
  }
  std::vector<RecordedStep> steps;
  std::vector<RecordedCanvas> canvases;
};

inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline GenerationConfig effective_config(const GoldenCase& golden) {
  return parse_generation_config(json::dump(*golden.meta().find("effective_generation_config")),
                                 "effective_generation_config");
}

// Step s of canvas c (`meta_step` is its entry in the case's meta) against the
// recording: every decision exactly, the temperature bit-exactly, entropies
// within `entropy_tol`.
inline void expect_step_matches(const RecordedStep& r, const GoldenCase& golden, size_t c, size_t s,
                                const json::Value& meta_step, double entropy_tol) {
  const std::string p = "step." + std::to_string(c) + "." + std::to_string(s) + ".";
  SCOPED_TRACE(golden.name() + " " + p);
  EXPECT_EQ(r.canvas, int64_t(c));
  EXPECT_EQ(r.step, int64_t(s));
  EXPECT_EQ(r.cur_step, meta_step.find("cur_step")->as_int());
  EXPECT_EQ(bits(r.temperature), bits(golden.floats(p + "temperature").at(0)))
      << r.temperature << " vs " << golden.floats(p + "temperature").at(0);
  EXPECT_EQ(r.canvas_in, golden.ints32(p + "canvas_in"));
  EXPECT_EQ(r.sampled, golden.ints32(p + "denoiser_canvas"));
  EXPECT_EQ(r.argmax, golden.ints32(p + "argmax_canvas"));
  EXPECT_EQ(r.accepted, golden.ints(p + "accepted_mask"));
  EXPECT_EQ(r.canvas_out, golden.ints32(p + "renoised_canvas"));
  EXPECT_EQ(r.n_accepted, meta_step.find("n_accepted")->as_int());
  EXPECT_EQ(r.stop, golden.ints(p + "stop_flag").at(0) != 0);
  const std::vector<float> entropy = golden.floats(p + "entropy");
  ASSERT_EQ(r.entropy.size(), entropy.size());
  for (size_t i = 0; i < entropy.size(); ++i) EXPECT_NEAR(r.entropy[i], entropy[i], entropy_tol) << "position " << i;
  EXPECT_NEAR(r.mean_entropy, golden.floats(p + "mean_entropy").at(0), entropy_tol);
}

// A whole replayed run against the case: steps per canvas, committed
// canvases and every recorded step (expect_step_matches).
inline void expect_run_matches(const GenerationResult& result, const StepRecorder& recorder, const GoldenCase& golden,
                               double entropy_tol) {
  const json::Array& canvases = golden.meta().find("canvases")->as_array();
  ASSERT_EQ(result.steps_per_canvas.size(), canvases.size());
  size_t k = 0;
  for (size_t c = 0; c < canvases.size(); ++c) {
    const json::Array& steps = canvases[c].find("steps")->as_array();
    EXPECT_EQ(result.steps_per_canvas[c], int64_t(steps.size())) << "canvas " << c;
    ASSERT_LT(c, recorder.canvases.size());
    EXPECT_EQ(recorder.canvases[c].committed, golden.ints32("canvas." + std::to_string(c) + ".finalized"))
        << "canvas " << c;
    for (size_t s = 0; s < steps.size() && k < recorder.steps.size(); ++s, ++k)
      expect_step_matches(recorder.steps[k], golden, c, s, steps[s], entropy_tol);
  }
  EXPECT_EQ(k, recorder.steps.size()) << "more steps executed than recorded";
}

}  // namespace dgemma::testing
