// JPEG through libjpeg (libjpeg62-turbo, the library Pillow links), with the
// settings Pillow uses (docs/image.md §2.2). libjpeg reports errors through
// error_exit, which longjmps out of the small C-style functions below; they
// hold only plain data, and the C++ around them throws.
#include <cstddef>
#include <cstdio>
// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "image/decoders.h"
#include "image/exif_orientation.h"
#include "image/orient.h"

namespace dgemma::image {
namespace {

struct JpegErrors {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 32];
};

struct JpegJob {
  jpeg_decompress_struct cinfo;
  JpegErrors err;
  bool created;
};

void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  char text[JMSG_LENGTH_MAX];
  cinfo->err->format_message(cinfo, text);
  std::snprintf(err->message, sizeof err->message, "%s", text);
  longjmp(err->jump, 1);  // NOLINT(cert-err52-cpp): libjpeg's error protocol
}

// Warnings are ignored as Pillow ignores them, except the data running out
// (the memory source would go on with a made-up end marker): that is a
// truncated file, even when only the end marker is missing (Pillow refuses
// that too).
void on_emit_message(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    std::snprintf(err->message, sizeof err->message, "image is truncated");
    longjmp(err->jump, 1);  // NOLINT(cert-err52-cpp): libjpeg's error protocol
  }
}

void on_output_message(j_common_ptr) {}

bool read_header(JpegJob* job, const uint8_t* data, size_t size) {
  job->cinfo.err = jpeg_std_error(&job->err.pub);
  job->err.pub.error_exit = on_error_exit;
  job->err.pub.emit_message = on_emit_message;
  job->err.pub.output_message = on_output_message;
  if (setjmp(job->err.jump)) return false;  // NOLINT(cert-err52-cpp): libjpeg's error protocol
  jpeg_create_decompress(&job->cinfo);
  job->created = true;
  jpeg_mem_src(&job->cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&job->cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&job->cinfo, TRUE);
  return true;
}

// Library defaults (ISLOW IDCT, fancy upsampling, no scaling); `rows` gets
// height rows of width·components bytes.
bool read_pixels(JpegJob* job, J_COLOR_SPACE out_space, unsigned char* rows, size_t stride) {
  if (setjmp(job->err.jump)) return false;  // NOLINT(cert-err52-cpp): libjpeg's error protocol
  job->cinfo.out_color_space = out_space;
  jpeg_start_decompress(&job->cinfo);
  while (job->cinfo.output_scanline < job->cinfo.output_height) {
    JSAMPROW row = rows + size_t(job->cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&job->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&job->cinfo);
  return true;
}

struct JpegHandle {
  JpegJob job{};
  ~JpegHandle() {
    if (job.created) jpeg_destroy_decompress(&job.cinfo);
  }
};

// Pillow 9.4 takes the first APP1 segment that starts with "Exif\0".
std::vector<uint8_t> first_exif(const jpeg_decompress_struct& cinfo) {
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 5 && std::memcmp(m->data, "Exif\0", 5) == 0) {
      return std::vector<uint8_t>(m->data, m->data + m->data_length);
    }
  }
  return {};
}

}  // namespace

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  JpegHandle h;
  JpegJob& job = h.job;
  if (!read_header(&job, bytes.data(), bytes.size())) throw Error(std::string("JPEG: ") + job.err.message);
  const jpeg_decompress_struct& c = job.cinfo;
  check_image_size(int64_t(c.image_width), int64_t(c.image_height), limits);
  J_COLOR_SPACE out_space;
  int components;
  switch (c.jpeg_color_space) {
    case JCS_GRAYSCALE: out_space = JCS_GRAYSCALE, components = 1; break;
    case JCS_YCbCr:
    case JCS_RGB: out_space = JCS_RGB, components = 3; break;
    case JCS_CMYK:
    case JCS_YCCK: throw Error("JPEG: CMYK images are not supported (convert the image to RGB first)");
    default: throw Error("JPEG: unsupported colour space with " + std::to_string(c.num_components) + " components");
  }
  // The saved markers live only until decompression ends.
  const std::vector<uint8_t> exif = first_exif(c);
  const int64_t w = c.image_width, hgt = c.image_height;
  const size_t stride = size_t(w) * size_t(components);
  std::vector<unsigned char> rows(stride * size_t(hgt));
  if (!read_pixels(&job, out_space, rows.data(), stride)) throw Error(std::string("JPEG: ") + job.err.message);
  if (int64_t(c.output_width) != w || int64_t(c.output_height) != hgt) {
    throw Error("JPEG: the decoder changed the image size");
  }

  RgbImage out;
  if (components == 3) {
    out.height = hgt;
    out.width = w;
    out.pixels = std::move(rows);
  } else {  // gray: R = G = B (docs/image.md §2.2)
    out = RgbImage::zeros(hgt, w);
    for (size_t i = 0; i < rows.size(); ++i) {
      out.pixels[3 * i] = out.pixels[3 * i + 1] = out.pixels[3 * i + 2] = rows[i];
    }
  }
  return apply_orientation(std::move(out), exif_orientation(exif));
}

}  // namespace dgemma::image
