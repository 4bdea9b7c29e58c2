#include "quantize/ggml_blocks.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "dgemma/error.h"

namespace dgemma::quant {
namespace {

// Little-endian fp16 at p, as fp32 (exact: every half is an fp32 number).
float half_at(const uint8_t* p) { return f16_to_f32(uint16_t(p[0] | (p[1] << 8))); }

// The low (j < 16) or high (j ≥ 16) nibble of byte j % 16 of `qs`: ggml's
// split-halves order for 32 codes in 16 bytes (docs/formats.md §5.2).
int split_nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

int levels_32(GgmlType type, const uint8_t* b, GgmlBlockLevels& o) {
  o.offset[0] = 0.0f;
  o.scale[0] = half_at(b);
  switch (type) {
    case GgmlType::kQ4_0:
      for (int j = 0; j < 32; ++j) o.levels[j] = int16_t(split_nibble(b + 2, j) - 8);
      break;
    case GgmlType::kQ4_1:
      o.offset[0] = half_at(b + 2);
      for (int j = 0; j < 32; ++j) o.levels[j] = int16_t(split_nibble(b + 4, j));
      break;
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: {
      const bool q51 = type == GgmlType::kQ5_1;
      if (q51) o.offset[0] = half_at(b + 2);
      const uint8_t* qh = b + (q51 ? 4 : 2);
      const uint32_t high = uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
      for (int j = 0; j < 32; ++j) {
        const int q = split_nibble(qh + 4, j) | int((high >> j) & 1) << 4;
        o.levels[j] = int16_t(q51 ? q : q - 16);
      }
      break;
    }
    case GgmlType::kQ8_0:
      for (int j = 0; j < 32; ++j) o.levels[j] = int16_t(int(b[2 + j]) - (b[2 + j] >= 128 ? 256 : 0));  // int8
      break;
    case GgmlType::kIQ4_NL:
      for (int j = 0; j < 32; ++j) o.levels[j] = kIq4Levels[split_nibble(b + 2, j)];
      break;
    default: throw Error("internal: ggml type " + std::string(ggml_type_name(type)) + " is not a 32-element block");
  }
  return 1;
}

int levels_q2_k(const uint8_t* b, GgmlBlockLevels& o) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int t = 0; t < 16; ++t) {
    o.scale[t] = d * float(sc[t] & 0xF);
    o.offset[t] = -(dmin * float(sc[t] >> 4));
  }
  for (int e = 0; e < 256; ++e) o.levels[e] = int16_t((qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3);
  return 16;
}

int levels_q3_k(const uint8_t* b, GgmlBlockLevels& o) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = half_at(b + 108);
  for (int t = 0; t < 16; ++t) {
    const int low = t < 8 ? sc[t] & 0xF : sc[t - 8] >> 4;
    const int high = (sc[8 + t % 4] >> (2 * (t / 4))) & 3;
    o.scale[t] = d * float((low | high << 4) - 32);
    o.offset[t] = 0.0f;
  }
  for (int e = 0; e < 256; ++e) {
    const int low = (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
    const bool high = (hmask[e % 32] >> (e / 32)) & 1;
    o.levels[e] = int16_t(high ? low : low - 4);
  }
  return 16;
}

// Q4_K (five_bits false) and Q5_K.
int levels_q45_k(const uint8_t* b, bool five_bits, GgmlBlockLevels& o) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (five_bits ? 48 : 16);
  for (int s = 0; s < 8; ++s) {
    int scale, min;
    k4_scale_min(sc, s, scale, min);
    o.scale[s] = d * float(scale);
    o.offset[s] = -(dmin * float(min));
  }
  for (int e = 0; e < 256; ++e) {
    const uint8_t byte = qs[32 * (e / 64) + e % 32];
    int q = (e % 64) < 32 ? byte & 0xF : byte >> 4;
    if (five_bits) q |= ((qh[e % 32] >> (e / 32)) & 1) << 4;
    o.levels[e] = int16_t(q);
  }
  return 8;
}

int levels_q6_k(const uint8_t* b, GgmlBlockLevels& o) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int t = 0; t < 16; ++t) {
    o.scale[t] = d * float(sc[t]);
    o.offset[t] = 0.0f;
  }
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint8_t low_byte = ql[64 * h + l + ((g & 1) ? 32 : 0)];
    const int low = g < 2 ? low_byte & 0xF : low_byte >> 4;
    const int high = (qh[32 * h + l] >> (2 * g)) & 3;
    o.levels[e] = int16_t((low | high << 4) - 32);
  }
  return 16;
}

int levels_iq4_xs(const uint8_t* b, GgmlBlockLevels& o) {
  const float d = half_at(b);
  const int scales_h = b[2] | b[3] << 8;
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int s = 0; s < 8; ++s) {
    const int ls = ((scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((scales_h >> (2 * s)) & 3) << 4;
    o.scale[s] = d * float(ls - 32);
    o.offset[s] = 0.0f;
    for (int j = 0; j < 32; ++j) o.levels[32 * s + j] = kIq4Levels[split_nibble(qs + 16 * s, j)];
  }
  return 8;
}

}  // namespace

int ggml_block_levels(GgmlType type, const uint8_t* block, GgmlBlockLevels& out) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL: return levels_32(type, block, out);
    case GgmlType::kQ2_K: return levels_q2_k(block, out);
    case GgmlType::kQ3_K: return levels_q3_k(block, out);
    case GgmlType::kQ4_K: return levels_q45_k(block, false, out);
    case GgmlType::kQ5_K: return levels_q45_k(block, true, out);
    case GgmlType::kQ6_K: return levels_q6_k(block, out);
    case GgmlType::kIQ4_XS: return levels_iq4_xs(block, out);
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16: break;
  }
  throw Error("internal: ggml type " + std::string(ggml_type_name(type)) + " has no integer levels");
}

void ggml_decode_row(GgmlType type, const uint8_t* row, int64_t col, int64_t n, float* out) {
  if (col < 0 || n < 0) throw Error("internal: ggml decode of " + std::to_string(n) + " at " + std::to_string(col));
  switch (type) {
    case GgmlType::kF32: std::memcpy(out, row + 4 * col, size_t(n) * 4); return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = half_at(row + 2 * (col + i));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t* p = row + 2 * (col + i);
        out[i] = bf16_to_f32(uint16_t(p[0] | (p[1] << 8)));
      }
      return;
    default: break;
  }
  const GgmlTypeTraits& tr = ggml_traits(type);
  const bool offset = tr.has_offset;
  GgmlBlockLevels lv;
  int64_t done = 0;
  while (done < n) {
    const int64_t c = col + done, blk = c / tr.block_elems;
    const int first = int(c % tr.block_elems);
    const int count = int(std::min<int64_t>(tr.block_elems - first, n - done));
    ggml_block_levels(type, row + blk * tr.block_bytes, lv);
    for (int e = first; e < first + count; ++e) {
      const int s = e / tr.sub_block;
      // scale·level is exact (docs/formats.md §5.2); the offset is the one
      // rounding. Types without an offset add nothing (−0 stays −0).
      const float v = lv.scale[s] * float(lv.levels[e]);
      out[done + (e - first)] = offset ? v + lv.offset[s] : v;
    }
    done += count;
  }
}

}  // namespace dgemma::quant
