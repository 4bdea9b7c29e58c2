// generation_config.json loading: both spellings (docs/model.md §3.1), defaults for a
// missing file (docs/model.md §6.3 pitfall 3), and errors that name file, field, value.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "dgemma/error.h"
#include "generate/generation_config.h"

namespace dgemma {
namespace {

const std::string kGoldenA = std::string(DGEMMA_TEST_DATA) + "/golden_a";

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "dgemma_genconfig_" + name + ".json";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Runs `f`, expects a dgemma::Error whose message contains every needle.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "expected dgemma::Error";
  } catch (const Error& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "missing \"" << n << "\" in: " << e.what();
  }
}

TEST(GenerationConfig, DefaultsArePublishedCheckpointValues) {
  const GenerationConfig c;
  EXPECT_EQ(c.max_new_tokens, 256);
  EXPECT_EQ(c.max_denoising_steps, 48);
  EXPECT_EQ(c.entropy_bound, 0.1);
  EXPECT_EQ(c.t_min, 0.4);
  EXPECT_EQ(c.t_max, 0.8);
  EXPECT_EQ(c.stability_threshold, 1);
  EXPECT_EQ(c.confidence_threshold, 0.005);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 106, 50}));
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_NO_THROW(validate_generation_config(c, "defaults"));
}

TEST(GenerationConfig, LoadsGoldenAFlatFile) {
  const LoadedGenerationConfig loaded = load_generation_config(kGoldenA + "/generation_config.json");
  EXPECT_TRUE(loaded.file_found);
  const GenerationConfig& c = loaded.config;
  EXPECT_EQ(c.max_new_tokens, 32);
  EXPECT_EQ(c.max_denoising_steps, 10);
  EXPECT_EQ(c.entropy_bound, 0.1);
  EXPECT_EQ(c.t_min, 0.4);
  EXPECT_EQ(c.t_max, 0.8);
  EXPECT_EQ(c.stability_threshold, 1);
  EXPECT_EQ(c.confidence_threshold, 0.005);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.bos_token_id, 2);
  // return_dict_in_generate / transformers_version are bookkeeping only.
  EXPECT_TRUE(loaded.ignored_keys.empty());
}

TEST(GenerationConfig, AcceptsCheckpointFolder) {
  const LoadedGenerationConfig loaded = load_generation_config(kGoldenA);
  EXPECT_TRUE(loaded.file_found);
  EXPECT_EQ(loaded.path, kGoldenA + "/generation_config.json");
  EXPECT_EQ(loaded.config.max_denoising_steps, 10);
}

TEST(GenerationConfig, MissingFileGivesDefaultsAndSaysSo) {
  const std::string dir = ::testing::TempDir() + "dgemma_genconfig_no_such_dir";
  std::filesystem::create_directories(dir);
  const LoadedGenerationConfig loaded = load_generation_config(dir);
  EXPECT_FALSE(loaded.file_found);
  EXPECT_EQ(loaded.path, dir + "/generation_config.json");
  EXPECT_EQ(loaded.config.max_denoising_steps, 48);
  EXPECT_EQ(loaded.config.eos_token_ids, (std::vector<int32_t>{1, 106, 50}));
}

TEST(GenerationConfig, NestedPreReleaseSpelling) {
  const std::string path = write_temp("nested", R"({
    "max_new_tokens": 512,
    "max_denoising_steps": 12,
    "sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": 0.25},
    "linear_temperature_schedule_config": {"_cls_name": "LinearTemperatureScheduleConfig", "t_min": 0.3, "t_max": 0.9},
    "diffusion_stopping_config": {"stability_threshold": 2, "confidence_threshold": 0.01},
    "eos_token_id": 106,
    "pad_token_id": 0
  })");
  const LoadedGenerationConfig loaded = load_generation_config(path);
  const GenerationConfig& c = loaded.config;
  EXPECT_EQ(c.max_new_tokens, 512);
  EXPECT_EQ(c.max_denoising_steps, 12);
  EXPECT_EQ(c.entropy_bound, 0.25);
  EXPECT_EQ(c.t_min, 0.3);
  EXPECT_EQ(c.t_max, 0.9);
  EXPECT_EQ(c.stability_threshold, 2);
  EXPECT_EQ(c.confidence_threshold, 0.01);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{106}));  // a bare int is a one-element list
  EXPECT_TRUE(loaded.ignored_keys.empty());
}

TEST(GenerationConfig, SameValueInBothSpellingsIsFine) {
  const GenerationConfig c = parse_generation_config(
      R"({"t_min": 0.3, "linear_temperature_schedule_config": {"t_min": 0.3, "t_max": 0.7}})", "both.json");
  EXPECT_EQ(c.t_min, 0.3);
  EXPECT_EQ(c.t_max, 0.7);
}

