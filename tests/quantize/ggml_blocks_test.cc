// ggml block types (docs/formats.md §5.2) through dequantize_reference: an
// independent packer places logical block parameters (fp16 scale bits,
// sub-block scale and min fields, per-element codes) at the bit positions of
// a per-type table written in positional form ("code bit j of element e is
// bit b of byte B"), the expected value is computed from the logical
// parameters in double (exact) and rounded once to fp32, and the decoder must
// give those bits exactly, for random blocks and the extremes of every field.
// Then the integer-level view against the decoder, the quantizers' round trip
// (relative RMS on a Gaussian row, printed, with a bound per type), their
// determinism across thread counts, and the errors for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "dgemma/error.h"
#include "quantize/ggml_blocks.h"
#include "quantize/ggml_quantize.h"
#include "quantize/quantized_weight.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

struct Loc {
  int byte, bit;
};
using LocFn = std::function<Loc(int index, int bit)>;

// One field family of a block: `count` values of `bits` bits, bit j of value
// i at loc(i, j).
struct Field {
  int count = 0, bits = 0;
  LocFn loc;
};

// The IQ4 level table, as docs/formats.md §5.2 lists it.
constexpr int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// A type's layout and value formula in terms of its logical fields:
// value(e) = d · S(scale field of e's sub-block) · L(code of e) − dmin · M(min field)
// (Q4_1/Q5_1: + m, stored in the dmin slot).
struct Layout {
  GgmlType type = GgmlType::kF32;
  int d_byte = 0, dmin_byte = -1;  // −1: absent
  bool dmin_added = false;
  int sub = 32;
  Field codes, scales, mins;
  std::function<double(int)> level;  // code → integer level
  std::function<double(int)> scale;  // scale field → multiplier of d (1 when no field)
};

Loc at(int byte, int bit) { return {byte, bit}; }

Layout layout(GgmlType type, int d_byte, int dmin_byte, bool dmin_added = false) {
  Layout l;
  l.type = type;
  l.d_byte = d_byte;
  l.dmin_byte = dmin_byte;
  l.dmin_added = dmin_added;
  return l;
}

// Element e's 4-bit code in ggml's split halves at byte offset `base`.
Loc split(int base, int e, int j) { return at(base + e % 16, j + 4 * (e / 16)); }

