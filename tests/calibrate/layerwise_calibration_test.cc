// Layer-by-layer calibration on the golden tiny checkpoint: the layer-wise
// runner (model/layerwise_runner.h) gives every layer exactly the rows a
// whole-model pass gives it (encoder, and decoder after the prompt's keys,
// with a prompt longer than the sliding window), and calibrate_expert_inputs
// records exactly the ranges an observer of whole-model passes records, with
// the hidden states in memory or on disk; the model is left as it was.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "calibrate/calibrate_experts.h"
#include "calibrate/calibration_samples.h"
#include "calibrate/expert_amax_observer.h"
#include "cpu_model.h"
#include "dgemma/error.h"
#include "model/layerwise_runner.h"
#include "model/tap_recorder.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) p[size_t(k)] = (k * 37 + 11 + salt) % 500;
  p[0] = 2;
  return p;
}

TEST(LayerwiseRunner, EveryLayerSeesWhatTheWholePassGivesIt) {
  auto model = test::load_on_cpu(kGolden);
  const std::vector<int32_t> prompt = prompt_of(21, 0);  // longer than the window of 16
  const std::vector<int32_t> canvas = calibration_canvas(7, 0, model->canvas_length(), model->vocab_size());
  TapRecorder whole;
  model->set_observer(&whole);
  model->encode(prompt);
  std::vector<float> logits(size_t(model->canvas_length() * model->vocab_size()));
  model->decode_n(canvas.data(), model->canvas_length(), nullptr, logits.data());
  model->set_observer(nullptr);
  model->truncate_cache(0);

  LayerwiseRunner run(*model);
  Tensor x = run.encoder_input(prompt), y = run.decoder_input(canvas);
  for (int layer = 0; layer < model->config().num_layers; ++layer) {
    run.encoder_layer(layer, x);
    run.decoder_layer(layer, y);
    ASSERT_EQ(x.f, whole.find("encoder.layer_out." + std::to_string(layer))->f) << "encoder layer " << layer;
    ASSERT_EQ(y.f, whole.find("decoder.layer_out." + std::to_string(layer))->f) << "decoder layer " << layer;
    run.release_layer(layer);
  }
}

class Calibration : public ::testing::TestWithParam<bool> {};

TEST_P(Calibration, RecordsWhatAnObserverOfWholePassesRecords) {
  const bool on_disk = GetParam();
  auto model = test::load_on_cpu(kGolden);
  const std::vector<std::vector<int32_t>> samples = {prompt_of(21, 0), prompt_of(5, 3), prompt_of(12, 9)};
  auto canvas = [&](size_t s) { return calibration_canvas(0, s, model->canvas_length(), model->vocab_size()); };

  ExpertAmaxObserver whole(model->config().num_layers, model->config().num_experts, true, true);
  model->set_observer(&whole);
  for (size_t s = 0; s < samples.size(); ++s) {
    model->truncate_cache(0);
    model->encode(samples[s]);
    const std::vector<int32_t> c = canvas(s);
    std::vector<float> logits(size_t(model->canvas_length() * model->vocab_size()));
    model->decode_n(c.data(), model->canvas_length(), nullptr, logits.data());
  }
  TapRecorder kept;
  model->set_observer(&kept);
  model->truncate_cache(0);

  ExpertCalibrationOptions o;
  o.decoder = true;
  o.canvas = canvas;
  if (on_disk) o.scratch_dir = dgemma_test_temp_dir("calibration_states");
  int progress_calls = 0;
  o.progress = [&](int, size_t) { ++progress_calls; };
  const ExpertActivationRanges r = calibrate_expert_inputs(*model, samples, o);
  EXPECT_EQ(r.gate_up_amax, whole.ranges().gate_up_amax);
  EXPECT_EQ(r.down_amax, whole.ranges().down_amax);
  EXPECT_EQ(r.routed, whole.ranges().routed);
  EXPECT_EQ(r.samples, 3);
  EXPECT_EQ(r.tokens, 38);
  EXPECT_EQ(r.max_seq_len, 21);
  EXPECT_EQ(progress_calls, 3 * model->config().num_layers);
  int reached = 0;
  for (float a : r.gate_up_amax) reached += a > 0;
  EXPECT_GT(reached, 0);
  // The observer is restored, the cache empty, and the model still computes
  // what a fresh one does (released pages are read again).
  EXPECT_EQ(model->executor().observer(), &kept);
  EXPECT_EQ(model->cache_length(), 0);
  model->set_observer(nullptr);
  auto fresh = test::load_on_cpu(kGolden);
  model->encode(samples[0]);
  fresh->encode(samples[0]);
  const std::vector<int32_t> c = canvas(1);
  std::vector<float> a(size_t(model->canvas_length() * model->vocab_size())), b(a.size());
  model->decode_n(c.data(), model->canvas_length(), nullptr, a.data());
  fresh->decode_n(c.data(), fresh->canvas_length(), nullptr, b.data());
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(States, Calibration, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "OnDisk" : "InMemory"; });

TEST(Calibration, EncoderOnlyIgnoresTheDecoder) {
  auto model = test::load_on_cpu(kGolden);
  ExpertCalibrationOptions o;
  const ExpertActivationRanges enc = calibrate_expert_inputs(*model, {prompt_of(9, 1)}, o);
  o.decoder = true;
  o.canvas = [&](size_t s) { return calibration_canvas(0, s, model->canvas_length(), model->vocab_size()); };
  const ExpertActivationRanges both = calibrate_expert_inputs(*model, {prompt_of(9, 1)}, o);
  EXPECT_NE(enc.gate_up_amax, both.gate_up_amax);
  for (size_t i = 0; i < enc.gate_up_amax.size(); ++i) EXPECT_LE(enc.gate_up_amax[i], both.gate_up_amax[i]);
  o.decoder = false;
  o.encoder = false;
  EXPECT_THROW(calibrate_expert_inputs(*model, {prompt_of(9, 1)}, o), Error);
  EXPECT_THROW(calibrate_expert_inputs(*model, {}, ExpertCalibrationOptions{}), Error);
}

}  // namespace
}  // namespace dgemma
