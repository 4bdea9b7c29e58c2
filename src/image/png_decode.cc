// PNG through libpng (docs/image.md §2.1). libpng reports errors by
// longjmp, so every libpng call sits in one of the small C-style functions
// below that hold only plain data; the C++ around them throws.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "image/decoders.h"
#include "image/orient.h"
#include "image/png_metadata.h"

namespace dgemma::image {
namespace {

struct PngJob {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  char message[256] = {};
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  png_colorp palette = nullptr;
  int num_palette = 0;
};

void on_error(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof job->message, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void on_read(png_structp png, png_bytep out, size_t n) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (n > job->size - job->pos) png_error(png, "image is truncated");
  std::memcpy(out, job->data + job->pos, n);
  job->pos += n;
}

bool read_header(PngJob* job) {
  if (setjmp(png_jmpbuf(job->png))) return false;  // NOLINT(cert-err52-cpp): libpng's error protocol
  png_set_read_fn(job->png, job, on_read);
  // The pixel limit is ours (checked before any row is allocated); libpng's
  // own default of a million pixels per side would refuse images Pillow reads.
  png_set_user_limits(job->png, 0x7fffffff, 0x7fffffff);
  png_read_info(job->png, job->info);
  job->width = png_get_image_width(job->png, job->info);
  job->height = png_get_image_height(job->png, job->info);
  job->bit_depth = png_get_bit_depth(job->png, job->info);
  job->color_type = png_get_color_type(job->png, job->info);
  if (job->color_type == PNG_COLOR_TYPE_PALETTE) {
    if (png_get_PLTE(job->png, job->info, &job->palette, &job->num_palette) != PNG_INFO_PLTE) {
      png_error(job->png, "palette image without a PLTE chunk");
    }
  }
  return true;
}

// Rows as stored, one byte per sample below 8 bits (not rescaled), 16-bit
// samples big-endian, interlacing undone.
bool read_rows(PngJob* job, png_bytep* rows, size_t row_bytes) {
  if (setjmp(png_jmpbuf(job->png))) return false;  // NOLINT(cert-err52-cpp): libpng's error protocol
  if (job->bit_depth < 8) png_set_packing(job->png);
  png_set_interlace_handling(job->png);
  png_read_update_info(job->png, job->info);
  if (png_get_rowbytes(job->png, job->info) != row_bytes) png_error(job->png, "unexpected row size");
  png_read_image(job->png, rows);
  return true;
}

struct PngHandle {
  PngJob job;
  ~PngHandle() {
    if (job.png) png_destroy_read_struct(&job.png, job.info ? &job.info : nullptr, nullptr);
  }
};

int channels_of(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: return 1;
    case PNG_COLOR_TYPE_PALETTE: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
    default: return 0;
  }
}

}  // namespace

RgbImage decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  // The size from IHDR (which must come first), before libpng reads on to
  // the image data: a header that claims too many pixels is refused even when
  // nothing follows it.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
    auto be32 = [&](size_t at) {
      return uint32_t(bytes[at]) << 24 | uint32_t(bytes[at + 1]) << 16 | uint32_t(bytes[at + 2]) << 8 | bytes[at + 3];
    };
    if (be32(16) != 0 && be32(20) != 0) check_image_size(int64_t(be32(16)), int64_t(be32(20)), limits);
  }
  PngHandle h;
  PngJob& job = h.job;
  job.data = bytes.data();
  job.size = bytes.size();
  job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, on_error, on_warning);
  if (!job.png) throw Error("PNG: cannot create the libpng reader");
  job.info = png_create_info_struct(job.png);
  if (!job.info) throw Error("PNG: cannot create the libpng reader");
  if (!read_header(&job)) throw Error(std::string("PNG: ") + job.message);
  check_image_size(int64_t(job.width), int64_t(job.height), limits);

  const int64_t w = job.width, hgt = job.height;
  const int channels = channels_of(job.color_type);
  if (channels == 0) throw Error("PNG: unknown colour type " + std::to_string(job.color_type));
  const size_t sample_bytes = job.bit_depth == 16 ? 2 : 1;
  const size_t row_bytes = size_t(w) * size_t(channels) * sample_bytes;
  std::vector<uint8_t> raw(row_bytes * size_t(hgt));
  std::vector<png_bytep> rows(static_cast<size_t>(hgt));
  for (int64_t y = 0; y < hgt; ++y) rows[size_t(y)] = raw.data() + size_t(y) * row_bytes;
  if (!read_rows(&job, rows.data(), row_bytes)) throw Error(std::string("PNG: ") + job.message);

  // Samples to 8-bit RGB as Pillow 9.4 converts each PNG mode
  // (docs/image.md §2.1): alpha dropped; gray below 8 bits replicated; 16-bit
  // colour keeps its high byte; 16-bit gray is clamped to 0..255.
  RgbImage out = RgbImage::zeros(hgt, w);
  uint8_t palette[256][3];
  for (int i = 0; i < 256; ++i) palette[i][0] = palette[i][1] = palette[i][2] = uint8_t(i);
  for (int i = 0; i < job.num_palette && i < 256; ++i) {
    palette[i][0] = job.palette[i].red;
    palette[i][1] = job.palette[i].green;
    palette[i][2] = job.palette[i].blue;
  }
  const int gray_scale = job.bit_depth == 1 ? 255 : job.bit_depth == 2 ? 85 : job.bit_depth == 4 ? 17 : 1;
  for (int64_t y = 0; y < hgt; ++y) {
    const uint8_t* s = rows[size_t(y)];
    uint8_t* d = out.row(y);
    for (int64_t x = 0; x < w; ++x, d += 3) {
      const uint8_t* p = s + size_t(x) * size_t(channels) * sample_bytes;
      switch (job.color_type) {
        case PNG_COLOR_TYPE_GRAY: {
          uint8_t v;
          if (sample_bytes == 2) {
            const unsigned g = unsigned(p[0]) << 8 | p[1];
            v = uint8_t(g > 255 ? 255 : g);
          } else {
            v = uint8_t(p[0] * gray_scale);
          }
          d[0] = d[1] = d[2] = v;
          break;
        }
        case PNG_COLOR_TYPE_PALETTE:
          d[0] = palette[p[0]][0];
          d[1] = palette[p[0]][1];
          d[2] = palette[p[0]][2];
          break;
        case PNG_COLOR_TYPE_GRAY_ALPHA: d[0] = d[1] = d[2] = p[0]; break;
        default:  // RGB, RGBA: the high byte of each 16-bit sample
          d[0] = p[0];
          d[1] = p[sample_bytes];
          d[2] = p[2 * sample_bytes];
          break;
      }
    }
  }
  return apply_orientation(std::move(out), png_orientation(bytes));
}

}  // namespace dgemma::image
