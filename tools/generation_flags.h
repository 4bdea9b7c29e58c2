#pragma once
// Flags shared by `generate`, `run` and `chat`: generation parameters that
// override the checkpoint's generation_config.json (flat or nested spelling,
// docs/model.md §3.1), and the random seed. A flag left out keeps the file's value, so
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
  std::string temperature;  // --temp: OpenAI-style, 0 = greedy
  std::string ctx_size;     // -c/--ctx-size; default: the model's max_position_embeddings
  // Sampling controls (docs/model.md §3.7); empty = off.
  std::string top_k, top_p, min_p, presence_penalty, frequency_penalty, repeat_penalty;
  int64_t seed = -1;

  void add_to(FlagParser& p);
  // Reads the config for `model_dir` (a GGUF file: its diffusion.eb_* keys
  // over the defaults, docs/formats.md §5.3) and applies the overrides. Prints a
  // warning to stderr when no generation_config.json exists (docs/model.md §6.3: a
  // silent fallback changes stopping and EOS behaviour) unless `quiet`.
  // context_size comes from --ctx-size, else from max_position_embeddings
  // of `model_config` (default DIR/config.json; unlimited when it is absent).
  GenerationConfig resolve(const std::string& model_dir, bool quiet, const std::string& model_config = "") const;
  // The seed to use: --seed; 0 with --temp 0 (greedy output is then
  // repeatable run to run); else a fresh random one when it is -1.
  uint64_t resolve_seed() const;
  // Sets the sampling controls given as flags (--top-k ... --repeat-penalty);
  // an out-of-range value is a UsageError naming the flag.
  void apply_sampling_flags(GenerationConfig& c) const;
};

// "2,427,5", "2 427 5", "[2, 427, 5]" (what `dgemma tokenize` prints) -> ids;
// errors name `what` and the offending element.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& what);

// Refuses (dgemma::Error naming -c/--ctx-size and -n) a generation that
// cannot fit in config.context_size: `prompt_tokens` (+ `cached`) plus whole
// canvases of `canvas_length` for max_new_tokens. Lets the CLI refuse before
// it loads the model; generate() checks again.
void check_context_fits(const GenerationConfig& config, int64_t prompt_tokens, int64_t cached, int64_t canvas_length);
// Canvas length of the model in `model_dir` (or `model_config`), from
// config.json or a GGUF file's keys.
int64_t model_canvas_length(const std::string& model_dir, const std::string& model_config = "");

}  // namespace dgemma::cli
