#include "generate/generation_config.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "core/json.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

constexpr int64_t kReferenceDefaultMaxNewTokens = 256;  // HF `_prepare_generated_length`

std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

[[noreturn]] void invalid(const std::string& source, std::string_view field, const std::string& value,
                          std::string_view rule) {
  throw Error(source + ": " + std::string(field) + " = " + value + ": " + std::string(rule));
}

// Keys that only describe how the file was written; they never change
// generation, so they are not reported as ignored.
bool is_bookkeeping_key(std::string_view key) {
  return key == "transformers_version" || key == "return_dict_in_generate" || key == "_from_model_config" ||
         key == "_commit_hash";
}

int32_t as_token_id(const json::Value& v, const std::string& what) {
  int64_t id = v.as_int(what);
  if (id < 0 || id > std::numeric_limits<int32_t>::max())
    throw Error(what + " = " + std::to_string(id) + ": must be a token id in [0, 2^31)");
  return int32_t(id);
}

// One field that may be spelled flat or nested; both spellings must agree.
template <typename T>
struct Spelled {
  std::optional<T> flat, nested;
  std::string nested_name;
  void resolve(T& out, const std::string& source, std::string_view flat_name) const {
    if (flat && nested && *flat != *nested) {
      std::ostringstream os;
      os << source << ": " << flat_name << " = " << *flat << " conflicts with " << nested_name << " = " << *nested
         << "; give it once";
      throw Error(os.str());
    }
    if (nested) out = *nested;
    if (flat) out = *flat;
  }
};

}  // namespace

bool has_sampling_filters(const GenerationConfig& c) { return c.top_k != 0 || c.top_p != 1.0 || c.min_p != 0.0; }

bool has_penalties(const GenerationConfig& c) {
  return c.presence_penalty != 0.0 || c.frequency_penalty != 0.0 || c.repeat_penalty != 1.0;
}

std::string sampling_control_rule(std::string_view field, double v) {
  if (field == "top_k")
    return v >= 0.0 && v == std::floor(v) && v <= double(std::numeric_limits<int32_t>::max())
               ? ""
               : "must be an integer >= 0 (0 = off)";
  if (field == "top_p") return v > 0.0 && v <= 1.0 ? "" : "must be in (0, 1] (1 = off)";
  if (field == "min_p") return v >= 0.0 && v <= 1.0 ? "" : "must be in [0, 1] (0 = off)";
  if (field == "presence_penalty" || field == "frequency_penalty")
    return v >= -2.0 && v <= 2.0 ? "" : "must be in [-2, 2] (0 = off)";
  if (field == "repeat_penalty") return v > 0.0 && std::isfinite(v) ? "" : "must be a finite number > 0 (1 = off)";
  return "is not a sampling control";
}

