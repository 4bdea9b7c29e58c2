#pragma once
// Helpers for the quantization tests: a scratch folder, checkpoint fixtures
// whose tensor bytes are written by hand in the tests (the safetensors
// container comes from the io writer, which has its own tests), and error
// matching.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma::qtest {

using TempDir = ::dgemma::test::TempDir;  // tests/dgemma_test_paths.h

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// One tensor of a fixture: name, dtype, shape, raw bytes.
struct RawTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes `dir`/model.safetensors with the given tensors and config.json (and
// hf_quant_config.json when non-empty).
inline void write_fixture(const std::string& dir, const std::vector<RawTensor>& tensors, const std::string& config,
                          const std::string& hf_quant_config = "") {
  std::filesystem::create_directories(dir);
  SafetensorsWriter w;
  for (const RawTensor& t : tensors) w.add(t.name, t.dtype, t.shape, t.bytes.data());
  w.write(dir + "/model.safetensors");
  write_text(dir + "/config.json", config);
  if (!hf_quant_config.empty()) write_text(dir + "/hf_quant_config.json", hf_quant_config);
}

// `fn` must throw dgemma::Error whose message contains every fragment.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected dgemma::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

}  // namespace dgemma::qtest