std::vector<Layout> layouts() {
  std::vector<Layout> v;
  auto id = [](int x) { return double(x); };
  auto one = [](int) { return 1.0; };
  {  // Q4_0: d @0, 32 nibbles @2; level code − 8
    Layout l = layout(GgmlType::kQ4_0, 0, -1);
    l.codes = {32, 4, [](int e, int j) { return split(2, e, j); }};
    l.level = [](int c) { return double(c - 8); };
    l.scale = one;
    v.push_back(l);
  }
  {  // Q4_1: d @0, m @2, nibbles @4; value d·code + m
    Layout l = layout(GgmlType::kQ4_1, 0, 2, true);
    l.codes = {32, 4, [](int e, int j) { return split(4, e, j); }};
    l.level = id;
    l.scale = one;
    v.push_back(l);
  }
  {  // Q5_0: d @0, 32 fifth bits @2 (bit e of a LE u32), nibbles @6; level code − 16
    Layout l = layout(GgmlType::kQ5_0, 0, -1);
    l.codes = {32, 5, [](int e, int j) { return j < 4 ? split(6, e, j) : at(2 + e / 8, e % 8); }};
    l.level = [](int c) { return double(c - 16); };
    l.scale = one;
    v.push_back(l);
  }
  {  // Q5_1: d @0, m @2, fifth bits @4, nibbles @8
    Layout l = layout(GgmlType::kQ5_1, 0, 2, true);
    l.codes = {32, 5, [](int e, int j) { return j < 4 ? split(8, e, j) : at(4 + e / 8, e % 8); }};
    l.level = id;
    l.scale = one;
    v.push_back(l);
  }
  {  // Q8_0: d @0, int8 codes @2
    Layout l = layout(GgmlType::kQ8_0, 0, -1);
    l.codes = {32, 8, [](int e, int j) { return at(2 + e, j); }};
    l.level = [](int c) { return double(int8_t(uint8_t(c))); };
    l.scale = one;
    v.push_back(l);
  }
  {  // IQ4_NL: as Q4_0, level through the table
    Layout l = layout(GgmlType::kIQ4_NL, 0, -1);
    l.codes = {32, 4, [](int e, int j) { return split(2, e, j); }};
    l.level = [](int c) { return double(kIq4[c]); };
    l.scale = one;
    v.push_back(l);
  }
  {  // Q2_K: scales/mins nibbles @0 (scale low), 2-bit codes @16 (four per byte, 32-element groups), d @80, dmin @82
    Layout l = layout(GgmlType::kQ2_K, 80, 82);
    l.sub = 16;
    l.codes = {256, 2, [](int e, int j) { return at(16 + 32 * (e / 128) + e % 32, 2 * ((e / 32) % 4) + j); }};
    l.scales = {16, 4, [](int t, int j) { return at(t, j); }};
    l.mins = {16, 4, [](int t, int j) { return at(t, 4 + j); }};
    l.level = id;
    l.scale = id;
    v.push_back(l);
  }
  {  // Q3_K: hmask @0 (third bit), 2-bit codes @32, 6-bit scales (+32) @96, d @108
    Layout l = layout(GgmlType::kQ3_K, 108, -1);
    l.sub = 16;
    l.codes = {256, 3, [](int e, int j) {
                 return j < 2 ? at(32 + 32 * (e / 128) + e % 32, 2 * ((e / 32) % 4) + j) : at(e % 32, e / 32);
               }};
    l.scales = {16, 6, [](int t, int j) {
                  return j < 4 ? at(96 + t % 8, j + 4 * (t / 8)) : at(104 + t % 4, 2 * (t / 4) + j - 4);
                }};
    l.level = [](int c) { return double((c & 3) - ((c & 4) ? 0 : 4)); };
    l.scale = [](int s) { return double(s - 32); };
    v.push_back(l);
  }
  for (const bool five : {false, true}) {  // Q4_K / Q5_K: d @0, dmin @2, 12 scale bytes @4, [qh @16], nibbles
    Layout l = layout(five ? GgmlType::kQ5_K : GgmlType::kQ4_K, 0, 2);
    const int qs = five ? 48 : 16;
    l.codes = {256, five ? 5 : 4, [qs](int e, int j) {
                 return j < 4 ? at(qs + 32 * (e / 64) + e % 32, j + 4 * ((e / 32) % 2)) : at(16 + e % 32, e / 32);
               }};
    // Sub-blocks 0-3: six bits in bytes 4-7 (scales) / 8-11 (mins); 4-7: low
    // four bits in the nibbles of bytes 12-15, high two in bits 6-7 of bytes
    // 4-7 / 8-11.
    l.scales = {8, 6, [](int s, int j) {
                  if (s < 4) return at(4 + s, j);
                  return j < 4 ? at(12 + s - 4, j) : at(4 + s - 4, 6 + j - 4);
                }};
    l.mins = {8, 6, [](int s, int j) {
                if (s < 4) return at(8 + s, j);
                return j < 4 ? at(12 + s - 4, 4 + j) : at(8 + s - 4, 6 + j - 4);
              }};
    l.level = id;
    l.scale = id;
    v.push_back(l);
  }
  {  // Q6_K: low nibbles @0, high pairs @128, int8 scales @192, d @208
    Layout l = layout(GgmlType::kQ6_K, 208, -1);
    l.sub = 16;
    l.codes = {256, 6, [](int e, int j) {
                 const int h = e / 128, g = (e % 128) / 32, i = e % 32;
                 return j < 4 ? at(64 * h + 32 * (g % 2) + i, 4 * (g / 2) + j) : at(128 + 32 * h + i, 2 * g + j - 4);
               }};
    l.scales = {16, 8, [](int t, int j) { return at(192 + t, j); }};
    l.level = [](int c) { return double(c - 32); };
    l.scale = [](int s) { return double(int8_t(uint8_t(s))); };
    v.push_back(l);
  }
  {  // IQ4_XS: d @0, high scale bits (u16) @2, low scale nibbles @4, 16 nibble bytes per sub-block @8
    Layout l = layout(GgmlType::kIQ4_XS, 0, -1);
    l.codes = {256, 4, [](int e, int j) { return at(8 + 16 * (e / 32) + e % 16, j + 4 * ((e % 32) / 16)); }};
    l.scales = {8, 6, [](int s, int j) {
                  if (j < 4) return at(4 + s / 2, 4 * (s % 2) + j);
                  const int bit = 2 * s + j - 4;
                  return at(2 + bit / 8, bit % 8);
                }};
    l.level = [](int c) { return double(kIq4[c]); };
    l.scale = [](int s) { return double(s - 32); };
    v.push_back(l);
  }
  return v;
}

// A block's logical parameters.
struct Logical {
  uint16_t d = 0, dmin = 0;
  std::vector<int> codes, scales, mins;
};

void place(const Field& f, const std::vector<int>& values, std::vector<uint8_t>& bytes, std::vector<int>& owner) {
  for (int i = 0; i < f.count; ++i)
    for (int j = 0; j < f.bits; ++j) {
      const Loc p = f.loc(i, j);
      ASSERT_GE(p.byte, 0);
      ASSERT_LT(p.byte, int(bytes.size()));
      ASSERT_TRUE(p.bit >= 0 && p.bit < 8);
      ++owner[size_t(p.byte) * 8 + size_t(p.bit)];
      if ((values[size_t(i)] >> j) & 1) bytes[size_t(p.byte)] |= uint8_t(1 << p.bit);
    }
}

void place_half(int at_byte, uint16_t h, std::vector<uint8_t>& bytes, std::vector<int>& owner) {
  for (int j = 0; j < 16; ++j) {
    ++owner[size_t(at_byte) * 8 + size_t(j)];
    if ((h >> j) & 1) bytes[size_t(at_byte) + size_t(j / 8)] |= uint8_t(1 << (j % 8));
  }
}

// The block's bytes; every bit of the block must be placed exactly once.
std::vector<uint8_t> pack(const Layout& l, const Logical& p) {
  const GgmlTypeTraits& tr = ggml_traits(l.type);
  std::vector<uint8_t> bytes(static_cast<size_t>(tr.block_bytes), 0);
  std::vector<int> owner(bytes.size() * 8, 0);
  place_half(l.d_byte, p.d, bytes, owner);
  if (l.dmin_byte >= 0) place_half(l.dmin_byte, p.dmin, bytes, owner);
  place(l.codes, p.codes, bytes, owner);
  if (l.scales.count) place(l.scales, p.scales, bytes, owner);
  if (l.mins.count) place(l.mins, p.mins, bytes, owner);
  for (size_t b = 0; b < owner.size(); ++b)
    EXPECT_EQ(owner[b], 1) << ggml_type_name(l.type) << ": bit " << b % 8 << " of byte " << b / 8;
  return bytes;
}

// Expected values: exact in double (docs/formats.md §5.2: at most ~51
// significant bits), rounded once to fp32.
std::vector<float> expected(const Layout& l, const Logical& p) {
  const double d = f16_to_f32(p.d), dmin = l.dmin_byte >= 0 ? f16_to_f32(p.dmin) : 0.0;
  std::vector<float> out;
  for (int e = 0; e < l.codes.count; ++e) {
    const int t = e / l.sub;
    const double s = l.scales.count ? l.scale(p.scales[size_t(t)]) : 1.0;
    const double v = (d * s) * l.level(p.codes[size_t(e)]);
    if (l.dmin_added)
      out.push_back(float(v + dmin));
    else if (l.mins.count)
      out.push_back(float(v - dmin * double(p.mins[size_t(t)])));
    else
      out.push_back(float(v));
  }
  return out;
}

// A finite fp16 bit pattern: any sign, subnormals included.
uint16_t random_half(Rng& rng) {
  for (;;) {
    const uint16_t h = uint16_t(rng.uniform_int(0, 0xFFFF));
    if (((h >> 10) & 0x1F) != 0x1F) return h;
  }
}

Logical random_logical(const Layout& l, Rng& rng) {
  Logical p;
  p.d = random_half(rng);
  p.dmin = random_half(rng);
  for (int i = 0; i < l.codes.count; ++i) p.codes.push_back(int(rng.uniform_int(0, (1 << l.codes.bits) - 1)));
  for (int i = 0; i < l.scales.count; ++i) p.scales.push_back(int(rng.uniform_int(0, (1 << l.scales.bits) - 1)));
  for (int i = 0; i < l.mins.count; ++i) p.mins.push_back(int(rng.uniform_int(0, (1 << l.mins.bits) - 1)));
  return p;
}

// Every field at 0 or at its largest value, d and dmin given.
Logical extreme_logical(const Layout& l, bool codes_max, bool fields_max, uint16_t d, uint16_t dmin) {
  Logical p;
  p.d = d;
  p.dmin = dmin;
  p.codes.assign(size_t(l.codes.count), codes_max ? (1 << l.codes.bits) - 1 : 0);
  p.scales.assign(size_t(l.scales.count), fields_max ? (1 << l.scales.bits) - 1 : 0);
  p.mins.assign(size_t(l.mins.count), fields_max ? (1 << l.mins.bits) - 1 : 0);
  return p;
}

// A QuantizedWeight of `rows` rows of `cols` elements over `bytes`.
std::unique_ptr<QuantizedWeight> ggml_weight(GgmlType type, int64_t rows, int64_t cols, const uint8_t* bytes) {
  auto w = std::make_unique<QuantizedWeight>();
  w->scheme = QuantScheme::kGgml;
  w->ggml_type = type;
  w->shape = {rows, cols};
  w->dtype = DType::kF32;
  w->rows = rows;
  w->cols = cols;
  w->block = ggml_traits(type).block_elems;
  QuantSlice s;
  s.row_begin = 0;
  s.rows = rows;
  s.codes = bytes;
  w->slices.push_back(s);
  return w;
}