TEST(GenerationConfig, NullMeansNotGiven) {
  const GenerationConfig c =
      parse_generation_config(R"({"max_length": null, "t_min": null, "cache_config": null})", "nulls.json");
  EXPECT_EQ(c.t_min, 0.4);
  EXPECT_EQ(c.max_length, 0);
}

TEST(GenerationConfig, ReportsIgnoredKeys) {
  std::vector<std::string> ignored;
  parse_generation_config(R"({"top_k": 5, "cache_implementation": "static", "transformers_version": "5.8.0.dev0",
                              "sampler_config": {"entropy_bound": 0.1, "extra": 1}})",
                          "ignored.json", &ignored);
  std::sort(ignored.begin(), ignored.end());
  EXPECT_EQ(ignored, (std::vector<std::string>{"cache_implementation", "sampler_config.extra", "top_k"}));
}

TEST(GenerationConfig, ErrorsNameFileFieldAndValue) {
  const std::string bad_steps = write_temp("bad_steps", R"({"max_denoising_steps": -3})");
  expect_error([&] { load_generation_config(bad_steps); }, {bad_steps, "max_denoising_steps", "-3"});

  expect_error([] { parse_generation_config(R"({"max_new_tokens": 0})", "g.json"); },
               {"g.json", "max_new_tokens", "0"});
  expect_error([] { parse_generation_config(R"({"max_new_tokens": "many"})", "g.json"); },
               {"g.json", "max_new_tokens"});
  expect_error([] { parse_generation_config(R"({"max_denoising_steps": 2.5})", "g.json"); },
               {"g.json", "max_denoising_steps", "2.5"});
  // The reference rejects t_max <= t_min (HF DiffusionGemmaGenerationConfig.validate).
  expect_error([] { parse_generation_config(R"({"t_min": 0.9, "t_max": 0.3})", "g.json"); },
               {"g.json", "t_max", "0.3", "t_min", "0.9"});
  expect_error([] { parse_generation_config(R"({"t_min": 0.5, "t_max": 0.5})", "g.json"); }, {"t_max", "0.5"});
  expect_error([] { parse_generation_config(R"({"t_min": -0.1})", "g.json"); }, {"t_min", "-0.1"});
  expect_error([] { parse_generation_config(R"({"stability_threshold": -1})", "g.json"); },
               {"stability_threshold", "-1"});
  expect_error([] { parse_generation_config(R"({"confidence_threshold": 0})", "g.json"); },
               {"confidence_threshold", "0"});
  expect_error(
      [] {
        parse_generation_config(
            R"({"sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": -1}})", "g.json");
      },
      {"entropy_bound", "-1"});
  expect_error([] { parse_generation_config(R"({"eos_token_id": [1, -2]})", "g.json"); }, {"eos_token_id[1]", "-2"});
}

TEST(GenerationConfig, UnknownSamplerIsRefusedByName) {
  expect_error(
      [] {
        parse_generation_config(R"({"sampler_config": {"_cls_name": "AutoRegressiveEulerSamplerConfig"}})", "g.json");
      },
      {"g.json", "sampler_config._cls_name", "AutoRegressiveEulerSamplerConfig"});
  expect_error(
      [] {
        parse_generation_config(R"({"linear_temperature_schedule_config": {"_cls_name": "CosineSchedule"}})", "g.json");
      },
      {"CosineSchedule"});
}

TEST(GenerationConfig, ConflictingSpellingsAreAnError) {
  expect_error(
      [] {
        parse_generation_config(
            R"({"stability_threshold": 1, "diffusion_stopping_config": {"stability_threshold": 3}})", "g.json");
      },
      {"g.json", "stability_threshold", "diffusion_stopping_config.stability_threshold"});
}

TEST(GenerationConfig, InvalidJsonNamesTheFile) {
  const std::string path = write_temp("broken", R"({"max_new_tokens": 5,})");
  expect_error([&] { load_generation_config(path); }, {path});
}

TEST(GenerationConfig, MaxLengthOnlyAppliesWithDefaultMaxNewTokens) {
  GenerationConfig c;
  c.max_length = 300;
  EXPECT_EQ(resolve_max_new_tokens(c, 20), 280);  // reference `_prepare_generated_length`
  c.max_new_tokens = 64;
  EXPECT_EQ(resolve_max_new_tokens(c, 20), 64);
  c.max_length = 0;
  c.max_new_tokens = 256;
  EXPECT_EQ(resolve_max_new_tokens(c, 20), 256);
}

}  // namespace
}  // namespace dgemma