void validate_generation_config(const GenerationConfig& c, const std::string& source) {
  if (c.max_new_tokens <= 0)
    invalid(source, "max_new_tokens", std::to_string(c.max_new_tokens), "must be a positive integer");
  if (c.max_denoising_steps <= 0)
    invalid(source, "max_denoising_steps", std::to_string(c.max_denoising_steps), "must be a positive integer");
  if (c.max_length < 0) invalid(source, "max_length", std::to_string(c.max_length), "must be a positive integer");
  if (!(c.entropy_bound > 0.0))
    invalid(source, "sampler_config.entropy_bound", format_double(c.entropy_bound), "must be > 0");
  if (!(c.t_min >= 0.0)) invalid(source, "t_min", format_double(c.t_min), "must be >= 0");
  if (!(c.t_max >= 0.0)) invalid(source, "t_max", format_double(c.t_max), "must be >= 0");
  // The reference rejects t_max <= t_min (HF `validate`); keeping that rule
  // also guarantees every step temperature is > 0 (docs/model.md §3.2).
  if (!(c.t_max > c.t_min))
    invalid(source, "t_max", format_double(c.t_max),
            "must be greater than t_min = " + format_double(c.t_min) + " (as in the reference)");
  if (c.stability_threshold < 0)
    invalid(source, "stability_threshold", std::to_string(c.stability_threshold), "must be an integer >= 0");
  if (!(c.confidence_threshold > 0.0))
    invalid(source, "confidence_threshold", format_double(c.confidence_threshold), "must be > 0");
  for (int32_t id : c.eos_token_ids)
    if (id < 0) invalid(source, "eos_token_id", std::to_string(id), "must be a token id >= 0");
  if (c.pad_token_id < 0) invalid(source, "pad_token_id", std::to_string(c.pad_token_id), "must be a token id >= 0");
  if (c.context_size < 0)
    invalid(source, "context_size", std::to_string(c.context_size), "must be >= 0 (0 = no limit)");
  const std::pair<const char*, double> controls[] = {
      {"top_k", double(c.top_k)},
      {"top_p", c.top_p},
      {"min_p", c.min_p},
      {"presence_penalty", c.presence_penalty},
      {"frequency_penalty", c.frequency_penalty},
      {"repeat_penalty", c.repeat_penalty},
  };
  for (const auto& [field, value] : controls)
    if (const std::string rule = sampling_control_rule(field, value); !rule.empty())
      invalid(source, field, format_double(value), rule);
}

void apply_temperature_override(GenerationConfig& c, double temperature, const std::string& source) {
  if (!(temperature >= 0.0) || !std::isfinite(temperature))
    invalid(source, "temperature", format_double(temperature), "must be a finite number >= 0 (0 = greedy)");
  if (temperature == 0.0) {
    c.greedy = true;
    return;
  }
  c.greedy = false;
  c.t_min = temperature * (c.t_min / c.t_max);
  c.t_max = temperature;
}

int64_t reply_positions(int64_t max_new_tokens, int64_t canvas_length) {
  const int64_t n = max_new_tokens;
  if (n <= 0 || canvas_length <= 0) return 0;
  const int64_t canvases = n / canvas_length + (n % canvas_length != 0 ? 1 : 0);
  if (canvases > std::numeric_limits<int64_t>::max() / canvas_length) return std::numeric_limits<int64_t>::max();
  return canvases * canvas_length;
}

int64_t resolve_max_new_tokens(const GenerationConfig& config, int64_t cur_len) {
  if (config.max_length > 0 && config.max_new_tokens == kReferenceDefaultMaxNewTokens)
    return config.max_length - cur_len;
  return config.max_new_tokens;
}

