#pragma once
// Reading the image tests' reference files (tests/data/golden_v).
#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

inline std::string golden_v_dir() { return DGEMMA_TEST_DATA + "/golden_v"; }

inline std::vector<uint8_t> read_test_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
