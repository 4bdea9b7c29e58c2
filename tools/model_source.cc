#include "model_source.h"

#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint_source.h"
#include "dgemma/error.h"
#include "model/default_model.h"

namespace dgemma::cli {

const char* const kDefaultModelHelp =
    "Without -m, the built-in default model is used: a tiny DiffusionGemma (spec tiny-B: the real\n"
    "262,144-token Gemma tokenizer, hidden 96, 4 layers) with RANDOM WEIGHTS, generated on first use\n"
    "into $DGEMMA_CACHE/default-model-v1 (default cache: ${XDG_CACHE_HOME:-~/.cache}/dgemma). It shows\n"
    "the whole pipeline working, but its output is gibberish. For real text, download the checkpoint\n"
    "folder google/diffusiongemma-26B-A4B-it (config.json, generation_config.json, tokenizer.json,\n"
    "*.safetensors) and pass it with -m, e.g.\n"
    "  dgemma run -m ~/models/diffusiongemma-26B-A4B-it -p \"Hello\"";

std::string resolve_model_dir(const ModelFlags& mf, bool quiet) {
  if (!mf.model_dir.empty()) {
    if (!std::filesystem::is_directory(mf.model_dir) && !is_gguf_checkpoint(mf.model_dir))
      throw Error("-m " + mf.model_dir +
                  (std::filesystem::exists(mf.model_dir) ? ": neither a checkpoint folder nor a GGUF file"
                                                         : ": no such checkpoint folder or GGUF file"));
    return mf.model_dir;
  }
  const DefaultModel m = ensure_default_model();
  if (!quiet) {
    if (m.created)
      std::fprintf(stderr, "dgemma: created the default model in %.1f s at %s\n", m.seconds, m.dir.c_str());
    std::fprintf(stderr,
                 "dgemma: no -m given: using the built-in default model (RANDOM weights: output is gibberish; "
                 "see --help for the real model)\n");
  }
  return m.dir;
}

std::string resolve_tokenizer_path(const std::string& flag, const std::string& model_dir) {
  if (!flag.empty()) {
    if (!std::filesystem::exists(flag)) throw Error("--tokenizer: " + flag + " does not exist");
    return flag;
  }
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  if (!std::filesystem::exists(path))
    throw Error("no tokenizer.json in " + model_dir + " (give one with --tokenizer FILE)");
  return path;
}

TokenizerArrays gguf_tokenizer_arrays(const GgufKeys& keys) {
  TokenizerArrays a;
  a.source = keys.source();
  a.model = std::string(keys.string("tokenizer.ggml.model"));
  for (std::string_view t : keys.strings("tokenizer.ggml.tokens")) a.tokens.emplace_back(t);
  if (keys.has("tokenizer.ggml.token_type"))
    for (int64_t t : keys.integers("tokenizer.ggml.token_type")) a.types.push_back(int32_t(t));
  if (keys.has("tokenizer.ggml.merges"))
    for (std::string_view m : keys.strings("tokenizer.ggml.merges")) a.merges.emplace_back(m);
  auto id = [&](const char* key) {
    if (!keys.has(key)) return int32_t(-1);
    const int64_t v = keys.integer(key);
    if (v < 0 || v > INT32_MAX)
      throw Error(keys.source() + ": key " + key + ": id " + std::to_string(v) + " is invalid");
    return int32_t(v);
  };
  a.unknown_id = id("tokenizer.ggml.unknown_token_id");
  a.bos_id = id("tokenizer.ggml.bos_token_id");
  a.eos_id = id("tokenizer.ggml.eos_token_id");
  a.add_bos = keys.has("tokenizer.ggml.add_bos_token") && keys.boolean("tokenizer.ggml.add_bos_token");
  if (keys.has("tokenizer.ggml.add_space_prefix") && keys.boolean("tokenizer.ggml.add_space_prefix"))
    throw Error(keys.source() + ": key tokenizer.ggml.add_space_prefix: true is not supported (gemma4 adds no prefix)");
  return a;
}

Tokenizer load_model_tokenizer(const std::string& flag, const std::string& model) {
  if (flag.empty() && is_gguf_checkpoint(model))
    return Tokenizer::from_arrays(gguf_tokenizer_arrays(GgufModelFiles::open(model).keys()));
  return Tokenizer::load(resolve_tokenizer_path(flag, model));
}

}  // namespace dgemma::cli
