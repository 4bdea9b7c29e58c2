#include "quantize/format_tables.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"

namespace dgemma::quant {

const float* e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int i = 0; i < 256; ++i) t[size_t(i)] = f8_e4m3_to_f32(uint8_t(i));
    return t;
  }();
  return table.data();
}

uint8_t f32_to_e4m3(float v) {
  if (std::isnan(v)) return 0x7f;
  const float* t = e4m3_table();
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const float a = std::fabs(v);
  // Codes 0x00..0x7e are the non-negative finite values in ascending order.
  if (a >= t[0x7e]) return uint8_t(sign | 0x7e);
  int lo = 0, hi = 0x7e;  // t[lo] <= a < t[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (t[mid] <= a)
      lo = mid;
    else
      hi = mid;
  }
  const float dl = a - t[lo], dh = t[hi] - a;
  int code = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);  // ties to even mantissa
  return uint8_t(sign | code);
}

uint8_t nearest_code16(const float* book, float v) {
  // The code book is ascending: the number of midpoints below v is the
  // nearest code up to rounding of the midpoints, so only that code and its
  // neighbours are compared by distance, in ascending order (first best wins:
  // ties go to the lower code exactly as a full scan would). The count is
  // branch-free; quantizing a model is dominated by this function.
  int c = 0;
  for (int i = 0; i < 15; ++i) c += v > 0.5f * (book[i] + book[i + 1]) ? 1 : 0;
  const bool finite = std::isfinite(v);  // ±inf and NaN: the full scan's answer
  const int lo = finite && c > 0 ? c - 1 : 0, hi = finite && c < 15 ? c + 1 : 15;
  int best = lo;
  float bd = std::fabs(v - book[lo]);
  for (int k = lo + 1; k <= hi; ++k) {
    const float d = std::fabs(v - book[k]);
    if (d < bd) {
      bd = d;
      best = k;
    }
  }
  return uint8_t(best);
}

uint8_t nearest_e2m1(float v) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float a = std::fabs(v);
  int best = 0;
  float bd = a;
  for (int c = 1; c < 8; ++c) {
    const float d = std::fabs(a - kMag[c]);
    if (d < bd || (d == bd && (c % 2 == 0) && (best % 2 == 1))) {
      bd = d;
      best = c;
    }
  }
  return uint8_t((std::signbit(v) && best != 0 ? 8 : 0) | best);
}

const float* bnb_dynamic_map() {
  static const std::vector<float> map = [] {
    // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    // for exponent i = 0..6, 2^i linearly spaced means in [0.1, 1] scaled by
    // 10^(i-6), both signs; plus 0 and 1; sorted.
    std::vector<float> d;
    for (int i = 0; i < 7; ++i) {
      const int items = (1 << i) + 1;
      std::vector<float> b(static_cast<size_t>(items));
      for (int k = 0; k < items; ++k) b[size_t(k)] = 0.1f + (1.0f - 0.1f) * float(k) / float(items - 1);
      const float scale = float(std::pow(10.0, double(i - 6)));
      for (int k = 0; k + 1 < items; ++k) {
        const float mean = (b[size_t(k)] + b[size_t(k) + 1]) / 2.0f;
        d.push_back(scale * mean);
        d.push_back(-scale * mean);
      }
    }
    d.push_back(0.0f);
    d.push_back(1.0f);
    std::sort(d.begin(), d.end());
    return d;
  }();
  return map.data();
}

uint8_t nearest_code256(const float* book, float v) {
  const float* p = std::lower_bound(book, book + 256, v);
  if (p == book) return 0;
  if (p == book + 256) return 255;
  const float* q = p - 1;
  return uint8_t((v - *q <= *p - v) ? q - book : p - book);
}

}  // namespace dgemma::quant
