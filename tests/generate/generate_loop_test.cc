// generate() behaviour the golden cases cannot show (with random weights the
// argmax never stabilises there): early stopping, EOS inside a canvas, start
// canvas, cancellation, seeded reproducibility, buffer reuse, input errors.
// Uses a scripted model whose logits are a pure function of the position.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "dgemma/error.h"
#include "generate/generate.h"
#include "generate/sampler.h"

namespace dgemma {
namespace {

constexpr int64_t kVocab = 64;
constexpr int64_t kLength = 4;

// Logits: the target token of absolute position p gets +margin/2, every other
// token -margin/2, plus an optional position/token-dependent ripple so that
// sampling is not deterministic.
class ScriptedModel final : public DiffusionModel {
 public:
  explicit ScriptedModel(float margin = 40.f, float ripple = 0.f) : margin_(margin), ripple_(ripple) {}

  std::vector<int32_t> targets;  // overrides by absolute position; default 10 + p % 40
  int32_t target(int64_t p) const {
    return size_t(p) < targets.size() && targets[size_t(p)] >= 0 ? targets[size_t(p)] : int32_t(10 + p % 40);
  }

  int64_t vocab_size() const override { return kVocab; }
  int64_t canvas_length() const override { return kLength; }
  int64_t cache_length() const override { return cache_; }

  void encode(const std::vector<int32_t>& ids) override {
    encodes.push_back(ids);
    encode_positions.push_back(cache_);
    cache_ += int64_t(ids.size());
  }

  void decode(const int32_t* canvas, const float* sc, float* logits) override {
    decode_canvases.emplace_back(canvas, canvas + kLength);
    sc_null.push_back(sc == nullptr);
    if (sc != nullptr) {
      // The self-conditioning input is the buffer we filled last time, now
      // holding raw / T of that step (docs/model.md §3.3).
      EXPECT_EQ(sc, last_out_);
      for (size_t i = 0; i < last_raw_.size(); ++i) ASSERT_EQ(sc[i], last_raw_[i] / last_temperature) << i;
    }
    out_pointers.insert(logits);
    for (int64_t i = 0; i < kLength; ++i) {
      const int32_t t = target(cache_ + i);
      for (int64_t v = 0; v < kVocab; ++v) {
        float x = v == t ? margin_ / 2 : -margin_ / 2;
        if (ripple_ != 0.f) x += ripple_ * std::sin(float(v * 7 + i * 13 + cache_));
        logits[i * kVocab + v] = x;
      }
    }
    if (nan_at_decode == int64_t(decode_canvases.size()) - 1) logits[5] = std::numeric_limits<float>::quiet_NaN();
    last_raw_.assign(logits, logits + kLength * kVocab);
    last_out_ = logits;
  }

  void truncate_cache(int64_t length) override { cache_ = length; }
  ThreadPool* thread_pool() override { return pool; }
  ThreadPool* pool = nullptr;

  std::vector<std::vector<int32_t>> encodes;
  std::vector<int64_t> encode_positions;
  std::vector<std::vector<int32_t>> decode_canvases;
  std::vector<bool> sc_null;
  std::set<const float*> out_pointers;
  float last_temperature = 0;  // set by the observer below
  int64_t nan_at_decode = -1;

