// Integer levels and scales of the ggml block types (int8_dot_ggml.h), block
// by block, in the layouts of docs/formats.md §5.2.
#include "backend/cpu/int8_dot_ggml.h"

#include <array>
#include <cstring>

#include "core/dtype.h"
#include "quantize/ggml_blocks.h"

namespace dgemma::cpu {
namespace {

// An fp16 field as fp32 (exact): normal numbers by moving the bits, the
// rest (zero, subnormals, Inf, NaN) by the general conversion.
inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const uint32_t e = (h >> 10) & 0x1F;
  if (e == 0 || e == 31) return f16_to_f32(h);
  const uint32_t u = (uint32_t(h & 0x8000) << 16) | ((e + 112) << 23) | (uint32_t(h & 0x3FF) << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The traits of a type by its id, without the table search per call.
const GgmlTypeTraits& traits(GgmlType t) {
  static const auto table = [] {
    std::array<const GgmlTypeTraits*, 64> a{};
    for (const GgmlTypeTraits& g : kGgmlTypes) a[size_t(g.type)] = &g;
    return a;
  }();
  const uint32_t id = uint32_t(t);
  return id < table.size() && table[id] ? *table[id] : ggml_traits(t);
}

// The 32-element types' 4-bit codes: byte j holds element j (low nibble) and
// element j + 16 (high nibble).
void split_nibbles(const uint8_t* qs, int bias, uint8_t* out) {
  for (int j = 0; j < 16; ++j) {
    out[j] = uint8_t((qs[j] & 0xF) - bias);
    out[j + 16] = uint8_t((qs[j] >> 4) - bias);
  }
}

// The fifth bit of Q5_0/Q5_1 element j: bit j of a little-endian u32.
void add_fifth_bits(const uint8_t* qh, int bias, uint8_t* out) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  for (int j = 0; j < 32; ++j) out[j] = uint8_t(out[j] + (((h >> j) & 1u) << 4) - bias);
}

void levels_block(GgmlType t, const uint8_t* b, uint8_t* out) {
  switch (t) {
    case GgmlType::kQ4_0: return split_nibbles(b + 2, 8, out);
    case GgmlType::kQ4_1: return split_nibbles(b + 4, 0, out);
    case GgmlType::kQ5_0: split_nibbles(b + 6, 0, out); return add_fifth_bits(b + 2, 16, out);
    case GgmlType::kQ5_1: split_nibbles(b + 8, 0, out); return add_fifth_bits(b + 4, 0, out);
    case GgmlType::kQ8_0: std::memcpy(out, b + 2, 32); return;
    case GgmlType::kIQ4_NL:
      for (int j = 0; j < 16; ++j) {
        out[j] = uint8_t(quant::kIq4Levels[b[2 + j] & 0xF]);
        out[j + 16] = uint8_t(quant::kIq4Levels[b[2 + j] >> 4]);
      }
      return;
    case GgmlType::kIQ4_XS:
      for (int s = 0; s < 8; ++s)
        for (int j = 0; j < 16; ++j) {
          const uint8_t c = b[8 + 16 * s + j];
          out[32 * s + j] = uint8_t(quant::kIq4Levels[c & 0xF]);
          out[32 * s + j + 16] = uint8_t(quant::kIq4Levels[c >> 4]);
        }
      return;
    case GgmlType::kQ4_K:
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
          const uint8_t q = b[16 + 32 * c + l];
          out[64 * c + l] = q & 0xF;
          out[64 * c + 32 + l] = q >> 4;
        }
      return;
    case GgmlType::kQ5_K:
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
          const uint8_t q = b[48 + 32 * c + l], h = b[16 + l];
          out[64 * c + l] = uint8_t((q & 0xF) | (((h >> (2 * c)) & 1) << 4));
          out[64 * c + 32 + l] = uint8_t((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4));
        }
      return;
    case GgmlType::kQ6_K:
      for (int h = 0; h < 2; ++h) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        uint8_t* o = out + 128 * h;
        for (int l = 0; l < 32; ++l) {
          o[l] = uint8_t(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
          o[l + 32] = uint8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
          o[l + 64] = uint8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          o[l + 96] = uint8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
      return;
    case GgmlType::kQ3_K:
      for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s)
          for (int l = 0; l < 32; ++l) {
            const int low = (b[32 + 32 * h + l] >> (2 * s)) & 3, high = (b[l] >> (4 * h + s)) & 1;
            out[128 * h + 32 * s + l] = uint8_t(low - (high ? 0 : 4));
          }
      return;
    default: return;  // never here: int8_dot_supported
  }
}

// Scales of one block: ws[s·stride] per sub-block, wb[b·stride] per 32
// columns for the types with an offset.
void scales_block(GgmlType t, const uint8_t* b, float* ws, float* wb, int64_t stride) {
  switch (t) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL: ws[0] = half_at(b); return;
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
      ws[0] = half_at(b);
      wb[0] = half_at(b + 2);
      return;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const float d = half_at(b), dmin = half_at(b + 2);
      for (int s = 0; s < 8; ++s) {
        int sc, m;
        quant::k4_scale_min(b + 4, s, sc, m);
        ws[s * stride] = d * float(sc);
        wb[s * stride] = -(dmin * float(m));
      }
      return;
    }
    case GgmlType::kQ6_K: {
      const float d = half_at(b + 208);
      for (int s = 0; s < 16; ++s) ws[s * stride] = d * float(int8_t(b[192 + s]));
      return;
    }
    case GgmlType::kQ3_K: {
      const float d = half_at(b + 108);
      const uint8_t* sc = b + 96;
      for (int s = 0; s < 16; ++s) {
        const int low = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4, high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
        ws[s * stride] = d * float((low | high << 4) - 32);
      }
      return;
    }
    case GgmlType::kIQ4_XS: {
      const float d = half_at(b);
      uint16_t hi;
      std::memcpy(&hi, b + 2, 2);
      for (int s = 0; s < 8; ++s) {
        const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 0xF) | (((hi >> (2 * s)) & 3) << 4);
        ws[s * stride] = d * float(ls - 32);
      }
      return;
    }
    default: return;  // never here: int8_dot_supported
  }
}

}  // namespace

