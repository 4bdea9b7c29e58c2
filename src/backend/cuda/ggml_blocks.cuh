#pragma once
// ggml's block types on the device (docs/formats.md §5.2; docs/cuda.md §3.9):
// one element's integer level and one sub-block's fp32 scale and offset, read
// straight from the stored block, with the layouts and operations of the CPU
// reference decoder (quantize/ggml_blocks.cc ggml_block_levels) and of the
// CPU's integer path (backend/cpu/int8_dot_ggml.cc). Included by
// device_math.cuh; everything is internal to the including kernel file.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace dgemma::cuda {
namespace {

// The little-endian fp16 field at p as fp32, exactly (every half is an fp32
// number): by moving bits, subnormals as mantissa · 2^-24, Inf and NaN kept.
__device__ __forceinline__ float ggml_half(const uint8_t* p) {
  const uint32_t h = uint32_t(p[0]) | uint32_t(p[1]) << 8;
  const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (e == 0) {
    const float sub = float(man) * 5.9604644775390625e-8f;  // 2^-24: exact
    return sign ? -sub : sub;
  }
  const uint32_t u = e == 31 ? sign | 0x7F800000u | man << 13 : sign | (e + 112) << 23 | man << 13;
  return __uint_as_float(u);
}

// ggml's split-halves order of 32 codes in 16 bytes: element j < 16 in the low
// nibble of byte j, element j ≥ 16 in the high nibble of byte j - 16.
__device__ __forceinline__ int ggml_split_nibble(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
}

// The integer level of element e of the block at b. iq4: the 16 IQ4 levels
// (QView::ggml_iq4).
__device__ inline int ggml_level(GType t, const uint8_t* b, int e, const int16_t* iq4) {
  switch (t) {
    case GType::kQ4_0: return ggml_split_nibble(b + 2, e) - 8;
    case GType::kQ4_1: return ggml_split_nibble(b + 4, e);
    case GType::kQ5_0:
    case GType::kQ5_1: {
      const bool q51 = t == GType::kQ5_1;
      const uint8_t* qh = b + (q51 ? 4 : 2);
      const int q = ggml_split_nibble(qh + 4, e) | ((qh[e / 8] >> (e % 8)) & 1) << 4;
      return q51 ? q : q - 16;
    }
    case GType::kQ8_0: return int(b[2 + e]) - (b[2 + e] >= 128 ? 256 : 0);
    case GType::kIQ4_NL: return iq4[ggml_split_nibble(b + 2, e)];
    case GType::kQ2_K: return (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
    case GType::kQ3_K: {
      const int low = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
      return ((b[e % 32] >> (e / 32)) & 1) ? low : low - 4;
    }
    case GType::kQ4_K:
    case GType::kQ5_K: {
      const bool five = t == GType::kQ5_K;
      const uint8_t byte = b[(five ? 48 : 16) + 32 * (e / 64) + e % 32];
      int q = (e % 64) < 32 ? byte & 0xF : byte >> 4;
      if (five) q |= ((b[16 + e % 32] >> (e / 32)) & 1) << 4;
      return q;
    }
    case GType::kQ6_K: {
      const int h = e / 128, g = (e % 128) / 32, l = e % 32;
      const uint8_t low_byte = b[64 * h + l + ((g & 1) ? 32 : 0)];
      const int low = g < 2 ? low_byte & 0xF : low_byte >> 4;
      const int high = (b[128 + 32 * h + l] >> (2 * g)) & 3;
      return (low | high << 4) - 32;
    }
    case GType::kIQ4_XS: return iq4[ggml_split_nibble(b + 8 + 16 * (e / 32), e % 32)];
  }
  return 0;
}

// The scale and offset (0 for the types without one) of sub-block s (of
// ggml_traits' sub_block columns) of the block at b: fp16 fields times small
// integers, exact in fp32.
__device__ inline void ggml_sub_scale(GType t, const uint8_t* b, int s, float* scale, float* offset) {
  *offset = 0.0f;
  switch (t) {
    case GType::kQ4_0:
    case GType::kQ5_0:
    case GType::kQ8_0:
    case GType::kIQ4_NL: *scale = ggml_half(b); return;
    case GType::kQ4_1:
    case GType::kQ5_1:
      *scale = ggml_half(b);
      *offset = ggml_half(b + 2);
      return;
    case GType::kQ2_K: {
      const int sc = b[s];
      *scale = ggml_half(b + 80) * float(sc & 0xF);
      *offset = -(ggml_half(b + 82) * float(sc >> 4));
      return;
    }
    case GType::kQ3_K: {
      const uint8_t* sc = b + 96;
      const int low = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4, high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
      *scale = ggml_half(b + 108) * float((low | high << 4) - 32);
      return;
    }
    case GType::kQ4_K:
    case GType::kQ5_K: {
      const uint8_t* sc = b + 4;
      int m, v;
      if (s < 4) {
        v = sc[s] & 63;
        m = sc[s + 4] & 63;
      } else {
        v = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
        m = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
      }
      *scale = ggml_half(b) * float(v);
      *offset = -(ggml_half(b + 2) * float(m));
      return;
    }
    case GType::kQ6_K: *scale = ggml_half(b + 208) * float(int(b[192 + s]) - (b[192 + s] >= 128 ? 256 : 0)); return;
    case GType::kIQ4_XS: {
      const int hi = b[2] | b[3] << 8;
      const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 0xF) | ((hi >> (2 * s)) & 3) << 4;
      *scale = ggml_half(b) * float(ls - 32);
      return;
    }
  }
  *scale = 0.0f;
}

// The block holding column c of logical row `row`, and c's index in it.
__device__ __forceinline__ const uint8_t* ggml_block_at(const QView& q, const QSlice& s, int64_t row, int64_t c) {
  return s.codes + (row - s.row_begin) * q.ggml_row_bytes + (c / q.block) * q.ggml_block_bytes;
}

// Element (row, c) as quantize/ggml_blocks.cc ggml_decode_row computes it:
// scale·level is exact, the offset (types with one) the one rounding; the
// types without one add nothing, so −0 stays −0.
__device__ inline float load_ggml(const QView& q, const QSlice& s, int64_t row, int64_t c) {
  const GType t = q.ggml_type;
  const uint8_t* b = ggml_block_at(q, s, row, c);
  const int e = int(c % q.block);
  float scale, offset;
  ggml_sub_scale(t, b, e / q.ggml_sub, &scale, &offset);
  const float v = scale * float(ggml_level(t, b, e, q.ggml_iq4));
  return q.ggml_offset ? v + offset : v;
}

}  // namespace
}  // namespace dgemma::cuda
