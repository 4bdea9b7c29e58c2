// libFuzzer target for the server's request framing
// (src/server/request_framing.h). Whatever the bytes, framing never reads
// past them, a complete request lies within them and ends after its headers,
// a refusal carries a 4xx/5xx status and a message, and framing a prefix of
// a complete request never reports a different end.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/request_framing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dgemma::server;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  FramingLimits limits;
  limits.max_header_bytes = 512;
  limits.max_body_bytes = 4096;
  const Framing f = frame_request(bytes, limits);
  switch (f.state) {
    case Framing::State::kComplete:
      if (f.request_bytes > size || f.header_bytes == 0 || f.header_bytes > f.request_bytes) __builtin_trap();
      if (f.expects_continue) __builtin_trap();
      // More bytes behind a whole request do not move its end.
      if (frame_request(bytes.substr(0, f.request_bytes), limits).request_bytes != f.request_bytes) __builtin_trap();
      break;
    case Framing::State::kRefused:
      if (f.status < 400 || f.status > 599 || f.message.empty()) __builtin_trap();
      break;
    case Framing::State::kNeedMore:
      if (f.header_bytes > size) __builtin_trap();
      break;
  }
  return 0;
}