int ggml_level_bound(GgmlType t) {
  switch (t) {
    case GgmlType::kQ3_K: return 4;  // −4..3
    case GgmlType::kQ4_0: return 8;
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K: return 15;
    case GgmlType::kQ5_0: return 16;
    case GgmlType::kQ5_1:
    case GgmlType::kQ5_K: return 31;
    case GgmlType::kQ6_K: return 32;
    default: return 128;  // Q8_0, the IQ4 tables (−127..113), anything else
  }
}

void ggml_levels(GgmlType t, const uint8_t* blocks, int64_t n, uint8_t* out) {
  const GgmlTypeTraits& g = traits(t);
  for (int64_t k = 0; k < n; k += g.block_elems, blocks += g.block_bytes) levels_block(t, blocks, out + k);
}

void ggml_scales(GgmlType t, const uint8_t* blocks, int64_t n, float* ws, float* wb, int64_t stride) {
  const GgmlTypeTraits& g = traits(t);
  const int64_t subs = g.block_elems / g.sub_block, bias_step = g.block_elems / 32;
  for (int64_t k = 0; k < n; k += g.block_elems, blocks += g.block_bytes) {
    scales_block(t, blocks, ws, wb, stride);
    ws += subs * stride;
    if (g.has_offset) wb += bias_step * stride;
  }
}

