#pragma once
// Flags shared by the subcommands that load a model (-m, --precision,
// --threads, --decoder-window, --config).
#include <string>

#include "flags.h"
#include "model/diffusion_gemma.h"

namespace dgemma::cli {

struct ModelFlags {
  std::string model_dir;
  std::string config;  // optional alternative config.json
  std::string precision = "fp32";
  std::string decoder_window = "reference";
  int64_t threads = 0;

  void add_to(FlagParser& p);
  ModelOptions options() const;
  std::unique_ptr<DiffusionGemma> load() const;
};

}  // namespace dgemma::cli
