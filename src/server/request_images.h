#pragma once
// The pictures of a chat request (docs/server.md §8): each image_url part of
// the user messages, in message order, read from its data: URL (or, with
// --allow-remote-images, fetched), decoded and made ready for the vision
// tower. Runs in the request's worker, before the request waits for the model.
#include <cstdint>
#include <string>
#include <vector>

#include "core/vision_input.h"
#include "image/image_processor_config.h"
#include "image/rgb_image.h"
#include "tokenizer/chat_template.h"

namespace dgemma {
class ThreadPool;
}

namespace dgemma::server {

struct ImageRequestLimits {
  static constexpr uint64_t kDefaultMaxImageBytes = uint64_t(5) << 20;
  static constexpr int64_t kDefaultMaxImages = 4;
  uint64_t max_image_bytes = kDefaultMaxImageBytes;            // --max-image-bytes, per image
  uint64_t max_image_pixels = ImageLimits::kDefaultMaxPixels;  // --max-image-pixels, width·height
  int64_t max_images = kDefaultMaxImages;                      // --max-images, per request
  bool allow_remote = false;                                   // --allow-remote-images
  int remote_timeout_seconds = 10;                             // connect + read, per image
};

// The request body that holds `images` base64 images of `image_bytes` each
// besides 1 MiB of other JSON: the default of --max-body-size when the model
// takes images.
int64_t body_size_for_images(const ImageRequestLimits& limits);

// Every image part of `messages`, in order. Throws ApiError: 400 naming
// messages[i].content[j] and the reason (not a data URL, a remote URL without
// --allow-remote-images, bad base64, too many bytes or pixels, not an image,
// truncated, too many images); `vision` false: 400 that the model takes no
// images.
std::vector<VisionInput> load_request_images(const std::vector<ChatMessage>& messages, bool vision,
                                             const ImageProcessorConfig& config, const ImageRequestLimits& limits,
                                             ThreadPool* pool);

// The number of image parts in `messages`.
int64_t count_request_images(const std::vector<ChatMessage>& messages);

// GET of an http(s) URL with a size cap and a timeout, no redirects
// (http_image_fetch.cc). Throws dgemma::Error naming the URL and the fault.
std::vector<uint8_t> fetch_remote_image(const std::string& url, uint64_t max_bytes, int timeout_seconds);

}  // namespace dgemma::server
