#pragma once
// The embedded default model (src/model/default_model.h), generated once per
// test process into a temporary folder, with its Gemma-4-style tokenizer.
#include <filesystem>
#include <string>
#include <unistd.h>

#include "model/default_model.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::testing {

inline const std::string& default_model_test_dir() {
  static const std::string dir = [] {
    const std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("dgemma_default_model_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    write_default_model(d.string(), default_tokenizer_source());
    return d.string();
  }();
  return dir;
}

inline const Tokenizer& default_model_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(default_model_test_dir() + "/tokenizer.json");
  return tok;
}

// Removes the folder when the test binary exits.
struct DefaultModelCleanup {
  ~DefaultModelCleanup() {
    std::error_code ec;
    std::filesystem::remove_all(
        std::filesystem::temp_directory_path() / ("dgemma_default_model_test_" + std::to_string(::getpid())), ec);
  }
};

}  // namespace dgemma::testing