GenerationConfig parse_generation_config(std::string_view json_text, const std::string& source,
                                         std::vector<std::string>* ignored_keys) {
  json::ParseOptions options;
  options.source = source;
  const json::Value root = json::parse(json_text, options);
  const json::Object& object = root.as_object(source);

  GenerationConfig c;
  Spelled<double> t_min, t_max, confidence;
  Spelled<int64_t> stability;
  t_min.nested_name = "linear_temperature_schedule_config.t_min";
  t_max.nested_name = "linear_temperature_schedule_config.t_max";
  confidence.nested_name = "diffusion_stopping_config.confidence_threshold";
  stability.nested_name = "diffusion_stopping_config.stability_threshold";

  auto ignore = [&](const std::string& key, const json::Value& value) {
    if (ignored_keys != nullptr && !value.is_null()) ignored_keys->push_back(key);
  };
  auto what = [&](std::string_view key) { return source + ": " + std::string(key); };

  for (const auto& [key, value] : object) {
    if (value.is_null() || is_bookkeeping_key(key)) continue;  // null = not given (HF None)
    if (key == "max_new_tokens") {
      c.max_new_tokens = value.as_int(what(key));
    } else if (key == "max_denoising_steps") {
      c.max_denoising_steps = value.as_int(what(key));
    } else if (key == "max_length") {
      c.max_length = value.as_int(what(key));
    } else if (key == "t_min") {
      t_min.flat = value.as_double(what(key));
    } else if (key == "t_max") {
      t_max.flat = value.as_double(what(key));
    } else if (key == "stability_threshold") {
      stability.flat = value.as_int(what(key));
    } else if (key == "confidence_threshold") {
      confidence.flat = value.as_double(what(key));
    } else if (key == "pad_token_id") {
      c.pad_token_id = as_token_id(value, what(key));
    } else if (key == "bos_token_id") {
      c.bos_token_id = as_token_id(value, what(key));
    } else if (key == "eos_token_id") {
      // int or list of ints (HF accepts both).
      c.eos_token_ids.clear();
      if (value.is_array()) {
        const json::Array& ids = value.as_array(what(key));
        for (size_t i = 0; i < ids.size(); ++i)
          c.eos_token_ids.push_back(as_token_id(ids[i], what(key) + "[" + std::to_string(i) + "]"));
      } else {
        c.eos_token_ids.push_back(as_token_id(value, what(key)));
      }
    } else if (key == "sampler_config") {
      for (const auto& [sub, v] : value.as_object(what(key))) {
        const std::string name = key + "." + sub;
        if (v.is_null()) continue;
        if (sub == "_cls_name") {
          // Only the entropy-bound sampler exists in the reference; any other
          // sampler would silently change the algorithm, so refuse it.
          const std::string& cls = v.as_string(what(name));
          if (cls != "EntropyBoundSamplerConfig")
            throw Error(what(name) + " = \"" + cls +
                        "\": unsupported sampler (only EntropyBoundSamplerConfig is implemented)");
        } else if (sub == "entropy_bound") {
          c.entropy_bound = v.as_double(what(name));
        } else {
          ignore(name, v);
        }
      }
    } else if (key == "linear_temperature_schedule_config") {  // pre-release spelling
      for (const auto& [sub, v] : value.as_object(what(key))) {
        const std::string name = key + "." + sub;
        if (v.is_null()) continue;
        if (sub == "_cls_name") {
          const std::string& cls = v.as_string(what(name));
          if (cls != "LinearTemperatureScheduleConfig")
            throw Error(what(name) + " = \"" + cls +
                        "\": unsupported temperature schedule (only LinearTemperatureScheduleConfig)");
        } else if (sub == "t_min") {
          t_min.nested = v.as_double(what(name));
        } else if (sub == "t_max") {
          t_max.nested = v.as_double(what(name));
        } else {
          ignore(name, v);
        }
      }
    } else if (key == "diffusion_stopping_config") {  // pre-release spelling
      // Its _cls_name spelling is not documented anywhere we could read, so
      // it is not checked; the two thresholds are what define the criterion.
      for (const auto& [sub, v] : value.as_object(what(key))) {
        const std::string name = key + "." + sub;
        if (v.is_null() || sub == "_cls_name") continue;
        if (sub == "stability_threshold") {
          stability.nested = v.as_int(what(name));
        } else if (sub == "confidence_threshold") {
          confidence.nested = v.as_double(what(name));
        } else {
          ignore(name, v);
        }
      }
    } else {
      ignore(key, value);
    }
  }
  t_min.resolve(c.t_min, source, "t_min");
  t_max.resolve(c.t_max, source, "t_max");
  stability.resolve(c.stability_threshold, source, "stability_threshold");
  confidence.resolve(c.confidence_threshold, source, "confidence_threshold");
  validate_generation_config(c, source);
  return c;
}

LoadedGenerationConfig load_generation_config(const std::string& path) {
  namespace fs = std::filesystem;
  LoadedGenerationConfig out;
  std::error_code ec;
  out.path = fs::is_directory(path, ec) ? (fs::path(path) / "generation_config.json").string() : path;
  if (!fs::exists(out.path, ec)) return out;  // defaults; file_found = false

  std::ifstream in(out.path, std::ios::binary);
  if (!in) throw Error(out.path + ": cannot open generation config");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(out.path + ": read error");
  out.config = parse_generation_config(text.str(), out.path, &out.ignored_keys);
  out.file_found = true;
  return out;
}

}  // namespace dgemma
