#include "image/data_url.h"

#include <cctype>

#include "dgemma/error.h"

namespace dgemma {
namespace {

bool iequals_prefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

// RFC 2045 token characters (for the media type and parameters).
bool is_token_char(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (u <= 32 || u >= 127) return false;
  return std::string_view("()<>@,;:\\\"/[]?=").find(c) == std::string_view::npos;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string shown(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (u >= 33 && u < 127) return std::string("'") + c + "'";
  static const char* hex = "0123456789abcdef";
  return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

}  // namespace

bool is_data_url(std::string_view url) { return iequals_prefix(url, "data:"); }

DataUrl parse_image_data_url(std::string_view url, uint64_t max_bytes) {
  if (!is_data_url(url)) throw Error("not a data: URL");
  std::string_view rest = url.substr(5);
  const size_t comma = rest.find(',');
  if (comma == std::string_view::npos) throw Error("data: URL has no ',' before its data");
  std::string_view header = rest.substr(0, comma);
  const std::string_view payload = rest.substr(comma + 1);

  // Media type: image/<subtype>, then parameters, the last of which is base64.
  DataUrl out;
  const size_t semi = header.find(';');
  const std::string_view type = header.substr(0, semi);
  const size_t slash = type.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == type.size()) {
    throw Error("data: URL media type '" + std::string(type) + "' is not of the form image/<type>");
  }
  for (size_t i = 0; i < type.size(); ++i) {
    if (i != slash && !is_token_char(type[i])) {
      throw Error("data: URL media type '" + std::string(type) + "' has an invalid character");
    }
  }
  for (char c : type) out.media_type += char(std::tolower(static_cast<unsigned char>(c)));
  if (out.media_type.compare(0, 6, "image/") != 0) {
    throw Error("data: URL media type '" + std::string(type) + "' is not an image type");
  }
  // Parameters after the media type, `;base64` last.
  bool base64 = false;
  for (size_t at = semi; at != std::string_view::npos;) {
    const size_t next = header.find(';', at + 1);
    const std::string_view param = header.substr(at + 1, next == std::string_view::npos ? next : next - at - 1);
    at = next;
    if (base64) throw Error("data: URL has parameters after ';base64'");
    if (param.size() == 6 && iequals_prefix(param, "base64")) {
      base64 = true;
      continue;
    }
    const size_t eq = param.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == param.size()) {
      throw Error("data: URL parameter '" + std::string(param) + "' is not name=value");
    }
    for (size_t i = 0; i < param.size(); ++i) {
      if (i != eq && !is_token_char(param[i])) {
        throw Error("data: URL parameter '" + std::string(param) + "' has an invalid character");
      }
    }
  }
  if (!base64) throw Error("data: URL is not base64 (';base64,' expected before the data)");

  // Standard base64, padded to a multiple of 4.
  if (payload.empty()) throw Error("data: URL has no data");
  if (payload.size() % 4 != 0) {
    throw Error("data: URL base64 length " + std::to_string(payload.size()) + " is not a multiple of 4");
  }
  size_t padding = 0;
  if (payload.back() == '=') padding = payload[payload.size() - 2] == '=' ? 2 : 1;
  const uint64_t decoded = uint64_t(payload.size() / 4) * 3 - padding;
  if (decoded > max_bytes) {
    throw Error("image is " + std::to_string(decoded) + " bytes, over the limit of " + std::to_string(max_bytes) +
                " bytes");
  }
  out.bytes.reserve(size_t(decoded));
  const size_t body = payload.size() - padding;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < body; ++i) {
    const int v = base64_value(payload[i]);
    if (v < 0) {
      throw Error("data: URL base64 has an invalid character " + shown(payload[i]) + " at offset " + std::to_string(i));
    }
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.bytes.push_back(uint8_t(acc >> bits));
      acc &= (1u << bits) - 1;
    }
  }
  if (acc != 0) throw Error("data: URL base64 does not end cleanly (non-zero bits before the padding)");
  return out;
}

}  // namespace dgemma
