#pragma once
// Where an HTTP/1.1 request ends in the bytes read so far from a connection
// (docs/server.md §2). The connection reader calls it after every read, so
// that a worker thread is given a connection only once a whole request —
// request line, headers and body (Content-Length or chunked) — has arrived,
// and so that requests over a limit are refused before their bodies are read.
// It only frames; the request itself is parsed by the HTTP library.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dgemma::server {

struct FramingLimits {
  size_t max_header_bytes = 16 * 1024;  // request line + headers + blank line; more: 431
  int64_t max_body_bytes = 1 << 20;     // decoded body; more: 413
};

struct Framing {
  enum class State {
    kNeedMore,  // not a whole request yet
    kComplete,  // request_bytes hold one whole request
    kRefused,   // status/message say why; the connection is answered and closed
  };
  State state = State::kNeedMore;
  size_t header_bytes = 0;   // through the blank line, once the headers are in (0 before)
  size_t request_bytes = 0;  // kComplete: the whole request
  // kNeedMore with the headers in and a Content-Length: the size the whole
  // request will have (0 for a chunked body, or before the headers are in).
  size_t whole_request_bytes = 0;
  // Headers in, body still to come, and the client waits for
  // "100 Continue" before it sends it (Expect: 100-continue).
  bool expects_continue = false;
  int status = 0;  // kRefused: 400, 413, 431 or 501
  std::string message;
};

// Frames the first request in `bytes` (which start at a request line).
Framing frame_request(std::string_view bytes, const FramingLimits& limits);

// Case-insensitive ASCII comparison (header names and tokens).
bool equals_ignoring_case(std::string_view a, std::string_view b);

}  // namespace dgemma::server
