#include "image/pillow_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

// Fixed-point weights carry 22 fraction bits (docs/image.md §6.3).
constexpr int kPrecisionBits = 22;

// The bicubic kernel with a = −0.5, support 2 (docs/image.md §6.1).
double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// The taps of one axis: for output index i, `count[i]` input samples from
// `first[i]`, with integer weights weight[i·taps + j] (docs/image.md §6.2).
struct Taps {
  int64_t taps = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weight;
};

Taps make_taps(int64_t in_size, int64_t out_size) {
  const double scale = double(in_size) / double(out_size);
  const double filter_scale = std::max(scale, 1.0);  // widened when shrinking
  const double support = 2.0 * filter_scale;
  Taps t;
  t.taps = int64_t(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.weight.assign(size_t(out_size * t.taps), 0);
  std::vector<double> w(size_t(t.taps));
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = (double(i) + 0.5) * scale;
    const double inv = 1.0 / filter_scale;
    // (int) truncates toward zero, before the clamp: Pillow's rounding, on
    // purpose (docs/image.md §6.2).
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    int64_t lo = int64_t(int(center - support + 0.5));
    if (lo < 0) lo = 0;
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    int64_t hi = int64_t(int(center + support + 0.5));
    if (hi > in_size) hi = in_size;
    const int64_t n = hi - lo;
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      w[size_t(j)] = bicubic((double(j + lo) - center + 0.5) * inv);
      sum += w[size_t(j)];
    }
    for (int64_t j = 0; j < n; ++j) {
      if (sum != 0.0) w[size_t(j)] /= sum;
      const double scaled = w[size_t(j)] * double(1 << kPrecisionBits);
      // Round half away from zero (docs/image.md §6.3).
      // NOLINTNEXTLINE(bugprone-incorrect-roundings)
      t.weight[size_t(i * t.taps + j)] = int32_t(w[size_t(j)] < 0 ? int(-0.5 + scaled) : int(0.5 + scaled));
    }
    t.first[size_t(i)] = lo;
    t.count[size_t(i)] = n;
  }
  return t;
}

inline uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;  // arithmetic shift
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

template <class Fn>
void for_rows(ThreadPool* pool, int64_t rows, Fn&& fn) {
  if (pool && pool->size() > 1 && rows > 1) {
    pool->parallel_for(rows, 1, fn);
  } else {
    fn(int64_t(0), rows);
  }
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& image, int64_t out_height, int64_t out_width, ThreadPool* pool) {
  if (out_height <= 0 || out_width <= 0 || image.height <= 0 || image.width <= 0) {
    throw Error("resize: sizes must be positive (from " + std::to_string(image.height) + "x" +
                std::to_string(image.width) + " to " + std::to_string(out_height) + "x" + std::to_string(out_width) +
                ")");
  }
  const bool horizontal = out_width != image.width, vertical = out_height != image.height;
  if (!horizontal && !vertical) return image;
  const Taps tv = make_taps(image.height, out_height);
  const Taps th = make_taps(image.width, out_width);

  // Horizontal pass first, over only the source rows the vertical pass reads,
  // into an 8-bit image clamped as it is written (docs/image.md §6.4).
  const int64_t row_first = tv.first[0];
  const int64_t row_end = tv.first[size_t(out_height - 1)] + tv.count[size_t(out_height - 1)];
  RgbImage mid;
  const RgbImage* src = &image;
  int64_t src_row0 = 0;  // source row of src's row 0 as the vertical taps count rows
  if (horizontal) {
    mid = RgbImage::zeros(row_end - row_first, out_width);
    for_rows(pool, mid.height, [&](int64_t y0, int64_t y1) {
      for (int64_t y = y0; y < y1; ++y) {
        const uint8_t* in = image.row(y + row_first);
        uint8_t* out = mid.row(y);
        for (int64_t x = 0; x < out_width; ++x) {
          const int32_t* k = &th.weight[size_t(x * th.taps)];
          const uint8_t* p = in + th.first[size_t(x)] * 3;
          int32_t a0 = 1 << (kPrecisionBits - 1), a1 = a0, a2 = a0;
          for (int64_t j = 0; j < th.count[size_t(x)]; ++j) {
            a0 += int32_t(p[3 * j + 0]) * k[j];
            a1 += int32_t(p[3 * j + 1]) * k[j];
            a2 += int32_t(p[3 * j + 2]) * k[j];
          }
          out[3 * x + 0] = clip8(a0);
          out[3 * x + 1] = clip8(a1);
          out[3 * x + 2] = clip8(a2);
        }
      }
    });
    if (!vertical) return mid;
    src = &mid;
    src_row0 = row_first;
  }

  RgbImage out = RgbImage::zeros(out_height, out_width);
  const int64_t row_bytes = out_width * 3;
  for_rows(pool, out_height, [&](int64_t y0, int64_t y1) {
    for (int64_t y = y0; y < y1; ++y) {
      const int32_t* k = &tv.weight[size_t(y * tv.taps)];
      const int64_t first = tv.first[size_t(y)] - src_row0;
      uint8_t* o = out.row(y);
      for (int64_t b = 0; b < row_bytes; ++b) {
        int32_t acc = 1 << (kPrecisionBits - 1);
        for (int64_t j = 0; j < tv.count[size_t(y)]; ++j) acc += int32_t(src->row(first + j)[b]) * k[j];
        o[b] = clip8(acc);
      }
    }
  });
  return out;
}

}  // namespace dgemma
