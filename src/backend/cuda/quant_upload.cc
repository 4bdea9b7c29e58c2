// Buffer sizes follow the layouts of quantize/quantized_weight.h QuantSlice
// (docs/formats.md §2.2, §3.3, §4.2 and our int8 format).
#include "backend/cuda/quant_upload.h"

#include <algorithm>
#include <cstring>

#include "dgemma/error.h"
#include "quantize/ggml_blocks.h"
#include "quantize/integer_levels.h"
#include "quantize/format_tables.h"
#include "quantize/scheme_traits.h"

namespace dgemma::cuda {

bool float_wtype(DType dtype, WType* out) {
  switch (dtype) {
    case DType::kF32: *out = WType::kF32; return true;
    case DType::kBF16: *out = WType::kBF16; return true;
    case DType::kF16: *out = WType::kF16; return true;
    default: return false;
  }
}

void QuantUpload::bind(const std::vector<void*>& dev) {
  auto at = [&dev](int b) { return b < 0 ? nullptr : static_cast<const uint8_t*>(dev[size_t(b)]); };
  for (size_t k = 0; k < slices.size(); ++k) {
    slices[k].codes = at(slice_buffers_[k].codes);
    slices[k].scales = at(slice_buffers_[k].scales);
    slices[k].biases = at(slice_buffers_[k].biases);
  }
  view.nested_scales = reinterpret_cast<const float*>(at(nested_scales_));
}

QScheme kernel_scheme(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::kNF4: return QScheme::kNF4;
    case QuantScheme::kNVFP4: return QScheme::kNVFP4;
    case QuantScheme::kAffine: return QScheme::kAffine;
    case QuantScheme::kInt8: return QScheme::kInt8;
    case QuantScheme::kFP8: return QScheme::kFP8;
    case QuantScheme::kGgml: return QScheme::kGgml;
  }
  return QScheme::kInt8;
}

namespace {

// The device decoders' name of a ggml block type (the same ids); false for
// a type they do not decode (the plain F32/F16/BF16, which bind as plain
// weights, not as blocks).
bool kernel_ggml_type(GgmlType t, GType* out) {
  switch (t) {
    case GgmlType::kQ4_0: *out = GType::kQ4_0; return true;
    case GgmlType::kQ4_1: *out = GType::kQ4_1; return true;
    case GgmlType::kQ5_0: *out = GType::kQ5_0; return true;
    case GgmlType::kQ5_1: *out = GType::kQ5_1; return true;
    case GgmlType::kQ8_0: *out = GType::kQ8_0; return true;
    case GgmlType::kQ2_K: *out = GType::kQ2_K; return true;
    case GgmlType::kQ3_K: *out = GType::kQ3_K; return true;
    case GgmlType::kQ4_K: *out = GType::kQ4_K; return true;
    case GgmlType::kQ5_K: *out = GType::kQ5_K; return true;
    case GgmlType::kQ6_K: *out = GType::kQ6_K; return true;
    case GgmlType::kIQ4_NL: *out = GType::kIQ4_NL; return true;
    case GgmlType::kIQ4_XS: *out = GType::kIQ4_XS; return true;
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16: break;
  }
  return false;
}

// A GGUF block tensor (docs/formats.md §5.2): each slice's rows of whole
// blocks uploaded as they are stored (rows × ggml_row_bytes).
void plan_ggml(const QuantizedWeight& q, const std::string& name, QuantUpload& up, QView& v,
               std::vector<int>& slice_codes) {
  GType t;
  if (!kernel_ggml_type(q.ggml_type, &t))
    throw Error("cuda backend: weight " + name + " is a GGUF tensor of type " +
                std::string(ggml_type_name(q.ggml_type)) + ", which the CUDA kernels do not read as blocks");
  const GgmlTypeTraits& g = ggml_traits(q.ggml_type);
  if (q.block != g.block_elems || q.cols % g.block_elems != 0)
    throw Error("cuda backend: weight " + name + " (" + std::string(g.name) + ") has rows of " +
                std::to_string(q.cols) + " columns in blocks of " + std::to_string(q.block) +
                "; ggml rows are whole blocks of " + std::to_string(g.block_elems));
  v.ggml_type = t;
  v.ggml_block_bytes = g.block_bytes;
  v.ggml_sub = g.sub_block;
  v.ggml_offset = g.has_offset ? 1 : 0;
  v.ggml_row_bytes = int64_t(ggml_row_bytes(q.ggml_type, q.cols));
  std::copy(std::begin(quant::kIq4Levels), std::end(quant::kIq4Levels), v.ggml_iq4);
  for (size_t k = 0; k < q.slices.size(); ++k) {
    const QuantSlice& s = q.slices[k];
    up.buffers.push_back({s.codes, s.rows * v.ggml_row_bytes, "blocks of slice " + std::to_string(k)});
    slice_codes.push_back(int(up.buffers.size()) - 1);
    up.slices.push_back(QSlice{s.row_begin, s.rows, nullptr, nullptr, nullptr, s.global_scale});
  }
  v.nslices = int(up.slices.size());
}

}  // namespace

