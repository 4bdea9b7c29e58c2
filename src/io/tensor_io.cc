#include "io/tensor_io.h"

#include <cmath>
#include <cstring>

#include "dgemma/error.h"

namespace dgemma {

Tensor tensor_from_view(const TensorView& v) {
  const size_t n = size_t(v.numel());
  if (dtype_is_float(v.dtype())) {
    Tensor t = Tensor::f32(v.shape());
    for (size_t k = 0; k < n; ++k) t.f[k] = v.at_f32(k);
    return t;
  }
  Tensor t = Tensor::i32(v.shape());
  auto put = [&](size_t k, int64_t val) {
    if (val < INT32_MIN || val > INT32_MAX)
      throw Error(std::string(v.file) + ": tensor \"" + v.name() + "\": value " + std::to_string(val) + " at index " +
                  std::to_string(k) + " does not fit in int32");
    t.i[k] = int32_t(val);
  };
  for (size_t k = 0; k < n; ++k) {
    const uint8_t* p = v.data;
    switch (v.dtype()) {
      case DType::kBool:
      case DType::kU8: put(k, p[k]); break;
      case DType::kI8: put(k, int8_t(p[k])); break;
      case DType::kI16: {
        int16_t x;
        std::memcpy(&x, p + 2 * k, 2);
        put(k, x);
        break;
      }
      case DType::kU16: {
        uint16_t x;
        std::memcpy(&x, p + 2 * k, 2);
        put(k, x);
        break;
      }
      case DType::kI32: {
        int32_t x;
        std::memcpy(&x, p + 4 * k, 4);
        put(k, x);
        break;
      }
      case DType::kU32: {
        uint32_t x;
        std::memcpy(&x, p + 4 * k, 4);
        put(k, int64_t(x));
        break;
      }
      case DType::kI64: {
        int64_t x;
        std::memcpy(&x, p + 8 * k, 8);
        put(k, x);
        break;
      }
      case DType::kU64: {
        uint64_t x;
        std::memcpy(&x, p + 8 * k, 8);
        put(k, x > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(x));
        break;
      }
      default:
        throw Error(std::string(v.file) + ": tensor \"" + v.name() + "\": dtype " + std::string(dtype_name(v.dtype())) +
                    " cannot be read as numbers here");
    }
  }
  return t;
}

CompareResult compare_tensors(const Tensor& e, const Tensor& a, double atol, double rtol) {
  CompareResult r;
  r.numel = e.numel();
  if (e.numel() != a.numel()) {
    r.shape_mismatch = true;
    return r;
  }
  auto get = [](const Tensor& t, size_t k) { return t.dtype == DType::kF32 ? double(t.f[k]) : double(t.i[k]); };
  const size_t n = size_t(e.numel());
  for (size_t k = 0; k < n; ++k) {
    const double x = get(e, k), y = get(a, k);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) {
        r.nan_mismatch = true;
        ++r.mismatches;
      }
      continue;
    }
    const double d = std::fabs(x - y);
    r.max_abs = std::max(r.max_abs, d);
    r.max_rel = std::max(r.max_rel, d / std::max(std::fabs(x), 1e-6));
    if (d > atol + rtol * std::fabs(x)) ++r.mismatches;
  }
  const int64_t w = e.shape.empty() ? 1 : e.shape.back();
  if (w > 1 && e.dtype == DType::kF32) {
    r.argmax_rows = int64_t(n) / w;
    for (int64_t row = 0; row < r.argmax_rows; ++row) {
      int64_t be = 0, ba = 0;
      for (int64_t c = 1; c < w; ++c) {
        if (get(e, size_t(row * w + c)) > get(e, size_t(row * w + be))) be = c;
        if (get(a, size_t(row * w + c)) > get(a, size_t(row * w + ba))) ba = c;
      }
      if (be != ba) ++r.argmax_disagree;
    }
  }
  return r;
}

}  // namespace dgemma
