#include "calibrate/calibrate_experts.h"

#include <algorithm>

#include "calibrate/expert_amax_observer.h"
#include "calibrate/hidden_state_store.h"
#include "dgemma/error.h"
#include "model/layerwise_runner.h"

namespace dgemma {
namespace {

std::vector<int64_t> sample_rows(const std::vector<std::vector<int32_t>>& samples) {
  std::vector<int64_t> rows;
  for (const auto& s : samples) rows.push_back(int64_t(s.size()));
  return rows;
}

std::vector<std::vector<int32_t>> canvases(const std::vector<std::vector<int32_t>>& samples,
                                           const ExpertCalibrationOptions& o) {
  std::vector<std::vector<int32_t>> out;
  if (!o.decoder) return out;
  if (!o.canvas) throw Error("calibration: the decoder pass needs canvases");
  for (size_t s = 0; s < samples.size(); ++s) {
    out.push_back(o.canvas(s));
    if (out.back().empty()) throw Error("calibration: the canvas of sample " + std::to_string(s) + " is empty");
  }
  return out;
}

// Restores the model's observer however the calibration ends.
struct ObserverScope {
  DiffusionGemma& model;
  OpObserver* saved;
  ObserverScope(DiffusionGemma& m, OpObserver* o) : model(m), saved(m.executor().observer()) { m.set_observer(o); }
  ~ObserverScope() { model.set_observer(saved); }
};

}  // namespace

uint64_t calibration_state_bytes(const ModelConfig& config, const std::vector<std::vector<int32_t>>& samples,
                                 const ExpertCalibrationOptions& options) {
  uint64_t rows = 0;
  for (const auto& s : samples) rows += s.size();
  if (options.decoder) rows += uint64_t(config.canvas_length) * samples.size();
  return rows * uint64_t(config.hidden_size) * 4;
}

ExpertActivationRanges calibrate_expert_inputs(DiffusionGemma& model, const std::vector<std::vector<int32_t>>& samples,
                                               const ExpertCalibrationOptions& o) {
  if (samples.empty()) throw Error("calibration: no samples");
  if (!o.encoder && !o.decoder) throw Error("calibration: no pass to observe");
  const ModelConfig& cfg = model.config();
  const std::vector<std::vector<int32_t>> canvas = canvases(samples, o);
  // Every pass runs; only the asked ones are observed. The decoder needs the
  // encoder's keys of its layer whether or not the encoder is observed.
  ExpertAmaxObserver observer(cfg.num_layers, cfg.num_experts, o.encoder, o.decoder);
  ObserverScope scope(model, &observer);
  model.truncate_cache(0);
  LayerwiseRunner run(model);

  HiddenStateStore prompts(sample_rows(samples), cfg.hidden_size, o.scratch_dir);
  HiddenStateStore canvas_states(sample_rows(canvas), cfg.hidden_size, o.scratch_dir);
  for (size_t s = 0; s < samples.size(); ++s) {
    prompts.put(s, run.encoder_input(samples[s]));
    if (o.decoder) canvas_states.put(s, run.decoder_input(canvas[s]));
  }
  for (int layer = 0; layer < cfg.num_layers; ++layer) {
    const bool last = layer + 1 == cfg.num_layers;
    for (size_t s = 0; s < samples.size(); ++s) {
      Tensor x = prompts.get(s);
      run.encoder_layer(layer, x);
      if (!last) prompts.put(s, x);
      if (o.decoder) {
        Tensor y = canvas_states.get(s);
        run.decoder_layer(layer, y);
        if (!last) canvas_states.put(s, y);
      }
      if (o.progress) o.progress(layer, s);
    }
    run.release_layer(layer);
  }
  model.truncate_cache(0);

  ExpertActivationRanges r = observer.ranges();
  r.samples = int64_t(samples.size());
  for (const auto& s : samples) {
    r.tokens += int64_t(s.size());
    r.max_seq_len = std::max<int64_t>(r.max_seq_len, int64_t(s.size()));
  }
  return r;
}

}  // namespace dgemma