 private:
  float margin_, ripple_;
  int64_t cache_ = 0;
  std::vector<float> last_raw_;
  const float* last_out_ = nullptr;
};

// Tells the model each step's temperature so it can check the SC input.
class TemperatureFeed : public GenerationObserver {
 public:
  explicit TemperatureFeed(ScriptedModel& m) : model(m) {}
  void on_step(const StepEvent& e) override {
    model.last_temperature = e.temperature;
    steps.push_back(e.step);
    canvas_in.emplace_back(e.canvas_in.begin(), e.canvas_in.end());
  }
  bool cancelled() override { return cancel_after >= 0 && int64_t(model.decode_canvases.size()) >= cancel_after; }
  ScriptedModel& model;
  std::vector<int64_t> steps;
  std::vector<std::vector<int32_t>> canvas_in;
  int64_t cancel_after = -1;
};

GenerationConfig small_config() {
  GenerationConfig c;
  c.max_new_tokens = 2 * kLength;
  c.max_denoising_steps = 10;
  c.eos_token_ids = {1};
  return c;
}

const std::vector<int32_t> kPrompt = {2, 7, 8};

std::vector<int32_t> expected_targets(const ScriptedModel& m, int64_t from, int64_t n) {
  std::vector<int32_t> out;
  for (int64_t p = from; p < from + n; ++p) out.push_back(m.target(p));
  return out;
}

TEST(GenerateLoop, StableAndConfidentStopsAfterTwoSteps) {
  ScriptedModel model;
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  const GenerationResult r = generate(model, kPrompt, small_config(), draws, &feed);
  // stability_threshold 1: step 0 is never stable, step 1 repeats the argmax.
  EXPECT_EQ(r.steps_per_canvas, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.decoder_forwards, 4);
  std::vector<int32_t> want = kPrompt;
  for (int32_t t : expected_targets(model, 3, 8)) want.push_back(t);
  EXPECT_EQ(r.sequences, want);
  EXPECT_EQ(r.tokens_per_forward, 2.0f);
  EXPECT_FALSE(r.stopped_at_eos);
  // Prefill, then canvas 0's commit at positions 3..6; the last canvas is not encoded.
  ASSERT_EQ(model.encodes.size(), 2u);
  EXPECT_EQ(model.encodes[0], kPrompt);
  EXPECT_EQ(model.encodes[1], expected_targets(model, 3, 4));
  EXPECT_EQ(model.encode_positions, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(model.sc_null, (std::vector<bool>{true, false, true, false}));
  // Both canvases converged, at a mean entropy below the confidence threshold.
  EXPECT_EQ(r.converged, (std::vector<bool>{true, true}));
  ASSERT_EQ(r.halt_entropy.size(), 2u);
  for (float h : r.halt_entropy) EXPECT_LT(h, small_config().confidence_threshold);
}

TEST(GenerateLoop, StabilityThresholdSetsTheMinimumStepCount) {
  for (const auto& [threshold, steps] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {3, 4}}) {
    ScriptedModel model;
    TemperatureFeed feed(model);
    RandomDraws draws(1);
    GenerationConfig c = small_config();
    c.stability_threshold = threshold;
    EXPECT_EQ(generate(model, kPrompt, c, draws, &feed).steps_per_canvas, (std::vector<int64_t>{steps, steps}))
        << "stability_threshold " << threshold;
  }
}

TEST(GenerateLoop, NeverConfidentRunsAllSteps) {
  ScriptedModel model(/*margin=*/2.f);
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  const GenerationResult r = generate(model, kPrompt, small_config(), draws, &feed);
  EXPECT_EQ(r.steps_per_canvas, (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(feed.steps.back(), 9);
  // The trajectory alarm's inputs: not converged, high entropy at the end.
  EXPECT_EQ(r.converged, (std::vector<bool>{false, false}));
  ASSERT_EQ(r.halt_entropy.size(), 2u);
  for (float h : r.halt_entropy) EXPECT_GT(h, small_config().confidence_threshold);
}

TEST(GenerateLoop, EosEndsGenerationAndPadsTheRestOfTheCanvas) {
  ScriptedModel model;
  model.targets.assign(20, -1);
  model.targets[8] = 1;  // canvas 1 (positions 7..10), index 1
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  GenerationConfig c = small_config();
  c.max_new_tokens = 3 * kLength;
  const GenerationResult r = generate(model, kPrompt, c, draws, &feed);
  EXPECT_TRUE(r.stopped_at_eos);
  EXPECT_EQ(r.steps_per_canvas.size(), 2u);
  std::vector<int32_t> want = kPrompt;
  for (int32_t t : expected_targets(model, 3, 4)) want.push_back(t);
  for (int32_t t : {model.target(7), 1, 0, 0}) want.push_back(t);
  EXPECT_EQ(r.sequences, want);
  EXPECT_EQ(model.encodes.size(), 2u);           // the EOS canvas is never encoded
  EXPECT_EQ(r.tokens_per_forward, 6.0f / 4.0f);  // pads do not count
}

TEST(GenerateLoop, MaxNewTokensRoundsUpToWholeCanvases) {
  ScriptedModel model;
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  GenerationConfig c = small_config();
  c.max_new_tokens = kLength + 1;
  const GenerationResult r = generate(model, kPrompt, c, draws, &feed);
  EXPECT_EQ(r.sequences.size(), kPrompt.size() + 2 * kLength);  // not trimmed (docs/model.md §3.4)
  EXPECT_EQ(r.generated().size(), size_t(2 * kLength));
}

// Counts calls, forwarding to a RandomDraws.
class CountingDraws : public DrawSource {
 public:
  explicit CountingDraws(uint64_t seed) : inner(seed) {}
  void canvas_init(int64_t c, int64_t v, std::span<int32_t> out) override {
    ++inits;
    inner.canvas_init(c, v, out);
  }
  void sample(int64_t c, int64_t s, const float* z, int64_t v, std::span<int32_t> out) override {
    ++samples;
    inner.sample(c, s, z, v, out);
  }
  void renoise(int64_t c, int64_t s, int64_t v, std::span<int32_t> out) override {
    ++renoises;
    inner.renoise(c, s, v, out);
  }
  RandomDraws inner;
  int inits = 0, samples = 0, renoises = 0;
};

TEST(GenerateLoop, StartCanvasReplacesCanvasZeroButInitIsStillDrawn) {
  ScriptedModel model;
  TemperatureFeed feed(model);
  CountingDraws draws(77);
  const std::vector<int32_t> start = {3, 4, 5, 6};
  generate(model, kPrompt, small_config(), draws, &feed, start);
  EXPECT_EQ(draws.inits, 2);  // both canvases draw A (docs/model.md §3.5)
  EXPECT_EQ(draws.samples, 4);
  EXPECT_EQ(draws.renoises, 4);  // also on the stopping step
  EXPECT_EQ(model.decode_canvases[0], start);
  std::vector<int32_t> init1(kLength);
  RandomDraws(77).canvas_init(1, kVocab, init1);
  EXPECT_EQ(model.decode_canvases[2], init1);  // canvas 1 starts from its own draw
}

TEST(GenerateLoop, SeededRunsAreReproducible) {
  auto run = [](uint64_t seed) {
    ScriptedModel model(/*margin=*/3.f, /*ripple=*/2.f);
    TemperatureFeed feed(model);
    RandomDraws draws(seed);
    GenerationConfig c = small_config();
    c.max_denoising_steps = 6;
    generate(model, kPrompt, c, draws, &feed);
    return model.decode_canvases;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(GenerateLoop, CancelDropsTheUnfinishedCanvas) {
  ScriptedModel model;
  TemperatureFeed feed(model);
  feed.cancel_after = 3;  // canvas 0 takes 2 steps; stop during canvas 1
  RandomDraws draws(1);
  const GenerationResult r = generate(model, kPrompt, small_config(), draws, &feed);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.steps_per_canvas, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.sequences.size(), kPrompt.size() + kLength);
  EXPECT_EQ(r.decoder_forwards, 3);
}

TEST(GenerateLoop, LogitsBuffersAreAllocatedOncePerCall) {
  ScriptedModel model(/*margin=*/2.f);
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  GenerationConfig c = small_config();
  c.max_new_tokens = 3 * kLength;
  generate(model, kPrompt, c, draws, &feed);
  EXPECT_EQ(model.decode_canvases.size(), 30u);
  EXPECT_EQ(model.out_pointers.size(), 2u);  // ping-pong between two [L, V] buffers
}

TEST(GenerateLoop, EmptyPromptSkipsPrefill) {
  ScriptedModel model;
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  const GenerationResult r = generate(model, {}, small_config(), draws, &feed);
  EXPECT_EQ(r.sequences.size(), size_t(2 * kLength));
  ASSERT_EQ(model.encodes.size(), 1u);  // only canvas 0's commit
  EXPECT_EQ(model.encode_positions[0], 0);
}

TEST(GenerateLoop, InputErrors) {
  ScriptedModel model;
  RandomDraws draws(1);
  const std::vector<int32_t> short_start = {1, 2};
  EXPECT_THROW(generate(model, kPrompt, small_config(), draws, nullptr, short_start), Error);
  EXPECT_THROW(generate(model, {1, 64}, small_config(), draws), Error);
  GenerationConfig bad = small_config();
  bad.max_denoising_steps = 0;
  EXPECT_THROW(generate(model, kPrompt, bad, draws), Error);
}

TEST(GenerateLoop, NanLogitsNameCanvasAndStep) {
  ScriptedModel model;
  model.nan_at_decode = 2;  // canvas 1, step 0
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  try {
    generate(model, kPrompt, small_config(), draws, &feed);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("canvas 1 step 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgemma

namespace dgemma {
namespace {

// RandomDraws without its inverse-CDF shortcut: generate() then calls
// sample() after its per-row pass instead of fusing draw B into it.
class UnfusedDraws final : public DrawSource {
 public:
  explicit UnfusedDraws(uint64_t seed) : inner_(seed) {}
  void canvas_init(int64_t c, int64_t v, std::span<int32_t> out) override { inner_.canvas_init(c, v, out); }
  void sample(int64_t c, int64_t s, const float* z, int64_t v, std::span<int32_t> out) override {
    inner_.sample(c, s, z, v, out);
  }
  void renoise(int64_t c, int64_t s, int64_t v, std::span<int32_t> out) override { inner_.renoise(c, s, v, out); }

 private:
  RandomDraws inner_;
};

struct Trace {
  std::vector<std::vector<int32_t>> canvases, sampled, argmax;
  std::vector<float> entropy;
  std::vector<int32_t> sequences;
};

class TraceObserver : public GenerationObserver {
 public:
  explicit TraceObserver(ScriptedModel& m) : model(m) {}
  void on_step(const StepEvent& e) override {
    model.last_temperature = e.temperature;
    t.canvases.emplace_back(e.canvas_in.begin(), e.canvas_in.end());
    t.sampled.emplace_back(e.sampled.begin(), e.sampled.end());
    t.argmax.emplace_back(e.argmax.begin(), e.argmax.end());
    t.entropy.insert(t.entropy.end(), e.entropy.begin(), e.entropy.end());
  }
  ScriptedModel& model;
  Trace t;
};

Trace traced_run(DrawSource& draws, ThreadPool* pool) {
  ScriptedModel model(/*margin=*/3.f, /*ripple=*/2.f);
  model.pool = pool;
  TraceObserver obs(model);
  GenerationConfig c = small_config();
  c.max_denoising_steps = 6;
  obs.t.sequences = generate(model, kPrompt, c, draws, &obs).sequences;
  return obs.t;
}

// The fused per-row pass (temperature, argmax, entropy, draw B in one sweep,
// rows over threads) must give exactly what the separate passes give, for
// any thread count.
TEST(GenerateLoop, FusedRowPassEqualsSeparatePassesOnAnyThreadCount) {
  UnfusedDraws unfused(11);
  const Trace reference = traced_run(unfused, nullptr);
  ASSERT_FALSE(reference.sampled.empty());
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    RandomDraws fused(11);
    const Trace t = traced_run(fused, &pool);
    EXPECT_EQ(t.canvases, reference.canvases) << threads;
    EXPECT_EQ(t.sampled, reference.sampled) << threads;
    EXPECT_EQ(t.argmax, reference.argmax) << threads;
    EXPECT_EQ(t.entropy, reference.entropy) << threads;  // bit-exact
    EXPECT_EQ(t.sequences, reference.sequences) << threads;
  }
}

// A bad logit found by a pool worker is reported as the usual error, from the
// calling thread.
TEST(GenerateLoop, NanFoundOnAWorkerThreadIsAnError) {
  ThreadPool pool(3);
  ScriptedModel model;
  model.pool = &pool;
  model.nan_at_decode = 1;
  TemperatureFeed feed(model);
  RandomDraws draws(1);
  try {
    generate(model, kPrompt, small_config(), draws, &feed);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("canvas 0 step 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("logit 5 is nan"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgemma
