#include "quantize/ggml_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "dgemma/error.h"
#include "quantize/ggml_blocks.h"
#include "quantize/quantizers.h"

namespace dgemma::quant {
namespace {

// Round to nearest, ties to even (the default rounding mode).
float rnd(float v) { return std::nearbyint(v); }
int clamp_int(float v, int lo, int hi) { return int(std::clamp(rnd(v), float(lo), float(hi))); }

// An fp16 field for a scale (saturating at fp16's largest finite value).
uint16_t half_bits(float v) { return f32_to_f16(std::clamp(v, -65504.0f, 65504.0f)); }
void put_half(uint8_t* p, uint16_t h) {
  p[0] = uint8_t(h & 0xFF);
  p[1] = uint8_t(h >> 8);
}

// A level set: the integers lo..hi, or (table) the 16 IQ4 levels.
struct LevelSet {
  int lo = 0, hi = 0;
  bool table = false;
  float low() const { return table ? float(kIq4Levels[0]) : float(lo); }
  float high() const { return table ? float(kIq4Levels[15]) : float(hi); }
  // The code (0-based index) of the level nearest y, and its value.
  int code(float y) const {
    if (!table) return clamp_int(y, lo, hi) - lo;
    int best = 0;
    float bd = std::fabs(y - float(kIq4Levels[0]));
    for (int i = 1; i < 16; ++i) {
      const float dist = std::fabs(y - float(kIq4Levels[i]));
      if (dist < bd) bd = dist, best = i;
    }
    return best;
  }
  float value(int c) const { return table ? float(kIq4Levels[c]) : float(c + lo); }
};

// Relative steps of the scale search around the nominal scale.
constexpr int kSearchSteps = 5;
constexpr float kSearchStep = 0.05f;

// A scale s with x ≈ s·level (levels of `set`): candidate scales around
// the ones mapping the largest |x| onto either end of the set, each refined by
// least squares for the codes it gives; the one with the smallest squared
// error wins (docs/formats.md §5.2 "Quantizers").
float fit_symmetric(const float* x, int n, const LevelSet& set) {
  float amax = 0.0f, xm = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), xm = x[i];
  if (amax == 0.0f) return 0.0f;
  double sum_x2 = 0;
  for (int i = 0; i < n; ++i) sum_x2 += double(x[i]) * x[i];
  double best_err = INFINITY;
  float best = xm / (xm > 0 ? set.high() : set.low());
  for (const float end : {set.high(), set.low()}) {
    if (end == 0.0f) continue;
    for (int t = -kSearchSteps; t <= kSearchSteps; ++t) {
      const float s = xm / end * (1.0f + kSearchStep * float(t));
      if (!(s != 0.0f)) continue;
      double sxv = 0, svv = 0;
      for (int i = 0; i < n; ++i) {
        const double v = set.value(set.code(x[i] / s));
        sxv += double(x[i]) * v;
        svv += v * v;
      }
      if (svv == 0) continue;
      const double err = sum_x2 - sxv * sxv / svv;
      if (err < best_err) best_err = err, best = float(sxv / svv);
    }
  }
  return best;
}

// A scale s ≥ 0 and offset m with x ≈ s·q + m, q ∈ 0..qmax (m ≤ 0 when
// `nonpositive`, as the K-quants store −dmin·min with min ≥ 0): candidate
// scales spanning [min, max], each refined by least squares on (s, m) for
// its codes; the smallest squared error wins.
void fit_affine(const float* x, int n, int qmax, bool nonpositive, float& scale, float& offset) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) mn = std::min(mn, x[i]), mx = std::max(mx, x[i]);
  if (nonpositive) mn = std::min(mn, 0.0f);
  scale = 0.0f;
  offset = mn;
  if (!(mx > mn)) return;
  double best_err = INFINITY;
  for (int t = -kSearchSteps; t <= kSearchSteps; ++t) {
    const float s0 = (mx - mn) / float(qmax) * (1.0f + kSearchStep * float(t));
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    int q[kGgmlMaxBlock];
    for (int i = 0; i < n; ++i) {
      q[i] = clamp_int((x[i] - mn) / s0, 0, qmax);
      sq += q[i];
      sqq += double(q[i]) * q[i];
      sx += x[i];
      sxq += double(x[i]) * q[i];
    }
    double s = s0, m = mn;
    const double det = n * sqq - sq * sq;
    if (det > 0) {
      s = (n * sxq - sq * sx) / det;
      m = (sx - s * sq) / n;
    }
    if (nonpositive && m > 0) {
      m = 0;
      s = sqq > 0 ? sxq / sqq : s0;
    }
    if (!(s > 0)) s = s0, m = mn;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double r = x[i] - (s * q[i] + m);
      err += r * r;
    }
    if (err < best_err) best_err = err, scale = float(s), offset = float(m);
  }
}