namespace {

constexpr int kLanes = 16;  // the rows of a tile (kI8TileRows)

// The fp16 fields of the 16 rows as fp32 (exact): normal numbers by moving
// the bits, lane by lane without a branch (so the loop vectorizes); zero,
// subnormals, Inf and NaN (rows past the tile's last among them) by the
// general conversion afterwards.
void halves_to_floats(const uint16_t (&h)[kLanes], float (&out)[kLanes]) {
  uint32_t u[kLanes];
  int special = 0;
  for (int j = 0; j < kLanes; ++j) {
    const uint32_t e = (uint32_t(h[j]) >> 10) & 0x1F;
    u[j] = (uint32_t(h[j] & 0x8000) << 16) | ((e + 112) << 23) | (uint32_t(h[j] & 0x3FF) << 13);
    special |= (e == 0) | (e == 31);
  }
  std::memcpy(out, u, sizeof u);
  if (special)
    for (int j = 0; j < kLanes; ++j) {
      const uint32_t e = (uint32_t(h[j]) >> 10) & 0x1F;
      if (e == 0 || e == 31) out[j] = f16_to_f32(h[j]);
    }
}

// Q4_K/Q5_K: per block, the eight 6-bit scales and mins of each row
// (docs/formats.md §5.2) from its 12 packed bytes as three little-endian
// words w0, w1, w2: scales 0..3 are the low 6 bits of w0's bytes, mins 0..3
// of w1's; scales 4..7 the low nibbles of w2 with w0's top two bits above
// them, mins 4..7 the high nibbles of w2 with w1's top two bits.
void k4_scales_tile(const uint8_t* const* rows, int nr, int64_t n, int64_t bytes, float* ws, float* wb) {
  for (int64_t bi = 0; bi < n / 256; ++bi) {
    uint32_t w0[kLanes] = {}, w1[kLanes] = {}, w2[kLanes] = {};
    uint16_t hd[kLanes] = {}, hmin[kLanes] = {};
    for (int j = 0; j < nr; ++j) {
      const uint8_t* b = rows[j] + bi * bytes;
      std::memcpy(&hd[j], b, 2);
      std::memcpy(&hmin[j], b + 2, 2);
      std::memcpy(&w0[j], b + 4, 4);
      std::memcpy(&w1[j], b + 8, 4);
      std::memcpy(&w2[j], b + 12, 4);
    }
    float d[kLanes], dmin[kLanes];
    halves_to_floats(hd, d);
    halves_to_floats(hmin, dmin);
    uint32_t sc[2][kLanes], mn[2][kLanes];
    for (int j = 0; j < kLanes; ++j) {
      sc[0][j] = w0[j] & 0x3F3F3F3Fu;
      mn[0][j] = w1[j] & 0x3F3F3F3Fu;
      sc[1][j] = (w2[j] & 0x0F0F0F0Fu) | (((w0[j] >> 6) & 0x03030303u) << 4);
      mn[1][j] = ((w2[j] >> 4) & 0x0F0F0F0Fu) | (((w1[j] >> 6) & 0x03030303u) << 4);
    }
    float* o = ws + bi * 8 * kLanes;
    float* ob = wb + bi * 8 * kLanes;
    for (int h = 0; h < 2; ++h)
      for (int byte = 0; byte < 4; ++byte) {
        const int s = 4 * h + byte;
        for (int j = 0; j < kLanes; ++j) {
          o[s * kLanes + j] = d[j] * float((sc[h][j] >> (8 * byte)) & 0xFFu);
          ob[s * kLanes + j] = -(dmin[j] * float((mn[h][j] >> (8 * byte)) & 0xFFu));
        }
      }
  }
}

// Q6_K: sixteen signed 8-bit scales per block after the levels, times the
// block's half d.
void q6k_scales_tile(const uint8_t* const* rows, int nr, int64_t n, float* ws) {
  constexpr int64_t kBytes = 210;
  for (int64_t bi = 0; bi < n / 256; ++bi) {
    int8_t sc[kLanes][16] = {};
    uint16_t hd[kLanes] = {};
    for (int j = 0; j < nr; ++j) {
      const uint8_t* b = rows[j] + bi * kBytes;
      std::memcpy(sc[j], b + 192, 16);
      std::memcpy(&hd[j], b + 208, 2);
    }
    float d[kLanes];
    halves_to_floats(hd, d);
    float* o = ws + bi * 16 * kLanes;
    for (int s = 0; s < 16; ++s)
      for (int j = 0; j < kLanes; ++j) o[s * kLanes + j] = d[j] * float(sc[j][s]);
  }
}

// The 32-element types without an offset: one half per block, first.
void half_scales_tile(const uint8_t* const* rows, int nr, int64_t n, int64_t bytes, float* ws) {
  for (int64_t bi = 0; bi < n / 32; ++bi) {
    uint16_t h[kLanes] = {};
    for (int j = 0; j < nr; ++j) std::memcpy(&h[j], rows[j] + bi * bytes, 2);
    float d[kLanes];
    halves_to_floats(h, d);
    std::memcpy(ws + bi * kLanes, d, sizeof d);
  }
}

}  // namespace

void ggml_scales_tile(GgmlType t, const uint8_t* const* rows, int nr, int64_t n, float* ws, float* wb) {
  switch (t) {
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: return k4_scales_tile(rows, nr, n, traits(t).block_bytes, ws, wb);
    case GgmlType::kQ6_K: return q6k_scales_tile(rows, nr, n, ws);
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL: return half_scales_tile(rows, nr, n, traits(t).block_bytes, ws);
    default: break;
  }
  const GgmlTypeTraits& g = traits(t);
  for (int j = 0; j < nr; ++j) ggml_scales(t, rows[j], n, ws + j, wb + j, kLanes);
  const int64_t subs = n / g.sub_block, offsets = n / 32;
  for (int j = nr; j < kLanes; ++j) {
    for (int64_t s = 0; s < subs; ++s) ws[s * kLanes + j] = 0.0f;
    if (g.has_offset)
      for (int64_t b = 0; b < offsets; ++b) wb[b * kLanes + j] = 0.0f;
  }
}

}  // namespace dgemma::cpu