std::vector<float> decode(GgmlType type, const std::vector<uint8_t>& bytes, int64_t elems) {
  auto w = ggml_weight(type, 1, elems, bytes.data());
  std::vector<float> out(static_cast<size_t>(elems));
  dequantize_reference(*w, 0, 0, elems, out.data());
  return out;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void expect_bitwise(const Layout& l, const Logical& p, const std::string& what) {
  const std::vector<float> want = expected(l, p);
  const std::vector<float> got = decode(l.type, pack(l, p), l.codes.count);
  for (size_t e = 0; e < want.size(); ++e)
    ASSERT_EQ(bits_of(got[e]), bits_of(want[e]))
        << ggml_type_name(l.type) << " " << what << " element " << e << ": got " << got[e] << " want " << want[e];
}

TEST(GgmlBlocks, DecodeMatchesIndependentPackerBitForBit) {
  Rng rng(20261206);
  for (const Layout& l : layouts()) {
    for (int i = 0; i < 300; ++i) expect_bitwise(l, random_logical(l, rng), "random block " + std::to_string(i));
    // Extremes: fields and codes at 0 and at their maxima, with the largest,
    // smallest normal, smallest subnormal and negative scales.
    for (const uint16_t d : {uint16_t(0x7BFF), uint16_t(0x0400), uint16_t(0x0001), uint16_t(0xFBFF), uint16_t(0x8000)})
      for (const bool cm : {false, true})
        for (const bool fm : {false, true}) expect_bitwise(l, extreme_logical(l, cm, fm, d, 0x3C00), "extreme");
  }
}

TEST(GgmlBlocks, EveryTypeHasALayoutCase) {
  int block_types = 0;
  for (const GgmlTypeTraits& t : kGgmlTypes) block_types += ggml_is_block(t.type);
  EXPECT_EQ(int(layouts().size()), block_types);
}

TEST(GgmlBlocks, LevelsViewGivesTheDecodedValues) {
  Rng rng(7);
  for (const Layout& l : layouts()) {
    const GgmlTypeTraits& tr = ggml_traits(l.type);
    const Logical p = random_logical(l, rng);
    const std::vector<uint8_t> bytes = pack(l, p);
    quant::GgmlBlockLevels lv;
    ASSERT_EQ(quant::ggml_block_levels(l.type, bytes.data(), lv) * tr.sub_block, tr.block_elems);
    const std::vector<float> want = expected(l, p);
    for (int e = 0; e < tr.block_elems; ++e) {
      // The level is the documented integer (docs/formats.md §5.2 table).
      ASSERT_EQ(double(lv.levels[e]), l.level(p.codes[size_t(e)])) << ggml_type_name(l.type) << " element " << e;
      ASSERT_GE(lv.levels[e], -128);
      ASSERT_LE(lv.levels[e], 127);
      const int s = e / tr.sub_block;
      const float v = lv.scale[s] * float(lv.levels[e]);
      const float value = tr.has_offset ? v + lv.offset[s] : v;
      ASSERT_EQ(bits_of(value), bits_of(want[size_t(e)])) << ggml_type_name(l.type) << " element " << e;
    }
  }
}

TEST(GgmlBlocks, PartialRowsAndRowStrideMatchTheWholeDecode) {
  Rng rng(11);
  for (const Layout& l : layouts()) {
    const int64_t blocks = 3, rows = 2, cols = blocks * l.codes.count;
    std::vector<uint8_t> bytes;
    for (int64_t b = 0; b < rows * blocks; ++b) {
      const std::vector<uint8_t> one = pack(l, random_logical(l, rng));
      bytes.insert(bytes.end(), one.begin(), one.end());
    }
    auto w = ggml_weight(l.type, rows, cols, bytes.data());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> whole(static_cast<size_t>(cols));
      dequantize_reference(*w, r, 0, cols, whole.data());
      // Row r is its own blocks decoded alone.
      const std::vector<uint8_t> row_bytes(bytes.begin() + r * int64_t(ggml_row_bytes(l.type, cols)),
                                           bytes.begin() + (r + 1) * int64_t(ggml_row_bytes(l.type, cols)));
      const std::vector<float> alone = decode(l.type, row_bytes, cols);
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(bits_of(whole[size_t(c)]), bits_of(alone[size_t(c)]));
      for (const int64_t col : {int64_t(1), int64_t(l.codes.count - 1), int64_t(l.codes.count + 5)}) {
        const int64_t n = cols - col - 3;
        std::vector<float> part(static_cast<size_t>(n));
        dequantize_reference(*w, r, col, n, part.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(part[size_t(i)]), bits_of(whole[size_t(col + i)]));
      }
    }
  }
}

TEST(GgmlBlocks, NanAndInfScalesDecodeWithoutTrapping) {
  for (const Layout& l : layouts()) {
    for (const uint16_t bad : {uint16_t(0x7C00), uint16_t(0xFC00), uint16_t(0x7E00)}) {
      const Logical p = extreme_logical(l, true, true, bad, bad);
      const std::vector<float> got = decode(l.type, pack(l, p), l.codes.count);
      // Non-zero levels times an infinite or NaN scale are not finite.
      for (int e = 0; e < l.codes.count; ++e) {
        if (l.level(p.codes[size_t(e)]) != 0) {
          EXPECT_FALSE(std::isfinite(got[size_t(e)])) << ggml_type_name(l.type);
        }
      }
    }
  }
}

TEST(GgmlBlocks, PlainRowsDecode) {
  const std::vector<float> v = {1.5f, -2.25f, 0.0f, 65504.0f, -0.0f, 3.0e-5f};
  std::vector<uint8_t> f32(v.size() * 4), f16(v.size() * 2), bf16(v.size() * 2);
  std::memcpy(f32.data(), v.data(), f32.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f32_to_f16(v[i]), b = f32_to_bf16(v[i]);
    std::memcpy(f16.data() + 2 * i, &h, 2);
    std::memcpy(bf16.data() + 2 * i, &b, 2);
  }
  const int64_t n = int64_t(v.size());
  const std::vector<float> a = decode(GgmlType::kF32, f32, n), b = decode(GgmlType::kF16, f16, n),
                           c = decode(GgmlType::kBF16, bf16, n);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(bits_of(a[i]), bits_of(v[i]));
    EXPECT_EQ(bits_of(b[i]), bits_of(f16_to_f32(f32_to_f16(v[i]))));
    EXPECT_EQ(bits_of(c[i]), bits_of(round_bf16(v[i])));
  }
}

