// libFuzzer target for the strict JSON parser (src/core/json.h). Whatever
// parses must dump to text that parses again to the same dump.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"
#include "dgemma/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  dgemma::json::Value v;
  try {
    v = dgemma::json::parse(text);
  } catch (const dgemma::Error&) {
    return 0;
  }
  const std::string once = dgemma::json::dump(v);
  if (!dgemma::json::is_valid_utf8(once)) __builtin_trap();
  const std::string again = dgemma::json::dump(dgemma::json::parse(once));
  if (again != once) __builtin_trap();
  // The pretty form must read back as the same value too.
  if (dgemma::json::dump(dgemma::json::parse(dgemma::json::dump(v, 2))) != once) __builtin_trap();
  return 0;
}