QuantUpload plan_quant_upload(const QuantizedWeight& q, const std::string& name) {
  QuantUpload up;
  QView& v = up.view;
  v.block = q.block;
  v.bits = q.bits;
  v.rows = q.rows;
  v.cols = q.cols;
  auto add = [&up](const void* host, int64_t bytes, std::string what) {
    up.buffers.push_back({host, bytes, std::move(what)});
    return int(up.buffers.size()) - 1;
  };
  const int64_t n = q.rows * q.cols, groups = q.block > 0 ? q.cols / q.block : 0;
  if (int8_dot_supported(q)) {
    const Int8WeightValues wv = int8_weight_values(q);
    v.i8_supported = 1;
    v.i8_sub = wv.sub;
    v.i8_nf4_factor = wv.nf4_factor;
    std::copy(std::begin(wv.levels), std::end(wv.levels), v.i8_levels);
  }
  v.scheme = kernel_scheme(q.scheme);
  if (q.scheme == QuantScheme::kGgml) {
    std::vector<int> codes;
    plan_ggml(q, name, up, v, codes);
    for (int c : codes) {
      QuantUpload::SliceBuffers b;
      b.codes = c;
      up.slice_buffers_.push_back(b);
    }
    return up;
  }
  switch (q.scheme) {
    case QuantScheme::kNF4: {
      std::copy(std::begin(q.code_map), std::end(q.code_map), v.code_map);
      const int64_t blocks = (n + q.block - 1) / q.block;
      const QuantSlice& s = q.slices.front();
      QuantUpload::SliceBuffers b;
      b.codes = add(s.codes, (n + 1) / 2, "codes");
      b.scales = add(s.scales, blocks * (q.double_quant ? 1 : 4), q.double_quant ? "absmax codes" : "absmax");
      up.slice_buffers_.push_back(b);
      up.slices.push_back(QSlice{0, q.rows, nullptr, nullptr, nullptr, 1.0f});
      v.nslices = 1;
      if (q.double_quant) {
        v.double_quant = 1;
        v.nested_block = q.nested_block;
        v.nested_offset = q.nested_offset;
        std::copy(std::begin(q.nested_map), std::end(q.nested_map), v.nested_map);
        up.nested_scales_ = add(q.nested_scales, (blocks + q.nested_block - 1) / q.nested_block * 4, "nested absmax");
      }
      return up;
    }
    case QuantScheme::kNVFP4:
      std::copy(std::begin(quant::kE2m1Values), std::end(quant::kE2m1Values), v.code_map);
      std::memcpy(v.e4m3, quant::e4m3_table(), sizeof v.e4m3);
      break;
    case QuantScheme::kAffine:
      if (!float_wtype(q.scale_dtype, &v.scale_type))
        throw Error("cuda backend: quantized weight " + name + " has affine scales of dtype " +
                    std::string(dtype_name(q.scale_dtype)) + ", which the CUDA kernels cannot read (F32, BF16, F16)");
      break;
    case QuantScheme::kFP8: std::memcpy(v.e4m3, quant::e4m3_table(), sizeof v.e4m3); break;
    case QuantScheme::kInt8:
    case QuantScheme::kGgml: break;
  }
  // Row-sliced formats: each slice's buffers hold its rows only, in the
  // layouts of QuantSlice, sized from the scheme's description.
  const SchemeTraits& traits = scheme_traits(q.scheme);
  const int64_t bits = code_bits(q);
  const DType scale_dtype = traits.scale_dtype.value_or(q.scale_dtype);
  const int64_t scale_size = dtype_bits(scale_dtype) / 8;
  const std::string scales_what = scale_dtype == DType::kF8_E4M3 ? "e4m3 scales" : "scales";
  for (size_t k = 0; k < q.slices.size(); ++k) {
    const QuantSlice& s = q.slices[k];
    const std::string of = " of slice " + std::to_string(k);
    QuantUpload::SliceBuffers b;
    b.codes = add(s.codes, s.rows * q.cols * bits / 8, "codes" + of);
    b.scales = add(s.scales, s.rows * groups * scale_size, scales_what + of);
    if (traits.biases) b.biases = add(s.biases, s.rows * groups * scale_size, "biases" + of);
    up.slice_buffers_.push_back(b);
    up.slices.push_back(QSlice{s.row_begin, s.rows, nullptr, nullptr, nullptr, s.global_scale});
  }
  v.nslices = int(up.slices.size());
  return up;
}

}  // namespace dgemma::cuda