// ---- packing (docs/formats.md §5.2 layouts) --------------------------------
// 32 codes of 4 bits in 16 bytes, ggml's split halves: byte j holds codes j
// (low nibble) and j + 16 (high nibble).
void put_split_nibbles(uint8_t* qs, const int* codes) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((codes[j] & 0xF) | (codes[j + 16] & 0xF) << 4);
}

// Q4_0, Q5_0, Q8_0, IQ4_NL: one fp16 scale, codes of `set`.
void quantize_sym32(GgmlType type, const float* x, uint8_t* b) {
  LevelSet set;
  if (type == GgmlType::kQ4_0) set = {-8, 7, false};
  if (type == GgmlType::kQ5_0) set = {-16, 15, false};
  if (type == GgmlType::kQ8_0) set = {-127, 127, false};
  if (type == GgmlType::kIQ4_NL) set = {0, 0, true};
  float s;
  if (type == GgmlType::kQ8_0) {  // 8 bits: the largest |x| on ±127
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    s = amax / 127.0f;
  } else {
    s = fit_symmetric(x, 32, set);
  }
  const uint16_t dh = half_bits(s);
  const float d = f16_to_f32(dh);
  put_half(b, dh);
  int codes[32];
  const int zero = set.table ? 8 : -set.lo;  // any code gives 0 with d = 0
  for (int j = 0; j < 32; ++j) codes[j] = d != 0.0f ? set.code(x[j] / d) : zero;
  if (type == GgmlType::kQ8_0) {
    for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(codes[j] + set.lo));
  } else if (type == GgmlType::kQ5_0) {
    uint32_t high = 0;
    for (int j = 0; j < 32; ++j) high |= uint32_t(codes[j] >> 4) << j;
    for (int k = 0; k < 4; ++k) b[2 + k] = uint8_t(high >> (8 * k));
    put_split_nibbles(b + 6, codes);
  } else {
    put_split_nibbles(b + 2, codes);
  }
}

// Q4_1, Q5_1: fp16 scale and offset.
void quantize_affine32(GgmlType type, const float* x, uint8_t* b) {
  const bool five = type == GgmlType::kQ5_1;
  const int qmax = five ? 31 : 15;
  float s, m;
  fit_affine(x, 32, qmax, false, s, m);
  const uint16_t dh = half_bits(s), mh = half_bits(m);
  const float d = f16_to_f32(dh), mf = f16_to_f32(mh);
  put_half(b, dh);
  put_half(b + 2, mh);
  int codes[32];
  for (int j = 0; j < 32; ++j) codes[j] = d != 0.0f ? clamp_int((x[j] - mf) / d, 0, qmax) : 0;
  if (five) {
    uint32_t high = 0;
    for (int j = 0; j < 32; ++j) high |= uint32_t(codes[j] >> 4) << j;
    for (int k = 0; k < 4; ++k) b[4 + k] = uint8_t(high >> (8 * k));
    put_split_nibbles(b + 8, codes);
  } else {
    put_split_nibbles(b + 4, codes);
  }
}

// The super-block scale of sub-block scales `v` coded as integers up to
// `imax` in magnitude: the fp16 bits of max|v| / imax.
uint16_t super_scale(const float* v, int count, int imax) {
  float amax = 0.0f;
  for (int i = 0; i < count; ++i) amax = std::max(amax, std::fabs(v[i]));
  return half_bits(amax / float(imax));
}

// Q2_K (sub 16, 2 bits, 4-bit scales/mins), Q4_K, Q5_K (sub 32, 4/5 bits,
// 6-bit scales/mins): per sub-block an affine fit, the scales and the
// (negated) offsets coded against fp16 d and dmin, then the codes against
// the coded values. Fills the integer fields; the caller packs them.
struct AffineK {
  uint16_t d = 0, dmin = 0;
  int sc[16] = {}, mn[16] = {};
  int q[256] = {};
};
AffineK quantize_affine_k(const float* x, int sub, int qmax, int smax) {
  const int subs = 256 / sub;
  float s[16], o[16];
  for (int t = 0; t < subs; ++t) {
    float m;
    fit_affine(x + sub * t, sub, qmax, true, s[t], m);
    o[t] = -m;
  }
  AffineK k;
  k.d = super_scale(s, subs, smax);
  k.dmin = super_scale(o, subs, smax);
  const float d = f16_to_f32(k.d), dmin = f16_to_f32(k.dmin);
  for (int t = 0; t < subs; ++t) {
    k.sc[t] = d > 0.0f ? clamp_int(s[t] / d, 0, smax) : 0;
    k.mn[t] = dmin > 0.0f ? clamp_int(o[t] / dmin, 0, smax) : 0;
    const float scale = d * float(k.sc[t]), offset = -(dmin * float(k.mn[t]));
    for (int e = sub * t; e < sub * (t + 1); ++e)
      k.q[e] = scale > 0.0f ? clamp_int((x[e] - offset) / scale, 0, qmax) : 0;
  }
  return k;
}

