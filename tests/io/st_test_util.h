#pragma once
// Helpers for the safetensors tests: a scratch folder and raw file builders.
// Corrupt files are assembled byte by byte here, never with the writer under
// test, so that a writer bug cannot hide a reader bug.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "dgemma/error.h"

namespace dgemma::test {

// TempDir: tests/dgemma_test_paths.h (force-included).

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(n >> (8 * i)));
  return s;
}

// A file image: length prefix, header text as given (no padding added), data.
inline std::string st_image(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}
inline std::string st_image(const std::string& header, size_t data_bytes) {
  return st_image(header, std::string(data_bytes, '\x5a'));
}

// Runs `fn`, which must throw dgemma::Error whose message contains every
// needle.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nmissing: " << n;
    return;
  }
  ADD_FAILURE() << "no dgemma::Error thrown; expected one mentioning " << needles.front();
}

}  // namespace dgemma::test
