// libFuzzer target: the input is a whole safetensors file image, fed to the
// header validator (docs/formats.md §1.5). Any exception other than
// dgemma::Error, and any sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>

#include "dgemma/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dgemma::SafetensorsHeader h = dgemma::parse_safetensors(data, size, "fuzz.safetensors");
    // A header that passed must describe tensors that lie inside the input.
    for (const auto& t : h.tensors) {
      if (t.begin > t.end || h.data_offset + t.end > size) __builtin_trap();
      if (t.numel() < 0) __builtin_trap();
    }
  } catch (const dgemma::Error&) {
  }
  return 0;
}
