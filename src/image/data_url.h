#pragma once
// `data:image/<type>;base64,<data>` URLs, the form in which an API client
// sends an image inline (docs/image.md §9).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dgemma {

struct DataUrl {
  std::string media_type;      // "image/png", lower-cased as sent
  std::vector<uint8_t> bytes;  // the decoded payload
};

// Parses a data URL strictly: the scheme `data:`, a media type `image/…`,
// optional `;name=value` parameters, then `;base64,` and standard base64 with
// its `=` padding, nothing else (no whitespace, no URL-safe alphabet).
// Throws dgemma::Error naming the fault; the payload's decoded size is
// checked against max_bytes before anything is decoded.
DataUrl parse_image_data_url(std::string_view url, uint64_t max_bytes);

// Whether `url` starts with `data:` (case-insensitive), i.e. whether
// parse_image_data_url is the reader for it.
bool is_data_url(std::string_view url);

}  // namespace dgemma
