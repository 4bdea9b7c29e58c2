#include "model_flags.h"

#include "dgemma/error.h"

namespace dgemma::cli {

void ModelFlags::add_to(FlagParser& p) {
  p.add_string("-m,--model", &model_dir, "checkpoint folder (config.json + *.safetensors)", "DIR");
  p.add_string("--config", &config, "use this config.json instead of DIR/config.json", "FILE");
  p.add_string("--precision", &precision,
               "fp32: weights as stored, fp32 activations (parity); bf16: weights converted to bf16, "
               "fp32 activations and accumulation (product path)",
               "MODE");
  p.add_string("--decoder-window", &decoder_window,
               "committed keys seen by sliding decoder layers: reference (HF, last W-1), static (W), per-query (JAX)",
               "VARIANT");
  p.add_int("-t,--threads", &threads, "CPU threads (0 = all cores)");
}

ModelOptions ModelFlags::options() const {
  ModelOptions o;
  if (precision == "fp32") o.precision = WeightPrecision::kAsStored;
  else if (precision == "bf16") o.precision = WeightPrecision::kBF16;
  else throw Error("--precision: expected fp32 or bf16, got '" + precision + "'");
  if (threads < 0) throw Error("--threads must be >= 0, got " + std::to_string(threads));
  o.threads = int(threads);
  o.decoder_window = parse_decoder_window(decoder_window);
  return o;
}

std::unique_ptr<DiffusionGemma> ModelFlags::load() const {
  if (model_dir.empty()) throw Error("no model given: use -m DIR");
  if (config.empty()) return DiffusionGemma::load(model_dir, options());
  return DiffusionGemma::load(model_dir, config, options());
}

}  // namespace dgemma::cli