void quantize_q2_k(const float* x, uint8_t* b) {
  const AffineK k = quantize_affine_k(x, 16, 3, 15);
  for (int t = 0; t < 16; ++t) b[t] = uint8_t(k.sc[t] | k.mn[t] << 4);
  uint8_t* qs = b + 16;
  std::memset(qs, 0, 64);
  for (int e = 0; e < 256; ++e) qs[32 * (e / 128) + e % 32] |= uint8_t(k.q[e] << (2 * ((e / 32) % 4)));
  put_half(b + 80, k.d);
  put_half(b + 82, k.dmin);
}

void quantize_q45_k(const float* x, bool five, uint8_t* b) {
  const AffineK k = quantize_affine_k(x, 32, five ? 31 : 15, 63);
  put_half(b, k.d);
  put_half(b + 2, k.dmin);
  uint8_t* sc = b + 4;
  for (int s = 0; s < 4; ++s) {
    sc[s] = uint8_t((k.sc[s] & 63) | (k.sc[s + 4] >> 4) << 6);
    sc[s + 4] = uint8_t((k.mn[s] & 63) | (k.mn[s + 4] >> 4) << 6);
    sc[s + 8] = uint8_t((k.sc[s + 4] & 0xF) | (k.mn[s + 4] & 0xF) << 4);
  }
  uint8_t* qh = b + 16;
  uint8_t* qs = b + (five ? 48 : 16);
  if (five) std::memset(qh, 0, 32);
  std::memset(qs, 0, 128);
  for (int e = 0; e < 256; ++e) {
    qs[32 * (e / 64) + e % 32] |= uint8_t((k.q[e] & 0xF) << ((e % 64) < 32 ? 0 : 4));
    if (five) qh[e % 32] |= uint8_t((k.q[e] >> 4) << (e / 32));
  }
}

// Q3_K, Q6_K (sub 16, signed levels and signed sub-block scales) and IQ4_XS
// (sub 32, table levels): per sub-block a symmetric fit, the scales coded
// against fp16 d as integers in [smin, smax], the codes against the coded
// scales. Returns the level codes (0-based in `set`).
struct SymK {
  uint16_t d = 0;
  int sc[16] = {};
  int code[256] = {};
};
SymK quantize_sym_k(const float* x, int sub, const LevelSet& set, int smin, int smax) {
  const int subs = 256 / sub;
  float s[16];
  for (int t = 0; t < subs; ++t) s[t] = fit_symmetric(x + sub * t, sub, set);
  SymK k;
  k.d = super_scale(s, subs, smax);
  const float d = f16_to_f32(k.d);
  const int zero = set.table ? 8 : -set.lo;
  for (int t = 0; t < subs; ++t) {
    k.sc[t] = d > 0.0f ? clamp_int(s[t] / d, smin, smax) : 0;
    const float scale = d * float(k.sc[t]);
    for (int e = sub * t; e < sub * (t + 1); ++e) k.code[e] = scale != 0.0f ? set.code(x[e] / scale) : zero;
  }
  return k;
}

void quantize_q3_k(const float* x, uint8_t* b) {
  const SymK k = quantize_sym_k(x, 16, {-4, 3, false}, -32, 31);
  uint8_t* hmask = b;
  uint8_t* qs = b + 32;
  uint8_t* sc = b + 96;
  std::memset(b, 0, 108);
  for (int t = 0; t < 16; ++t) {
    const int v = k.sc[t] + 32;
    sc[t % 8] |= uint8_t((v & 0xF) << (t < 8 ? 0 : 4));
    sc[8 + t % 4] |= uint8_t((v >> 4) << (2 * (t / 4)));
  }
  for (int e = 0; e < 256; ++e) {
    const int level = k.code[e] - 4;  // −4..3
    qs[32 * (e / 128) + e % 32] |= uint8_t((level & 3) << (2 * ((e / 32) % 4)));
    if (level >= 0) hmask[e % 32] |= uint8_t(1 << (e / 32));
  }
  put_half(b + 108, k.d);
}

