// libFuzzer target for the calibration sample readers of `dgemma quantize
// --calibrate` / `--calibrate-ids` (src/calibrate/calibration_samples.h). The
// first byte picks texts or ids; the rest is the file. Whatever the input, a
// reader either returns samples or throws dgemma::Error whose message names
// the file; returned ids lie inside the vocabulary, and fitting them to a
// count and length never yields more or longer samples than asked.
#include <cstddef>
#include <cstdint>
#include <string>

#include "calibrate/calibration_samples.h"
#include "dgemma/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dgemma;
  if (size == 0) return 0;
  const std::string content(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr int64_t kVocab = 1000;
  try {
    if ((data[0] & 1) != 0) {
      const std::vector<std::string> texts = read_calibration_texts(content, "f.txt");
      if (texts.empty()) __builtin_trap();
    } else {
      std::vector<std::vector<int32_t>> ids = read_calibration_ids(content, "f.txt", kVocab);
      for (const auto& s : ids)
        for (int32_t id : s)
          if (id < 0 || id >= kVocab) __builtin_trap();
      const int64_t n = 1 + data[0] / 16, len = 1 + (data[0] >> 1) % 8;
      const auto fitted = fit_calibration_samples(std::move(ids), n, len, "f.txt");
      if (fitted.empty() || int64_t(fitted.size()) > n) __builtin_trap();
      for (const auto& s : fitted)
        if (s.empty() || int64_t(s.size()) > len) __builtin_trap();
      if (calibration_set_sha256(fitted).size() != 64) __builtin_trap();
    }
  } catch (const Error& e) {
    if (std::string(e.what()).find("f.txt") == std::string::npos) __builtin_trap();
  }
  return 0;
}
