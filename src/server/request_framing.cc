#include "server/request_framing.h"

#include <algorithm>

namespace dgemma::server {
namespace {

constexpr std::string_view kCrlf = "\r\n";

char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Framing refuse(int status, std::string message) {
  Framing f;
  f.state = Framing::State::kRefused;
  f.status = status;
  f.message = std::move(message);
  return f;
}

// What the headers say about the body.
struct BodyHeaders {
  bool has_length = false;
  uint64_t length = 0;  // saturates at UINT64_MAX
  bool chunked = false;
  bool expect_continue = false;
};

// Parses a Content-Length value: digits only (no sign, no spaces inside).
// Returns false when it is not a number; saturates instead of overflowing.
bool parse_length(std::string_view v, uint64_t& out) {
  if (v.empty()) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = uint64_t(c - '0');
    n = n > (UINT64_MAX - d) / 10 ? UINT64_MAX : n * 10 + d;
  }
  out = n;
  return true;
}

// Reads the header lines between the request line and the blank line.
// Returns a refusal, or a kNeedMore framing with `body` filled.
Framing read_headers(std::string_view head, BodyHeaders& body) {
  size_t pos = head.find(kCrlf);  // end of the request line
  if (pos == 0) return refuse(400, "the request line is empty");
  while (pos + 2 < head.size()) {
    const size_t begin = pos + 2;
    const size_t end = head.find(kCrlf, begin);
    const std::string_view line = head.substr(begin, end - begin);
    pos = end;
    if (line.front() == ' ' || line.front() == '\t')
      return refuse(400, "a header line starts with whitespace (obsolete line folding is not accepted)");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return refuse(400, "a header line has no 'name:'");
    const std::string_view name = line.substr(0, colon);
    if (name.back() == ' ' || name.back() == '\t') return refuse(400, "whitespace between a header name and ':'");
    const std::string_view value = trim(line.substr(colon + 1));
    if (equals_ignoring_case(name, "content-length")) {
      uint64_t n = 0;
      if (!parse_length(value, n))
        return refuse(400, "Content-Length '" + std::string(value.substr(0, 32)) + "' is not a byte count");
      if (body.has_length && n != body.length) return refuse(400, "two different Content-Length headers");
      body.has_length = true;
      body.length = n;
    } else if (equals_ignoring_case(name, "transfer-encoding")) {
      if (!equals_ignoring_case(value, "chunked"))
        return refuse(
            501, "Transfer-Encoding '" + std::string(value.substr(0, 32)) + "' is not supported (only chunked is)");
      body.chunked = true;
    } else if (equals_ignoring_case(name, "expect")) {
      body.expect_continue = equals_ignoring_case(value, "100-continue");
    }
  }
  // A request with both is ambiguous to intermediaries (request smuggling).
  if (body.chunked && body.has_length) return refuse(400, "both Content-Length and Transfer-Encoding: chunked");
  return Framing{};
}

// Scans a chunked body that starts at bytes[at]. Returns kComplete with
// request_bytes, kNeedMore, or a refusal.
Framing scan_chunked(std::string_view bytes, size_t at, const FramingLimits& limits) {
  uint64_t total = 0;
  while (true) {
    const size_t line_end = bytes.find(kCrlf, at);
    if (line_end == std::string_view::npos) {
      if (bytes.size() - at > 1024) return refuse(400, "a chunk-size line is longer than 1024 bytes");
      return Framing{};
    }
    const std::string_view line = bytes.substr(at, line_end - at);
    const std::string_view size_text = trim(line.substr(0, line.find(';')));
    if (size_text.empty() || size_text.size() > 15)
      return refuse(400, "a chunk size is not a hexadecimal number of at most 15 digits");
    uint64_t size = 0;
    for (char c : size_text) {
      const char l = lower(c);
      if (l >= '0' && l <= '9')
        size = size * 16 + uint64_t(l - '0');
      else if (l >= 'a' && l <= 'f')
        size = size * 16 + uint64_t(l - 'a' + 10);
      else
        return refuse(400, "a chunk size is not a hexadecimal number");
    }
    at = line_end + 2;
    if (size == 0) break;
    total += size;
    if (total > uint64_t(limits.max_body_bytes))
      return refuse(413, "the request body is larger than " + std::to_string(limits.max_body_bytes) + " bytes");
    if (bytes.size() - at < size + 2) return Framing{};
    if (bytes.substr(at + size, 2) != kCrlf) return refuse(400, "a chunk does not end with CRLF");
    at += size + 2;
  }
  // Trailer fields, then an empty line.
  const size_t trailer_start = at;
  while (true) {
    const size_t line_end = bytes.find(kCrlf, at);
    if (line_end == std::string_view::npos) {
      if (bytes.size() - trailer_start > limits.max_header_bytes)
        return refuse(431, "the trailer fields are too large");
      return Framing{};
    }
    const bool empty_line = line_end == at;
    at = line_end + 2;
    if (empty_line) {
      Framing f;
      f.state = Framing::State::kComplete;
      f.request_bytes = at;
      return f;
    }
    if (at - trailer_start > limits.max_header_bytes) return refuse(431, "the trailer fields are too large");
  }
}

}  // namespace

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

Framing frame_request(std::string_view bytes, const FramingLimits& limits) {
  const size_t end = bytes.find("\r\n\r\n");
  const size_t head_bytes = end == std::string_view::npos ? bytes.size() : end + 4;
  if (head_bytes > limits.max_header_bytes)
    return refuse(431,
                  "the request line and headers are larger than " + std::to_string(limits.max_header_bytes) + " bytes");
  if (end == std::string_view::npos) return Framing{};
  BodyHeaders body;
  Framing f = read_headers(bytes.substr(0, end + 2), body);
  if (f.state == Framing::State::kRefused) return f;
  f.header_bytes = end + 4;
  if (body.chunked) {
    Framing c = scan_chunked(bytes, f.header_bytes, limits);
    c.header_bytes = f.header_bytes;
    c.expects_continue = c.state == Framing::State::kNeedMore && body.expect_continue;
    return c;
  }
  if (body.length > uint64_t(limits.max_body_bytes))
    return refuse(413, "the request body (" + std::to_string(body.length) + " bytes) is larger than " +
                           std::to_string(limits.max_body_bytes) + " bytes");
  if (bytes.size() - f.header_bytes < body.length) {
    f.expects_continue = body.expect_continue;
    f.whole_request_bytes = f.header_bytes + size_t(body.length);
    return f;
  }
  f.state = Framing::State::kComplete;
  f.request_bytes = f.header_bytes + size_t(body.length);
  return f;
}

}  // namespace dgemma::server
