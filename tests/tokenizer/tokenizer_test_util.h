#pragma once
// Shared fixtures for the tokenizer tests: the Gemma 3 tokenizer (loaded once
// per process; 14 MB) and the golden cases of tests/data/tokenizer/.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::test {

inline std::string tokenizer_data(const std::string& name) {
  return std::string(DGEMMA_TEST_DATA) + "/tokenizer/" + name;
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline const std::string& gemma3_json() {
  static const std::string text = read_text_file(tokenizer_data("tokenizer.json"));
  return text;
}

inline const Tokenizer& gemma3() {
  static const Tokenizer tok = Tokenizer::from_json(gemma3_json(), tokenizer_data("tokenizer.json"));
  return tok;
}

inline const std::vector<json::Value>& golden_cases() {
  static const std::vector<json::Value> cases = [] {
    std::vector<json::Value> out;
    std::ifstream in(tokenizer_data("golden-visible.jsonl"), std::ios::binary);
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) out.push_back(json::parse(line, {.source = "golden-visible.jsonl"}));
    return out;
  }();
  return cases;
}

inline std::vector<int32_t> ids_of(const json::Value& arr) {
  std::vector<int32_t> out;
  for (const auto& v : arr.as_array()) out.push_back(int32_t(v.as_int()));
  return out;
}

}  // namespace dgemma::test
