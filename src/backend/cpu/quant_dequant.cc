// Fast dequantization of a run of one row (the GEMM's inner expansion step):
// whole 16-element pieces go through the vector level (quant_simd.h), the
// ragged ends (runs that start or stop inside a block, NF4 blocks straddling
// rows) through the same formula element by element. All paths compute
// exactly dequantize_reference()'s values (tests/quantize/quant_kernels_test.cc).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/int8_dot_ggml.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_simd.h"
#include "quantize/integer_levels.h"
#include "quantize/format_tables.h"

namespace dgemma::cpu {
namespace {

// 4-bit code of element i of a packed stream.
inline int nibble(const uint8_t* codes, int64_t i, bool high_first) {
  const uint8_t b = codes[i / 2];
  return ((i % 2 == 0) == high_first) ? b >> 4 : b & 0xF;
}

void nf4_row(const QuantIsa& isa, const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  const uint8_t* codes = w.slices.front().codes;
  int64_t i = row * w.cols + col;
  const int64_t end = i + n;
  while (i < end) {
    const int64_t b = i / w.block, bend = std::min((b + 1) * w.block, end), len = bend - i;
    const float s = w.nf4_block_scale(b);
    if (i % 2 == 0 && len % 16 == 0) {
      isa.nibbles_scaled(codes + i / 2, len, true, w.code_map, s, out);
    } else {
      for (int64_t t = 0; t < len; ++t) out[t] = w.code_map[nibble(codes, i + t, true)] * s;
    }
    out += len;
    i = bend;
  }
}

void nvfp4_row(const QuantIsa& isa, const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  const QuantSlice& s = w.slice_for(row);
  const int64_t lr = row - s.row_begin;
  const uint8_t* codes = s.codes + lr * (w.cols / 2);
  const uint8_t* scales = s.scales + lr * (w.cols / w.block);
  const float* e4m3 = quant::e4m3_table();
  const float g = s.global_scale;
  int64_t c = col;
  const int64_t end = col + n;
  while (c < end) {
    if (w.block == 16 && c % 16 == 0 && end - c >= 16) {
      const int64_t blocks = (end - c) / 16;
      isa.nvfp4_blocks(codes + c / 2, scales + c / 16, blocks, g, quant::kE2m1Values, e4m3, out);
      out += blocks * 16;
      c += blocks * 16;
    } else {
      *out++ = (quant::kE2m1Values[nibble(codes, c, false)] * e4m3[scales[c / w.block]]) * g;
      ++c;
    }
  }
}

void affine_row(const QuantIsa& isa, const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  const QuantSlice& s = w.slice_for(row);
  const int64_t lr = row - s.row_begin, groups = w.cols / w.block;
  const uint8_t* codes = s.codes + lr * (w.cols * w.bits / 8);
  int64_t c = col;
  const int64_t end = col + n;
  while (c < end) {
    const int64_t g = c / w.block, gend = std::min((g + 1) * w.block, end), len = gend - c;
    const float scale = load_scale(w.scale_dtype, s.scales, lr * groups + g);
    const float bias = load_scale(w.scale_dtype, s.biases, lr * groups + g);
    if (w.bits == 4) {
      if (c % 2 == 0 && len % 16 == 0)
        isa.affine4(codes + c / 2, len, scale, bias, out);
      else
        for (int64_t t = 0; t < len; ++t) out[t] = std::fma(scale, float(nibble(codes, c + t, false)), bias);
    } else {
      if (len % 16 == 0)
        isa.affine8(codes + c, len, scale, bias, out);
      else
        for (int64_t t = 0; t < len; ++t) out[t] = std::fma(scale, float(codes[c + t]), bias);
    }
    out += len;
    c = gend;
  }
}

void int8_row(const QuantIsa& isa, const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  const QuantSlice& s = w.slice_for(row);
  const int64_t lr = row - s.row_begin, groups = w.cols / w.block;
  const int8_t* q = reinterpret_cast<const int8_t*>(s.codes) + lr * w.cols;
  int64_t c = col;
  const int64_t end = col + n;
  while (c < end) {
    const int64_t g = c / w.block, gend = std::min((g + 1) * w.block, end), len = gend - c;
    const float scale = load_f32(s.scales, lr * groups + g);
    if (len % 16 == 0)
      isa.int8(q + c, len, scale, out);
    else
      for (int64_t t = 0; t < len; ++t) out[t] = scale * float(q[c + t]);
    out += len;
    c = gend;
  }
}

// The E4M3FN value of each code (a 256-entry table) times the block's scale:
// the reference's product, so the same values at every level.
void fp8_row(const QuantIsa& isa, const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  const QuantSlice& s = w.slice_for(row);
  const int64_t lr = row - s.row_begin, groups = w.cols / w.block;
  const uint8_t* q = s.codes + lr * w.cols;
  const float* values = quant::e4m3_table();
  int64_t c = col;
  const int64_t end = col + n;
  while (c < end) {
    const int64_t g = c / w.block, gend = std::min((g + 1) * w.block, end), len = gend - c;
    const float scale = load_f32(s.scales, lr * groups + g);
    if (len % 16 == 0)
      isa.fp8(q + c, len, values, scale, out);
    else
      for (int64_t t = 0; t < len; ++t) out[t] = scale * values[q[c + t]];
    out += len;
    c = gend;
  }
}

// The value of a product kept as a value: an fma may not absorb it (the
// ggml formulas round the product, then add; docs/formats.md §5.2).
inline float rounded(float p) {
#if defined(__x86_64__)
  asm("" : "+x"(p));
#endif
  return p;
}

// ggml blocks: per element fl(fl(ws·V) + wb) from the block's levels and
// scales (int8_dot_ggml.h), ggml's order of operations for every type; Q2_K
// (not read there) by the reference.
void ggml_row(const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  if (!int8_dot_supported(w)) return dequantize_reference(w, row, col, n, out);
  const GgmlTypeTraits& g = ggml_traits(w.ggml_type);
  const QuantSlice& s = w.slice_for(row);
  const uint8_t* r = s.codes + int64_t(ggml_row_bytes(w.ggml_type, w.cols)) * (row - s.row_begin);
  const bool is_signed = !g.has_offset;
  uint8_t levels[256];
  float ws[16], wb[8] = {};
  for (int64_t b = col / g.block_elems, end = col + n; b * g.block_elems < end; ++b) {
    ggml_levels(w.ggml_type, r + b * g.block_bytes, g.block_elems, levels);
    ggml_scales(w.ggml_type, r + b * g.block_bytes, g.block_elems, ws, wb, 1);
    const int64_t k0 = b * g.block_elems, e0 = std::max(col, k0) - k0, e1 = std::min(end, k0 + g.block_elems) - k0;
    for (int64_t e = e0; e < e1; ++e) {
      const float p = ws[e / g.sub_block] * float(is_signed ? int(int8_t(levels[e])) : int(levels[e]));
      out[k0 + e - col] = g.has_offset ? rounded(p) + wb[e / 32] : p;
    }
  }
}

}  // namespace

void dequantize_row(const QuantIsa& isa, const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  switch (w.scheme) {
    case QuantScheme::kNF4: return nf4_row(isa, w, row, col, n, out);
    case QuantScheme::kNVFP4: return nvfp4_row(isa, w, row, col, n, out);
    case QuantScheme::kAffine: return affine_row(isa, w, row, col, n, out);
    case QuantScheme::kInt8: return int8_row(isa, w, row, col, n, out);
    case QuantScheme::kFP8: return fp8_row(isa, w, row, col, n, out);
    case QuantScheme::kGgml: return ggml_row(w, row, col, n, out);
  }
}

}  // namespace dgemma::cpu
