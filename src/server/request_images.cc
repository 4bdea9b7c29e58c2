#include "server/request_images.h"

#include <string_view>
#include <utility>

#include "dgemma/error.h"
#include "image/data_url.h"
#include "image/image_preprocess.h"
#include "server/api_error.h"

namespace dgemma::server {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (char(s[i] | 0x20) != prefix[i]) return false;
  return true;
}

// The bytes of one image part (its source), or an ApiError naming `param`.
std::vector<uint8_t> image_bytes(const std::string& source, const std::string& param,
                                 const ImageRequestLimits& limits) {
  try {
    if (is_data_url(source)) return parse_image_data_url(source, limits.max_image_bytes).bytes;
    if (starts_with_nocase(source, "http://") || starts_with_nocase(source, "https://")) {
      if (!limits.allow_remote)
        throw invalid_request("'" + param +
                                  "' is a remote URL; this server does not fetch images: send the image inline as a "
                                  "data: URL (data:image/png;base64,...)",
                              param, "remote_images_disabled");
      return fetch_remote_image(source, limits.max_image_bytes, limits.remote_timeout_seconds);
    }
  } catch (const Error& e) {
    throw invalid_request("'" + param + "': " + e.what(), param, "invalid_image");
  }
  throw invalid_request("'" + param + "' must be a data: URL" +
                            std::string(limits.allow_remote ? " or an http(s) URL" : "") + ", got '" +
                            source.substr(0, 32) + (source.size() > 32 ? "...'" : "'"),
                        param, "invalid_image_url");
}

}  // namespace

int64_t body_size_for_images(const ImageRequestLimits& limits) {
  const uint64_t base64 = (limits.max_image_bytes + 2) / 3 * 4;
  return int64_t(uint64_t(1) << 20) + int64_t(base64) * limits.max_images;
}

int64_t count_request_images(const std::vector<ChatMessage>& messages) {
  int64_t n = 0;
  for (const ChatMessage& m : messages)
    if (m.parts)
      for (const ChatContentPart& p : *m.parts) n += p.type == "image";
  return n;
}

std::vector<VisionInput> load_request_images(const std::vector<ChatMessage>& messages, bool vision,
                                             const ImageProcessorConfig& config, const ImageRequestLimits& limits,
                                             ThreadPool* pool) {
  const int64_t n = count_request_images(messages);
  std::vector<VisionInput> out;
  if (n == 0) return out;
  if (!vision)
    throw invalid_request("this model has no vision tower: it does not take images", "messages", "images_unsupported");
  if (n > limits.max_images)
    throw invalid_request("the request has " + std::to_string(n) + " images; this server accepts at most " +
                              std::to_string(limits.max_images) + " per request (--max-images)",
                          "messages", "too_many_images");
  ImageLimits decode_limits;
  decode_limits.max_bytes = limits.max_image_bytes;
  decode_limits.max_pixels = limits.max_image_pixels;
  out.reserve(size_t(n));
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].parts) continue;
    const std::vector<ChatContentPart>& parts = *messages[i].parts;
    for (size_t j = 0; j < parts.size(); ++j) {
      if (parts[j].type != "image") continue;
      const std::string param = "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "]";
      const std::vector<uint8_t> bytes = image_bytes(parts[j].source, param + ".image_url", limits);
      try {
        out.push_back(preprocess_image(bytes, config, decode_limits, pool).input);
      } catch (const Error& e) {
        throw invalid_request("image " + std::to_string(out.size()) + " ('" + param + "'): " + e.what(),
                              param + ".image_url", "invalid_image");
      }
    }
  }
  return out;
}

}  // namespace dgemma::server
