// WebP through libwebp's animation decoder, as Pillow 9.4 decodes every WebP
// (docs/image.md §2.3): frame 0 of the canvas, in non-premultiplied RGBA,
// alpha then dropped.
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "image/decoders.h"
#include "image/exif_orientation.h"
#include "image/orient.h"

namespace dgemma::image {
namespace {

struct DemuxDeleter {
  void operator()(WebPDemuxer* d) const { WebPDemuxDelete(d); }
};
struct AnimDeleter {
  void operator()(WebPAnimDecoder* d) const { WebPAnimDecoderDelete(d); }
};

}  // namespace

RgbImage decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  const WebPData data{bytes.data(), bytes.size()};
  // The container first: its canvas size is checked before the decoder
  // allocates the canvas.
  WebPDemuxState state = WEBP_DEMUX_PARSE_ERROR;
  std::unique_ptr<WebPDemuxer, DemuxDeleter> demux(WebPDemuxPartial(&data, &state));
  if (!demux || state == WEBP_DEMUX_PARSE_ERROR) throw Error("WebP: the file is not valid WebP data");
  if (state != WEBP_DEMUX_DONE) throw Error("WebP: image is truncated");
  check_image_size(int64_t(WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_WIDTH)),
                   int64_t(WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_HEIGHT)), limits);
  std::vector<uint8_t> exif;
  WebPChunkIterator chunk;
  if (WebPDemuxGetChunk(demux.get(), "EXIF", 1, &chunk)) {
    exif.assign(chunk.chunk.bytes, chunk.chunk.bytes + chunk.chunk.size);
    WebPDemuxReleaseChunkIterator(&chunk);
  }

  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) throw Error("WebP: libwebp version mismatch");
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  std::unique_ptr<WebPAnimDecoder, AnimDeleter> decoder(WebPAnimDecoderNew(&data, &options));
  if (!decoder) throw Error("WebP: the file is not valid WebP data");
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(decoder.get(), &info)) throw Error("WebP: cannot read the image's size");
  check_image_size(int64_t(info.canvas_width), int64_t(info.canvas_height), limits);
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(decoder.get(), &rgba, &timestamp) || !rgba) {
    throw Error("WebP: the image data is corrupt");
  }
  RgbImage out = RgbImage::zeros(info.canvas_height, info.canvas_width);
  const size_t n = size_t(out.height) * size_t(out.width);
  for (size_t i = 0; i < n; ++i) std::memcpy(&out.pixels[3 * i], rgba + 4 * i, 3);
  return apply_orientation(std::move(out), exif_orientation(exif));
}

}  // namespace dgemma::image
