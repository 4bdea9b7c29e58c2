#pragma once
// Parity aid for replaying a recorded reference generate() run with a real
// model. Self-conditioning (docs/model.md §3.3) feeds each step's logits into the next
// step's decoder pass, and on DiffusionGemma that feedback amplifies a
// perturbation of the self-conditioning logits about tenfold per step (golden
// A: noise of 1e-4 gives ~1e-3 in the next logits; MoE routing flips then
// jump). A float32 engine that sums in a different order than torch is ~1e-4
// off per pass (golden README "Tolerances observed"), so a free-running
// replay drifts away from the recording after a few steps although every
// single pass is within tolerance.
//
// RecordedSelfConditioning wraps a model and, on every step after a
// canvas's first, passes the reference's own self-conditioning input - the
// recorded `step.<c>.<s-1>.raw_logits` divided by `step.<c>.<s-1>.temperature`
// (float32 division, as generate() computes it) - instead of ours. The
// canvas, the cache and every decision still come from our model and loop,
// so a replay then reproduces the recorded run token for token while testing
// the real decoder and encoder at every step.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/diffusion_model.h"

namespace dgemma {

class SafetensorsFile;

class RecordedSelfConditioning final : public DiffusionModel {
 public:
  // `inner` must outlive this object; `path` is a golden generate_* case
  // file (tests/data/golden_a/cases/generate_*.safetensors). Throws
  // dgemma::Error when it cannot be opened.
  RecordedSelfConditioning(DiffusionModel& inner, const std::string& path);
  ~RecordedSelfConditioning() override;

  int64_t vocab_size() const override { return inner_.vocab_size(); }
  int64_t canvas_length() const override { return inner_.canvas_length(); }
  int64_t cache_length() const override { return inner_.cache_length(); }
  void encode(const std::vector<int32_t>& ids) override { inner_.encode(ids); }
  void encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images) override {
    inner_.encode_with_images(ids, images);
  }
  void truncate_cache(int64_t length) override { inner_.truncate_cache(length); }
  // A null `self_conditioning` starts a new canvas; otherwise it is replaced
  // by the recorded one of the previous step (throws when the file has none).
  void decode(const int32_t* canvas, const float* self_conditioning, float* logits) override;

 private:
  std::vector<float> floats(const std::string& name, size_t expected) const;

  DiffusionModel& inner_;
  std::string path_;
  std::shared_ptr<const SafetensorsFile> file_;
  int64_t canvas_ = -1;  // canvas index of the last decode
  int64_t step_ = 0;     // decode calls within that canvas
  std::vector<float> sc_;
};

}  // namespace dgemma