// ---- quantizers -----------------------------------------------------------

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

struct Bound {
  GgmlType type;
  double max_rel_rms;
};
// Bounds a little above what each type's bits allow a Gaussian row
// (measured values are printed).
constexpr Bound kBounds[] = {
    {GgmlType::kQ8_0, 0.006},   {GgmlType::kQ6_K, 0.02},    {GgmlType::kQ5_0, 0.045}, {GgmlType::kQ5_1, 0.04},
    {GgmlType::kQ5_K, 0.04},    {GgmlType::kQ4_0, 0.09},    {GgmlType::kQ4_1, 0.08},  {GgmlType::kQ4_K, 0.08},
    {GgmlType::kIQ4_NL, 0.085}, {GgmlType::kIQ4_XS, 0.085}, {GgmlType::kQ3_K, 0.18},  {GgmlType::kQ2_K, 0.35},
};

TEST(GgmlQuantize, GaussianRowRoundTripWithinBounds) {
  const int64_t n = 256 * 64;
  const std::vector<float> x = normal_values(n, 99, 0.02f);
  for (const Bound& b : kBounds) {
    std::vector<uint8_t> bytes(ggml_row_bytes(b.type, n));
    quant::ggml_quantize_row(b.type, x.data(), n, bytes.data());
    const double err = rel_rms(x, decode(b.type, bytes, n));
    std::printf("ggml %-7s relative RMS error %.5f (bound %.3f)\n", std::string(ggml_type_name(b.type)).c_str(), err,
                b.max_rel_rms);
    EXPECT_LT(err, b.max_rel_rms) << ggml_type_name(b.type);
  }
}

TEST(GgmlQuantize, CodesAreNearestForTheStoredScales) {
  // Each element's decoded value is at least as close to the input as the
  // next level up or down in its sub-block (codes recomputed against the
  // rounded scales).
  const int64_t n = 256 * 8;
  const std::vector<float> x = normal_values(n, 5, 1.0f);
  for (const Bound& b : kBounds) {
    const GgmlTypeTraits& tr = ggml_traits(b.type);
    std::vector<uint8_t> bytes(ggml_row_bytes(b.type, n));
    quant::ggml_quantize_row(b.type, x.data(), n, bytes.data());
    const bool table = b.type == GgmlType::kIQ4_NL || b.type == GgmlType::kIQ4_XS;
    quant::GgmlBlockLevels lv;
    for (int64_t blk = 0; blk < n / tr.block_elems; ++blk) {
      quant::ggml_block_levels(b.type, bytes.data() + blk * tr.block_bytes, lv);
      for (int e = 0; e < tr.block_elems; ++e) {
        const int s = e / tr.sub_block;
        const double xv = x[size_t(blk * tr.block_elems + e)];
        auto value = [&](double level) { return double(lv.scale[s]) * level + (tr.has_offset ? lv.offset[s] : 0.0); };
        const double err = std::fabs(xv - value(lv.levels[e]));
        if (table) {
          for (const int16_t k : quant::kIq4Levels) ASSERT_LE(err, std::fabs(xv - value(k)) * (1 + 1e-6) + 1e-12);
        } else {
          for (const int step : {-1, 1}) {
            const int other = lv.levels[e] + step;
            // Levels outside what the type's codes can hold are not candidates.
            int16_t lo = 0, hi = 0;
            switch (b.type) {
              case GgmlType::kQ8_0: lo = -127, hi = 127; break;
              case GgmlType::kQ6_K: lo = -32, hi = 31; break;
              case GgmlType::kQ5_0: lo = -16, hi = 15; break;
              case GgmlType::kQ4_0: lo = -8, hi = 7; break;
              case GgmlType::kQ3_K: lo = -4, hi = 3; break;
              case GgmlType::kQ5_1:
              case GgmlType::kQ5_K: lo = 0, hi = 31; break;
              case GgmlType::kQ4_1:
              case GgmlType::kQ4_K: lo = 0, hi = 15; break;
              case GgmlType::kQ2_K: lo = 0, hi = 3; break;
              default: FAIL();
            }
            if (other < lo || other > hi) continue;
            ASSERT_LE(err, std::fabs(xv - value(other)) * (1 + 1e-6) + 1e-12)
                << ggml_type_name(b.type) << " block " << blk << " element " << e;
          }
        }
      }
    }
  }
}

