#pragma once
// Flags shared by `generate`, `run` and `chat`: generation parameters that
// override the checkpoint's generation_config.json (flat or nested spelling,
// spec §3.1), and the random seed. A flag left out keeps the file's value, so
// the help text says "from generation_config.json" instead of a number.
#include <cstdint>
#include <string>

#include "flags.h"
#include "generate/generation_config.h"

namespace dgemma::cli {

struct GenerationFlags {
  std::string generation_config;  // explicit file; default DIR/generation_config.json
  std::string max_new_tokens, max_denoising_steps, stability_threshold;
  std::string confidence_threshold, entropy_bound, t_min, t_max;
  std::string eos_token_id, pad_token_id;
  int64_t seed = -1;

  void add_to(FlagParser& p);
  // Reads the config for `model_dir` and applies the overrides. Prints a
  // warning to stderr when no generation_config.json exists (spec §6.3: a
  // silent fallback changes stopping and EOS behaviour) unless `quiet`.
  GenerationConfig resolve(const std::string& model_dir, bool quiet) const;
  // The seed to use: --seed, or a fresh random one when it is -1.
  uint64_t resolve_seed() const;
};

// "2,427,5" -> ids; errors name `what` and the offending element.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& what);

}  // namespace dgemma::cli
