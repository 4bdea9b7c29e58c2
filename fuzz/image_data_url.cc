// libFuzzer target: the input is a data: URL, fed to the strict parser
// (docs/image.md §9). What parses must hold no more bytes than the cap and
// must encode back to the same base64.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dgemma/error.h"
#include "image/data_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view url(reinterpret_cast<const char*>(data), size);
  constexpr uint64_t kCap = 4096;
  try {
    const dgemma::DataUrl parsed = dgemma::parse_image_data_url(url, kCap);
    if (parsed.bytes.size() > kCap) __builtin_trap();
    if (parsed.media_type.compare(0, 6, "image/") != 0) __builtin_trap();
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    for (size_t i = 0; i < parsed.bytes.size(); i += 3) {
      const uint32_t n = uint32_t(parsed.bytes[i]) << 16 |
                         (i + 1 < parsed.bytes.size() ? uint32_t(parsed.bytes[i + 1]) << 8 : 0) |
                         (i + 2 < parsed.bytes.size() ? uint32_t(parsed.bytes[i + 2]) : 0);
      b64 += alphabet[n >> 18];
      b64 += alphabet[(n >> 12) & 63];
      b64 += i + 1 < parsed.bytes.size() ? alphabet[(n >> 6) & 63] : '=';
      b64 += i + 2 < parsed.bytes.size() ? alphabet[n & 63] : '=';
    }
    const size_t comma = url.find(',');
    if (url.substr(comma + 1) != b64) __builtin_trap();
  } catch (const dgemma::Error&) {
  }
  return 0;
}