TEST(GgmlQuantize, BytesDoNotDependOnTheThreadCount) {
  const int64_t rows = 24, cols = 256 * 12;
  const std::vector<float> x = normal_values(rows * cols, 3, 1.0f);
  for (const Bound& b : kBounds) {
    std::vector<uint8_t> one(rows * ggml_row_bytes(b.type, cols)), many(one.size());
    quant::ggml_quantize_rows(b.type, x.data(), rows, cols, one.data(), 1);
    quant::ggml_quantize_rows(b.type, x.data(), rows, cols, many.data(), 5);
    EXPECT_EQ(one, many) << ggml_type_name(b.type);
    // And the same as quantizing each row alone.
    std::vector<uint8_t> row(ggml_row_bytes(b.type, cols));
    quant::ggml_quantize_row(b.type, x.data() + 7 * cols, cols, row.data());
    EXPECT_EQ(0, std::memcmp(row.data(), one.data() + 7 * row.size(), row.size())) << ggml_type_name(b.type);
  }
}

TEST(GgmlQuantize, ZeroAndConstantBlocks) {
  for (const Bound& b : kBounds) {
    const int64_t n = 256;
    for (const float c : {0.0f, 0.5f, -3.0f}) {
      const std::vector<float> x(static_cast<size_t>(n), c);
      std::vector<uint8_t> bytes(ggml_row_bytes(b.type, n));
      quant::ggml_quantize_row(b.type, x.data(), n, bytes.data());
      const std::vector<float> y = decode(b.type, bytes, n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[size_t(i)], c, std::fabs(c) * 0.02) << ggml_type_name(b.type);
    }
  }
}

TEST(GgmlQuantize, PlainTypesRoundToNearest) {
  const std::vector<float> x = {1.0f / 3.0f, -70000.0f, 1e-8f, 2.5f};
  std::vector<uint8_t> f16(8), bf16(8), f32(16);
  quant::ggml_quantize_row(GgmlType::kF16, x.data(), 4, f16.data());
  quant::ggml_quantize_row(GgmlType::kBF16, x.data(), 4, bf16.data());
  quant::ggml_quantize_row(GgmlType::kF32, x.data(), 4, f32.data());
  const std::vector<float> a = decode(GgmlType::kF16, f16, 4), b = decode(GgmlType::kBF16, bf16, 4),
                           c = decode(GgmlType::kF32, f32, 4);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(bits_of(a[i]), bits_of(f16_to_f32(f32_to_f16(x[i]))));
    EXPECT_EQ(bits_of(b[i]), bits_of(round_bf16(x[i])));
    EXPECT_EQ(bits_of(c[i]), bits_of(x[i]));
  }
}

TEST(GgmlQuantize, BadInputIsAClearError) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> out(4096);
  try {
    quant::ggml_quantize_row(GgmlType::kQ4_K, x.data(), 288, out.data());
    FAIL() << "a row of 288 is not whole Q4_K blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("288"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q4_K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quant::ggml_quantize_row(GgmlType::kQ8_0, x.data(), 33, out.data()), Error);
  x[40] = NAN;
  try {
    quant::ggml_quantize_row(GgmlType::kQ8_0, x.data(), 64, out.data());
    FAIL() << "NaN input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 40"), std::string::npos) << e.what();
  }
  x[40] = INFINITY;
  EXPECT_THROW(quant::ggml_quantize_rows(GgmlType::kQ6_K, x.data(), 1, 256, out.data(), 2), Error);
  quant::GgmlBlockLevels lv;
  EXPECT_THROW(quant::ggml_block_levels(GgmlType::kF16, out.data(), lv), Error);
}

}  // namespace
}  // namespace dgemma
