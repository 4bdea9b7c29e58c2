#pragma once
// Helpers of the tests that compare generate()'s two ways of running a
// step's per-row sampler pass (generate.h): on the host over decode()'s
// logits, and inside the model (DiffusionModel::decode_sample, the sample
// op). Used by tests/generate (CPU) and tests/cuda (the op on the device).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "ops/backend.h"

namespace dgemma::testing {

// Forwards every call to `inner`; tests derive from it to hide or count calls.
class ForwardingModel : public DiffusionModel {
 public:
  explicit ForwardingModel(DiffusionModel& inner) : inner_(inner) {}
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  int64_t canvas_length() const override { return inner_.canvas_length(); }
  int64_t cache_length() const override { return inner_.cache_length(); }
  void encode(const std::vector<int32_t>& ids) override { inner_.encode(ids); }
  void decode(const int32_t* canvas, const float* self_conditioning, float* logits) override {
    inner_.decode(canvas, self_conditioning, logits);
  }
  void truncate_cache(int64_t length) override { inner_.truncate_cache(length); }
  bool samples_rows() const override { return inner_.samples_rows(); }
  void decode_sample(const int32_t* canvas, bool use_self_conditioning, float temperature, const double* uniforms,
                     RowSamples& out) override {
    inner_.decode_sample(canvas, use_self_conditioning, temperature, uniforms, out);
  }
  void processed_logits(float* out) override { inner_.processed_logits(out); }
  ThreadPool* thread_pool() override { return inner_.thread_pool(); }

 private:
  DiffusionModel& inner_;
};

// Says it does not sample rows: generate() then runs its host path.
class DecodeOnly final : public ForwardingModel {
 public:
  using ForwardingModel::ForwardingModel;
  bool samples_rows() const override { return false; }
};

// Every field of every event, processed logits included.
struct FullStep {
  int64_t canvas, step, cur_step, n_accepted;
  uint32_t temperature, mean_entropy;  // bits
  bool stable, confident, stop;
  std::vector<int32_t> canvas_in, sampled, argmax, canvas_out;
  std::vector<uint8_t> accepted;
  std::vector<uint32_t> entropy, processed_logits;  // bits
  bool operator==(const FullStep&) const = default;
};

struct FullCanvas {
  int64_t canvas, steps;
  std::vector<int32_t> argmax, committed;
  bool eos;
  bool operator==(const FullCanvas&) const = default;
};

inline std::vector<uint32_t> float_bits(const float* p, size_t n) {
  std::vector<uint32_t> b(n);
  if (n > 0) std::memcpy(b.data(), p, n * sizeof(float));
  return b;
}

class FullRecorder : public GenerationObserver {
 public:
  explicit FullRecorder(int64_t lv) : lv_(lv) {}
  bool wants_processed_logits(const StepEvent&) override { return true; }
  void on_step(const StepEvent& e) override {
    FullStep s{e.canvas,
               e.step,
               e.cur_step,
               e.n_accepted,
               float_bits(&e.temperature, 1)[0],
               float_bits(&e.mean_entropy, 1)[0],
               e.stable,
               e.confident,
               e.stop,
               {e.canvas_in.begin(), e.canvas_in.end()},
               {e.sampled.begin(), e.sampled.end()},
               {e.argmax.begin(), e.argmax.end()},
               {e.canvas_out.begin(), e.canvas_out.end()},
               {e.accepted.begin(), e.accepted.end()},
               float_bits(e.entropy.data(), e.entropy.size()),
               float_bits(e.processed_logits, size_t(lv_))};
    steps.push_back(std::move(s));
  }
  void on_canvas(const CanvasEvent& e) override {
    canvases.push_back(
        {e.canvas, e.steps, {e.argmax.begin(), e.argmax.end()}, {e.committed.begin(), e.committed.end()}, e.eos});
  }
  std::vector<FullStep> steps;
  std::vector<FullCanvas> canvases;

 private:
  int64_t lv_;
};

inline void expect_same_result(const GenerationResult& a, const GenerationResult& b) {
  EXPECT_EQ(a.sequences, b.sequences);
  EXPECT_EQ(a.prompt_length, b.prompt_length);
  EXPECT_EQ(a.steps_per_canvas, b.steps_per_canvas);
  ASSERT_EQ(a.halt_entropy.size(), b.halt_entropy.size());
  EXPECT_EQ(float_bits(a.halt_entropy.data(), a.halt_entropy.size()),
            float_bits(b.halt_entropy.data(), b.halt_entropy.size()));
  EXPECT_EQ(a.converged, b.converged);
  EXPECT_EQ(a.decoder_forwards, b.decoder_forwards);
  EXPECT_EQ(float_bits(&a.tokens_per_forward, 1), float_bits(&b.tokens_per_forward, 1));
  EXPECT_EQ(a.stopped_at_eos, b.stopped_at_eos);
  EXPECT_EQ(a.cancelled, b.cancelled);
}

inline void expect_same_recording(const FullRecorder& a, const FullRecorder& b) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t k = 0; k < a.steps.size(); ++k)
    EXPECT_TRUE(a.steps[k] == b.steps[k])
        << "step event " << k << " (canvas " << a.steps[k].canvas << " step " << a.steps[k].step << ") differs";
  EXPECT_TRUE(a.canvases == b.canvases);
}

// Runs every op on `main`, except the sample op on `sampler` (when given),
// and optionally turns one logit of one decoder step into NaN (the soft-cap
// output, i.e. the logits, at decoder step `nan_step`, row `nan_row`,
// vocabulary index `nan_logit`). Counts the sample ops it saw.
class RoutingBackend final : public Backend {
 public:
  RoutingBackend(Backend& main, Backend* sampler) : main_(main), sampler_(sampler) {}
  std::string name() const override { return std::string("routing(") + main_.name() + ")"; }
  void run(const OpCall& c) override {
    if (c.kind == OpKind::kSample) {
      ++samples;
      (sampler_ ? *sampler_ : main_).run(c);
      return;
    }
    main_.run(c);
    if (c.kind == OpKind::kSoftcap && c.pass == Pass::kDecoder && c.step == nan_step) {
      Tensor& t = *c.out[0];
      t.f[size_t(nan_row * t.dim(1) + nan_logit)] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  int nan_step = -1;
  int64_t nan_row = 0, nan_logit = 0;
  int64_t samples = 0;

 private:
  Backend& main_;
  Backend* sampler_;
};

}  // namespace dgemma::testing
