#include "model_source.h"

#include <cstdio>
#include <filesystem>

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
    if (!std::filesystem::is_directory(mf.model_dir)) throw Error("-m " + mf.model_dir + ": no such checkpoint folder");
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

}  // namespace dgemma::cli
