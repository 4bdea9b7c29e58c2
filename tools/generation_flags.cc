#include "generation_flags.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "dgemma/error.h"
#include "generate/rng.h"
#include "checkpoint/checkpoint_source.h"
#include "checkpoint/config.h"

namespace dgemma::cli {
namespace {

int64_t to_int(const std::string& s, const std::string& flag, int64_t min) {
  const std::vector<int64_t> v = parse_int_list(s, flag);
  if (v.size() != 1) throw UsageError("option " + flag + ": expected one integer, got '" + s + "'");
  if (v[0] < min) throw UsageError("option " + flag + ": expected an integer >= " + std::to_string(min) + ", got " + s);
  return v[0];
}

double to_double(const std::string& s, const std::string& flag) {
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw UsageError("option " + flag + ": expected a number, got '" + s + "'");
  return v;
}

std::string config_path(const std::string& model_dir, const std::string& model_config) {
  return model_config.empty() ? (std::filesystem::path(model_dir) / "config.json").string() : model_config;
}

// The sampler defaults a GGUF file carries (docs/formats.md §5.3) over
// dgemma's.
LoadedGenerationConfig gguf_generation_config(const std::string& path) {
  LoadedGenerationConfig loaded;
  loaded.file_found = true;
  loaded.path = path;
  const GgufSamplerDefaults s = gguf_sampler_defaults(GgufModelFiles::open(path).keys());
  GenerationConfig& c = loaded.config;
  if (s.max_denoising_steps) c.max_denoising_steps = *s.max_denoising_steps;
  if (s.t_min) c.t_min = *s.t_min;
  if (s.t_max) c.t_max = *s.t_max;
  if (s.entropy_bound) c.entropy_bound = *s.entropy_bound;
  if (s.stability_threshold) c.stability_threshold = *s.stability_threshold;
  if (s.confidence_threshold) c.confidence_threshold = *s.confidence_threshold;
  validate_generation_config(c, path + ": diffusion.eb_* keys");
  return loaded;
}

}  // namespace

std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& what) {
  // Commas separate fields; inside a field, whitespace and the brackets of a
  // JSON list separate ids. "1,,2" (an empty field) is an error.
  std::vector<int32_t> out;
  const auto is_space = [](char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '[' || ch == ']';
  };
  size_t field_start = 0;
  const bool has_comma = text.find(',') != std::string::npos;
  while (field_start <= text.size()) {
    size_t field_end = text.find(',', field_start);
    if (field_end == std::string::npos) field_end = text.size();
    size_t items = 0;
    for (size_t i = field_start; i < field_end;) {
      if (is_space(text[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < field_end && !is_space(text[j])) ++j;
      const std::string item = text.substr(i, j - i);
      int64_t v = 0;
      const auto r = std::from_chars(item.data(), item.data() + item.size(), v);
      if (r.ec != std::errc() || r.ptr != item.data() + item.size())
        throw UsageError(what + ": '" + item +
                         "' is not a token id: expected an integer (ids separated by commas or "
                         "spaces, or a JSON list)");
      if (v < 0 || v > std::numeric_limits<int32_t>::max())
        throw UsageError(what + ": token id " + std::to_string(v) + " is out of range");
      out.push_back(int32_t(v));
      ++items;
      i = j;
    }
    if (items == 0 && has_comma) throw UsageError(what + ": empty element in list '" + text + "'");
    field_start = field_end + 1;
  }
  if (out.empty()) throw UsageError(what + ": empty list");
  return out;
}

int64_t model_canvas_length(const std::string& model_dir, const std::string& model_config) {
  return load_checkpoint_config(model_dir, model_config).canvas_length;
}

void check_context_fits(const GenerationConfig& config, int64_t prompt_tokens, int64_t cached, int64_t canvas_length) {
  if (config.context_size <= 0) return;
  const int64_t limit = config.context_size;
  const std::string what = "the context size " + std::to_string(limit) + " (-c/--ctx-size)";
  if (prompt_tokens + cached > limit)
    throw Error("the prompt (" + std::to_string(prompt_tokens) + " tokens" +
                (cached ? " + " + std::to_string(cached) + " cached" : std::string()) + ") exceeds " + what);
  const int64_t need = reply_positions(config.max_new_tokens, canvas_length);
  if (need > limit - prompt_tokens - cached) {
    const int64_t room = (limit - prompt_tokens - cached) / canvas_length * canvas_length;
    throw Error("-n " + std::to_string(config.max_new_tokens) + " needs " + std::to_string(need) +
                " positions (whole canvases of " + std::to_string(canvas_length) + ") after a prompt of " +
                std::to_string(prompt_tokens + cached) + " tokens, more than " + what + " allows; at most -n " +
                std::to_string(room) + " fits (or raise -c)");
  }
}

void GenerationFlags::add_to(FlagParser& p) {
  const std::string from = " (default: from generation_config.json)";
  p.add_string("--generation-config", &generation_config,
               "generation_config.json to use (default: DIR/generation_config.json)", "FILE");
  p.add_string("-n,--max-new-tokens,--n-predict", &max_new_tokens,
               "tokens to generate; whole canvases are generated and the output is trimmed" + from, "N");
  p.add_string("--max-denoising-steps", &max_denoising_steps, "denoising steps per canvas" + from, "N");
  p.add_string("--stability-threshold", &stability_threshold,
               "consecutive equal argmax canvases needed to stop early" + from, "K");
  p.add_string("--confidence-threshold", &confidence_threshold, "mean entropy (nats) below which to stop" + from, "X");
  p.add_string("--entropy-bound", &entropy_bound, "entropy budget of the entropy-bound sampler" + from, "X");
  p.add_string("--t-min", &t_min, "temperature at the last step" + from, "X");
  p.add_string("--t-max", &t_max, "temperature at the first step" + from, "X");
  p.add_string("--eos-token-id", &eos_token_id, "comma-separated EOS ids" + from, "IDS");
  p.add_string("--pad-token-id", &pad_token_id, "id written after the first EOS of a canvas" + from, "ID");
  p.add_string("--temp,--temperature", &temperature,
               "sampling temperature of the first denoising step (the schedule keeps its t_min/t_max shape); "
               "0 = greedy (argmax; seed 0 unless --seed)" +
                   from,
               "T");
  p.add_string("-c,--ctx-size", &ctx_size,
               "context size in tokens: prompt + conversation + generated canvases must fit; 0 = no limit "
               "(default: the model's max_position_embeddings)",
               "N");
  p.add_int("-s,--seed", &seed, "random seed (-1: a random one, printed in the summary)");
  p.add_string("--top-k", &top_k, "draw each position only from its K most likely tokens (default: 0 = off)", "K");
  p.add_string("--top-p", &top_p,
               "draw each position only from its most likely tokens whose probability reaches P (default: 1 = off)",
               "P");
  p.add_string("--min-p", &min_p,
               "draw each position only from tokens at least P x its top probability (default: 0 = off)", "P");
  p.add_string("--presence-penalty", &presence_penalty,
               "subtract X from the logit of every token already committed by this reply, in [-2, 2] (default: 0)",
               "X");
  p.add_string("--frequency-penalty", &frequency_penalty,
               "subtract X per occurrence from the logits of tokens this reply committed, in [-2, 2] (default: 0)",
               "X");
  p.add_string("--repeat-penalty", &repeat_penalty,
               "divide positive logits (multiply negative ones) of tokens this reply committed by R > 0 "
               "(default: 1 = off)",
               "R");
}

void GenerationFlags::apply_sampling_flags(GenerationConfig& c) const {
  // Each flag is checked against the rule the server applies to the request
  // field of the same name (sampling_control_rule); a bad value is a usage
  // error.
  auto number = [](const std::string& text, const char* flag, const char* field) {
    const double v = to_double(text, flag);
    if (const std::string rule = sampling_control_rule(field, v); !rule.empty())
      throw UsageError(std::string("option ") + flag + ": " + rule + ", got '" + text + "'");
    return v;
  };
  if (!top_k.empty()) {
    const int64_t k = to_int(top_k, "--top-k", INT64_MIN);
    if (const std::string rule = sampling_control_rule("top_k", double(k)); !rule.empty())
      throw UsageError("option --top-k: " + rule + ", got '" + top_k + "'");
    c.top_k = k;
  }
  if (!top_p.empty()) c.top_p = number(top_p, "--top-p", "top_p");
  if (!min_p.empty()) c.min_p = number(min_p, "--min-p", "min_p");
  if (!presence_penalty.empty())
    c.presence_penalty = number(presence_penalty, "--presence-penalty", "presence_penalty");
  if (!frequency_penalty.empty())
    c.frequency_penalty = number(frequency_penalty, "--frequency-penalty", "frequency_penalty");
  if (!repeat_penalty.empty()) c.repeat_penalty = number(repeat_penalty, "--repeat-penalty", "repeat_penalty");
}

GenerationConfig GenerationFlags::resolve(const std::string& model_dir, bool quiet,
                                          const std::string& model_config) const {
  const std::string path = generation_config.empty() ? model_dir : generation_config;
  if (!generation_config.empty() && !std::filesystem::exists(generation_config))
    throw Error("--generation-config: " + generation_config + " does not exist");
  const bool gguf = generation_config.empty() && is_gguf_checkpoint(model_dir);
  LoadedGenerationConfig loaded = gguf ? gguf_generation_config(model_dir) : load_generation_config(path);
  if (!loaded.file_found && !quiet)
    std::fprintf(stderr,
                 "warning: no generation_config.json in %s; using the published defaults (docs/model.md §3.1)\n",
                 model_dir.c_str());
  GenerationConfig c = loaded.config;
  if (!max_new_tokens.empty()) c.max_new_tokens = to_int(max_new_tokens, "-n/--max-new-tokens", 1);
  if (!max_denoising_steps.empty()) c.max_denoising_steps = to_int(max_denoising_steps, "--max-denoising-steps", 1);
  if (!stability_threshold.empty()) c.stability_threshold = to_int(stability_threshold, "--stability-threshold", 0);
  if (!confidence_threshold.empty()) c.confidence_threshold = to_double(confidence_threshold, "--confidence-threshold");
  if (!entropy_bound.empty()) c.entropy_bound = to_double(entropy_bound, "--entropy-bound");
  if (!t_min.empty()) c.t_min = to_double(t_min, "--t-min");
  if (!t_max.empty()) c.t_max = to_double(t_max, "--t-max");
  if (!eos_token_id.empty()) c.eos_token_ids = parse_token_ids(eos_token_id, "--eos-token-id");
  if (!pad_token_id.empty()) {
    const std::vector<int32_t> pad = parse_token_ids(pad_token_id, "--pad-token-id");
    if (pad.size() != 1) throw UsageError("option --pad-token-id: expected one id, got '" + pad_token_id + "'");
    c.pad_token_id = pad[0];
  }
  // max_length in a file only applies while max_new_tokens is the default
  // (docs/model.md §3.4); an explicit -n must win.
  if (!max_new_tokens.empty()) c.max_length = 0;
  // The file's values were checked as it was read, so what fails now is a
  // flag's value (or how it combines with the file): a usage error.
  parse_flag_value("", [&] { validate_generation_config(c, "generation parameters (" + loaded.path + " + flags)"); });
  if (!temperature.empty()) {
    const double t = to_double(temperature, "--temp");
    if (!(t >= 0.0) || t > 1e6)
      throw UsageError("option --temp: expected a temperature >= 0 (0 = greedy), got '" + temperature + "'");
    apply_temperature_override(c, t, "--temp");
  }
  apply_sampling_flags(c);
  if (!ctx_size.empty()) {
    c.context_size = to_int(ctx_size, "--ctx-size", INT64_MIN);
    if (c.context_size < 0) throw UsageError("option --ctx-size: expected a size >= 0 (0 = no limit), got " + ctx_size);
  } else if (is_gguf_checkpoint(model_dir)) {
    c.context_size = load_checkpoint_config(model_dir).max_position_embeddings;
  } else if (const std::string cfg = config_path(model_dir, model_config); std::filesystem::exists(cfg)) {
    c.context_size = load_model_config(cfg).max_position_embeddings;
  }
  return c;
}

uint64_t GenerationFlags::resolve_seed() const {
  if (seed >= 0) return uint64_t(seed);
  if (seed != -1) throw UsageError("--seed must be >= 0 or -1 (random), got " + std::to_string(seed));
  if (!temperature.empty() && to_double(temperature, "--temp") == 0.0) return 0;  // greedy: repeatable
  return random_seed();  // < 2^53: exact in a JSON number read by JavaScript
}

}  // namespace dgemma::cli