void quantize_q6_k(const float* x, uint8_t* b) {
  const SymK k = quantize_sym_k(x, 16, {-32, 31, false}, -128, 127);
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  std::memset(b, 0, 192);
  for (int e = 0; e < 256; ++e) {
    const int q = k.code[e];  // 0..63 = level + 32
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    ql[64 * h + l + ((g & 1) ? 32 : 0)] |= uint8_t((q & 0xF) << (g < 2 ? 0 : 4));
    qh[32 * h + l] |= uint8_t((q >> 4) << (2 * g));
  }
  for (int t = 0; t < 16; ++t) b[192 + t] = uint8_t(int8_t(k.sc[t]));
  put_half(b + 208, k.d);
}

void quantize_iq4_xs(const float* x, uint8_t* b) {
  const SymK k = quantize_sym_k(x, 32, {0, 0, true}, -32, 31);
  put_half(b, k.d);
  int scales_h = 0;
  std::memset(b + 4, 0, 4);
  for (int s = 0; s < 8; ++s) {
    const int ls = k.sc[s] + 32;
    b[4 + s / 2] |= uint8_t((ls & 0xF) << (4 * (s % 2)));
    scales_h |= (ls >> 4) << (2 * s);
    put_split_nibbles(b + 8 + 16 * s, k.code + 32 * s);
  }
  b[2] = uint8_t(scales_h & 0xFF);
  b[3] = uint8_t(scales_h >> 8);
}

void quantize_block(GgmlType type, const float* x, uint8_t* b) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL: return quantize_sym32(type, x, b);
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1: return quantize_affine32(type, x, b);
    case GgmlType::kQ2_K: return quantize_q2_k(x, b);
    case GgmlType::kQ3_K: return quantize_q3_k(x, b);
    case GgmlType::kQ4_K: return quantize_q45_k(x, false, b);
    case GgmlType::kQ5_K: return quantize_q45_k(x, true, b);
    case GgmlType::kQ6_K: return quantize_q6_k(x, b);
    case GgmlType::kIQ4_XS: return quantize_iq4_xs(x, b);
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16: break;
  }
  throw Error("internal: ggml type " + std::string(ggml_type_name(type)) + " is not a block type");
}

}  // namespace

void ggml_quantize_row(GgmlType type, const float* x, int64_t n, uint8_t* out) {
  const GgmlTypeTraits& tr = ggml_traits(type);
  if (n < 0 || n % tr.block_elems != 0)
    throw Error("ggml " + std::string(tr.name) + ": a row of " + std::to_string(n) +
                " elements is not a whole number of blocks of " + std::to_string(tr.block_elems));
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      throw Error("ggml " + std::string(tr.name) + ": element " + std::to_string(i) + " is not finite (" +
                  std::to_string(x[i]) + ")");
  switch (type) {
    case GgmlType::kF32: std::memcpy(out, x, size_t(n) * 4); return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) put_half(out + 2 * i, f32_to_f16(x[i]));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) put_half(out + 2 * i, f32_to_bf16(x[i]));
      return;
    default: break;
  }
  for (int64_t b = 0; b < n / tr.block_elems; ++b)
    quantize_block(type, x + b * tr.block_elems, out + b * tr.block_bytes);
}

void ggml_quantize_rows(GgmlType type, const float* x, int64_t rows, int64_t cols, uint8_t* out, int threads) {
  const uint64_t row_bytes = ggml_row_bytes(type, cols);
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ggml_quantize_row(type, x + r * cols, cols, out + uint64_t(r) * row_bytes);
  };
  // Rows are independent, so the split only decides who computes which.
  constexpr int64_t kMinElemsPerThread = int64_t(1) << 16;
  const int64_t t = std::clamp<int64_t>(rows * cols / kMinElemsPerThread, 1,
                                        std::min<int64_t>(rows, resolve_quantize_threads(threads)));
  if (t <= 1) return run(0, rows);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(t));
  std::vector<std::thread> workers;
  auto part = [&](int64_t i) {
    try {
      run(rows * i / t, rows * (i + 1) / t);
    } catch (...) {
      errors[size_t(i)] = std::current_exception();
    }
  };
  for (int64_t i = 1; i < t; ++i) workers.emplace_back(part, i);
  part(0);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace dgemma::quant
