#include "generation_flags.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>

#include "dgemma/error.h"

namespace dgemma::cli {
namespace {

int64_t to_int(const std::string& s, const std::string& flag) {
  const std::vector<int64_t> v = parse_int_list(s, flag);
  if (v.size() != 1) throw Error("option " + flag + ": expected one integer, got '" + s + "'");
  return v[0];
}

double to_double(const std::string& s, const std::string& flag) {
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw Error("option " + flag + ": expected a number, got '" + s + "'");
  return v;
}

}  // namespace

std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& what) {
  if (text.empty()) throw Error(what + ": empty list");
  std::vector<int32_t> out;
  for (const int64_t v : parse_int_list(text, what)) {
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
      throw Error(what + ": token id " + std::to_string(v) + " is out of range");
    out.push_back(int32_t(v));
  }
  return out;
}

void GenerationFlags::add_to(FlagParser& p) {
  const std::string from = " (default: from generation_config.json)";
  p.add_string("--generation-config", &generation_config,
               "generation_config.json to use (default: DIR/generation_config.json)", "FILE");
  p.add_string("-n,--max-new-tokens", &max_new_tokens,
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
  p.add_int("-s,--seed", &seed, "random seed (-1: a random one, printed in the summary)");
}

GenerationConfig GenerationFlags::resolve(const std::string& model_dir, bool quiet) const {
  const std::string path = generation_config.empty() ? model_dir : generation_config;
  if (!generation_config.empty() && !std::filesystem::exists(generation_config))
    throw Error("--generation-config: " + generation_config + " does not exist");
  LoadedGenerationConfig loaded = load_generation_config(path);
  if (!loaded.file_found && !quiet)
    std::fprintf(stderr, "warning: no generation_config.json in %s; using the published defaults (spec §3.1)\n",
                 model_dir.c_str());
  GenerationConfig c = loaded.config;
  if (!max_new_tokens.empty()) c.max_new_tokens = to_int(max_new_tokens, "--max-new-tokens");
  if (!max_denoising_steps.empty()) c.max_denoising_steps = to_int(max_denoising_steps, "--max-denoising-steps");
  if (!stability_threshold.empty()) c.stability_threshold = to_int(stability_threshold, "--stability-threshold");
  if (!confidence_threshold.empty())
    c.confidence_threshold = to_double(confidence_threshold, "--confidence-threshold");
  if (!entropy_bound.empty()) c.entropy_bound = to_double(entropy_bound, "--entropy-bound");
  if (!t_min.empty()) c.t_min = to_double(t_min, "--t-min");
  if (!t_max.empty()) c.t_max = to_double(t_max, "--t-max");
  if (!eos_token_id.empty()) c.eos_token_ids = parse_token_ids(eos_token_id, "--eos-token-id");
  if (!pad_token_id.empty()) {
    const std::vector<int32_t> pad = parse_token_ids(pad_token_id, "--pad-token-id");
    if (pad.size() != 1) throw Error("--pad-token-id: expected one id, got '" + pad_token_id + "'");
    c.pad_token_id = pad[0];
  }
  // max_length in a file only applies while max_new_tokens is the default
  // (spec §3.4); an explicit -n must win.
  if (!max_new_tokens.empty()) c.max_length = 0;
  validate_generation_config(c, "generation parameters (" + loaded.path + " + flags)");
  return c;
}

uint64_t GenerationFlags::resolve_seed() const {
  if (seed >= 0) return uint64_t(seed);
  if (seed != -1) throw Error("--seed must be >= 0 or -1 (random), got " + std::to_string(seed));
  std::random_device rd;
  return (uint64_t(rd()) << 32 | rd()) & 0x7fffffffffffffffULL;
}

}  // namespace dgemma::cli
