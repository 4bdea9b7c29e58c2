#include "quantize/quantized_weight.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dgemma/error.h"
#include "quantize/format_tables.h"
#include "quantize/ggml_blocks.h"
#include "quantize/scheme_traits.h"

namespace dgemma {

std::string_view quant_scheme_name(QuantScheme s) { return scheme_traits(s).name; }

const QuantSlice& QuantizedWeight::slice_for(int64_t r) const {
  auto it = std::upper_bound(slices.begin(), slices.end(), r,
                             [](int64_t row, const QuantSlice& s) { return row < s.row_begin; });
  return *(it - 1);
}

void dequantize_reference(const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
  if (row < 0 || row >= w.rows || col < 0 || n < 0 || col + n > w.cols)
    throw Error("internal: dequantize " + std::to_string(n) + " elements at (" + std::to_string(row) + ", " +
                std::to_string(col) + ") outside [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + "]");
  switch (w.scheme) {
    case QuantScheme::kNF4: {
      // Blocks run over the flattened tensor (docs/formats.md §2.2); element 2k is
      // the high nibble of byte k.
      const uint8_t* codes = w.slices.front().codes;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t i = row * w.cols + col + t;
        const uint8_t byte = codes[i / 2];
        const int nib = (i % 2 == 0) ? byte >> 4 : byte & 0xF;
        out[t] = w.code_map[nib] * w.nf4_block_scale(i / w.block);
      }
      return;
    }
    case QuantScheme::kNVFP4: {
      // docs/formats.md §3.3: w = E2M1[nib] · e4m3(scale[r, c/16]) · weight_scale_2,
      // column 2k in the low nibble of byte [r, k].
      const QuantSlice& s = w.slice_for(row);
      const int64_t lr = row - s.row_begin;
      const float* e4m3 = quant::e4m3_table();
      for (int64_t t = 0; t < n; ++t) {
        const int64_t c = col + t;
        const uint8_t byte = s.codes[lr * (w.cols / 2) + c / 2];
        const int nib = (c % 2 == 0) ? byte & 0xF : byte >> 4;
        const float scale = e4m3[s.scales[lr * (w.cols / w.block) + c / w.block]];
        out[t] = (quant::kE2m1Values[nib] * scale) * s.global_scale;
      }
      return;
    }
    case QuantScheme::kAffine: {
      // docs/formats.md §4.2: w = scales[g] · q + biases[g] (as a fused
      // multiply-add); codes LSB-first in little-endian u32 words.
      const QuantSlice& s = w.slice_for(row);
      const int64_t lr = row - s.row_begin, groups = w.cols / w.block;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t c = col + t;
        int q;
        if (w.bits == 4) {
          const uint8_t byte = s.codes[lr * (w.cols / 2) + c / 2];
          q = (c % 2 == 0) ? byte & 0xF : byte >> 4;
        } else {
          q = s.codes[lr * w.cols + c];
        }
        const size_t g = size_t(lr * groups + c / w.block);
        const float scale = load_as_f32(w.scale_dtype, s.scales, g);
        const float bias = load_as_f32(w.scale_dtype, s.biases, g);
        out[t] = std::fma(scale, float(q), bias);  // one rounding: the same on every dispatch level
      }
      return;
    }
    case QuantScheme::kInt8: {
      const QuantSlice& s = w.slice_for(row);
      const int64_t lr = row - s.row_begin, groups = w.cols / w.block;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t c = col + t;
        const int q = int(int8_t(s.codes[lr * w.cols + c]));
        out[t] = load_as_f32(DType::kF32, s.scales, size_t(lr * groups + c / w.block)) * float(q);
      }
      return;
    }
    case QuantScheme::kFP8: {
      const QuantSlice& s = w.slice_for(row);
      const int64_t lr = row - s.row_begin, groups = w.cols / w.block;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t c = col + t;
        const float q = f8_e4m3_to_f32(s.codes[lr * w.cols + c]);
        out[t] = load_as_f32(DType::kF32, s.scales, size_t(lr * groups + c / w.block)) * q;
      }
      return;
    }
    case QuantScheme::kGgml: {
      // docs/formats.md §5.2: rows of whole blocks back to back.
      const QuantSlice& s = w.slice_for(row);
      const uint8_t* r = s.codes + uint64_t(row - s.row_begin) * ggml_row_bytes(w.ggml_type, w.cols);
      quant::ggml_decode_row(w.ggml_type, r, col, n, out);
      return;
    }
  }
}

void round_to_dtype(DType dtype, float* v, int64_t n) {
  if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) v[i] = round_bf16(v[i]);
  } else if (dtype == DType::kF16) {
    for (int64_t i = 0; i < n; ++i) v[i] = f16_to_f32(f32_to_f16(v[i]));
  }
}

const WeightRef& QuantizedWeight::dense(DType as, const RowFn& row_fn) const {
  if (as != DType::kF32 && as != DType::kBF16)
    throw Error("quantized weight " + (stored_names.empty() ? std::string("?") : stored_names.front()) +
                ": a dense copy is F32 or BF16, not " + std::string(dtype_name(as)));
  DenseCopy& d = as == DType::kF32 ? dense_f32_ : dense_bf16_;
  std::call_once(d.once, [this, as, &row_fn, &d] {
    const int esize = as == DType::kF32 ? 4 : 2;
    d.bytes.resize(size_t(rows * cols) * size_t(esize));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      if (row_fn)
        row_fn(*this, r, 0, cols, row.data());
      else
        dequantize_reference(*this, r, 0, cols, row.data());
      uint8_t* dst = d.bytes.data() + size_t(r * cols) * size_t(esize);
      if (as == DType::kF32) {
        std::memcpy(dst, row.data(), size_t(cols) * 4);
      } else {
        for (int64_t c = 0; c < cols; ++c) {
          const uint16_t h = f32_to_bf16(row[size_t(c)]);
          std::memcpy(dst + c * 2, &h, 2);
        }
      }
    }
    d.ref.name = stored_names.empty() ? std::string() : stored_names.front();
    d.ref.dtype = as;
    d.ref.shape = shape;
    d.ref.data = d.bytes.data();
  });
  return d.ref;
}

}  // namespace dgemma
