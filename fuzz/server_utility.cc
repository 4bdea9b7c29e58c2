// libFuzzer target for the request parsers of the server's utility routes
// (src/server/utility_api.h). The first byte picks /tokenize or /detokenize,
// the rest is the body. Whatever the input, the parser either accepts it or
// throws an ApiError with a 4xx status whose error body is valid JSON; the
// ids /detokenize accepts lie inside the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/json.h"
#include "server/api_error.h"
#include "server/utility_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dgemma::server;
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr int64_t kVocab = 1000;
  try {
    if ((data[0] & 1) != 0) {
      const TokenizeRequest r = parse_tokenize_request(body);
      if (dgemma::json::is_valid_utf8(r.content) == false) __builtin_trap();
    } else {
      for (int32_t id : parse_detokenize_request(body, kVocab))
        if (id < 0 || id >= kVocab) __builtin_trap();
    }
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) __builtin_trap();
    if (!dgemma::json::parse(error_body(e)).is_object()) __builtin_trap();
  }
  return 0;
}
