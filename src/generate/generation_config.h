#pragma once
// Generation parameters of DiffusionGemma (docs/model.md §3.1) and
// the reader for a checkpoint's generation_config.json.
//
// Both spellings are accepted: the current flat keys (t_min, t_max,
// stability_threshold, confidence_threshold at top level) and the pre-release
// nested ones (linear_temperature_schedule_config {t_min, t_max},
// diffusion_stopping_config {stability_threshold, confidence_threshold}).
// Validation follows the reference `DiffusionGemmaGenerationConfig.validate`
// (HF generation_diffusion_gemma.py): positive step/token counts, t_min >= 0,
// t_max > t_min (the reference rejects t_max <= t_min, so a constant
// temperature is not expressible there either), stability_threshold >= 0,
// confidence_threshold > 0, entropy_bound > 0.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dgemma {

struct GenerationConfig {
  // Defaults = the published checkpoint's generation_config.json (docs/model.md §3.1),
  // which equal the reference class fallbacks except for eos/pad.
  int64_t max_new_tokens = 256;
  int64_t max_denoising_steps = 48;                   // N, per canvas
  double entropy_bound = 0.1;                         // EntropyBoundSamplerConfig
  double t_min = 0.4;                                 // temperature at the last step
  double t_max = 0.8;                                 // temperature at the first step
  int64_t stability_threshold = 1;                    // argmax canvases of history
  double confidence_threshold = 0.005;                // nats, mean over the canvas
  std::vector<int32_t> eos_token_ids = {1, 106, 50};  // <eos>, <turn|>, <|tool_response>
  int32_t pad_token_id = 0;
  int32_t bos_token_id = 2;  // informational (docs/model.md §3.6)
  // HF `max_length` (0 = unset). As in the reference, it only applies while
  // max_new_tokens holds the default 256; see resolve_max_new_tokens.
  int64_t max_length = 0;
  // Not in generation_config.json; set by the caller.
  // Greedy decoding (temperature 0): draw B, the per-position sample, is the
  // argmax of the step's logits instead of a random draw. Draws A and C
  // (initial canvas, renoise) still come from the seed, so greedy output is
  // repeatable for a fixed seed. The temperature schedule still sets the
  // entropies that the entropy-bound acceptance and the stop test read.
  bool greedy = false;
  // Context size: prompt + cached + generated positions may not exceed it
  // (0 = no limit beyond int32 positions). generate() refuses a request that
  // would need more, naming the limit; callers default it to the model's
  // max_position_embeddings (-c/--ctx-size).
  int64_t context_size = 0;
  // Sampling controls (docs/model.md §3.7), also set by the caller: filters of
  // draw B (top_k, top_p, min_p) and penalties on the raw logits of tokens
  // committed in earlier canvases of this generation (presence, frequency,
  // repeat). The defaults turn every one off, and then generation is exactly
  // the reference's.
  int64_t top_k = 0;               // 0 = off; else >= 1
  double top_p = 1.0;              // in (0, 1]
  double min_p = 0.0;              // in [0, 1]
  double presence_penalty = 0.0;   // in [-2, 2]
  double frequency_penalty = 0.0;  // in [-2, 2]
  double repeat_penalty = 1.0;     // > 0; 1 = off
};

// Whether any filter of draw B is on (top_k, top_p or min_p; docs/model.md §3.7).
bool has_sampling_filters(const GenerationConfig& config);
// Whether any penalty is on (presence, frequency or repeat; docs/model.md §3.7).
bool has_penalties(const GenerationConfig& config);

// The rule for each sampling control (docs/model.md §3.7), shared by the
// config check, the CLI flags and the server's request fields: "" when
// `value` is valid for `field` (top_k, top_p, min_p, presence_penalty,
// frequency_penalty, repeat_penalty), else what it must be ("must be in
// (0, 1]").
std::string sampling_control_rule(std::string_view field, double value);

// Positions `max_new_tokens` occupy in the context: whole canvases of
// `canvas_length` (docs/model.md §3.4), saturating at INT64_MAX; 0 when either is
// <= 0. The one rule the context-size checks of the CLI, the server and chat
// history use (generate() counts the same canvases).
int64_t reply_positions(int64_t max_new_tokens, int64_t canvas_length);

// Applies an OpenAI-style `temperature` (>= 0) to `config`: 0 selects greedy
// decoding (schedule unchanged); t > 0 keeps the schedule's shape (t_max at the
// first step, t_min at the last, docs/model.md §3.1) and scales it so that the first
// step runs at t. Throws dgemma::Error naming `source` for t < 0 or NaN.
void apply_temperature_override(GenerationConfig& config, double temperature, const std::string& source);

// Throws dgemma::Error naming `source`, the field and the value.
void validate_generation_config(const GenerationConfig& config, const std::string& source);

// The reference `_prepare_generated_length`: max_length wins when it is set
// and max_new_tokens equals the default 256. `cur_len` = prompt length plus
// tokens already in the cache. May return <= 0 (then nothing is generated).
int64_t resolve_max_new_tokens(const GenerationConfig& config, int64_t cur_len);

struct LoadedGenerationConfig {
  GenerationConfig config;
  // False when the file does not exist: `config` holds the defaults and the
  // caller should warn, because a missing file silently changes stopping and
  // EOS behaviour in other ports (docs/model.md §6.3 pitfall 3).
  bool file_found = false;
  std::string path;  // the file that was (or would have been) read
  // Keys present in the file that this engine does not use (e.g.
  // cache_implementation, top_k), for the caller to report. Bookkeeping keys
  // (transformers_version, return_dict_in_generate, _from_model_config,
  // _commit_hash) are not listed.
  std::vector<std::string> ignored_keys;
};

// `path` is a generation_config.json file or a checkpoint folder holding one.
// A missing file gives defaults with file_found = false; an unreadable or
// invalid one throws dgemma::Error.
LoadedGenerationConfig load_generation_config(const std::string& path);

// Parses the JSON text of a generation_config.json. `source` names it in
// errors. Keys not given keep their defaults; JSON null counts as not given.
GenerationConfig parse_generation_config(std::string_view json_text, const std::string& source,
                                         std::vector<std::string>* ignored_keys = nullptr);

}  // namespace dgemma
