#pragma once
// Activation tensors (owned, row-major, F32 or I32) and weight references
// (non-owning views of checkpoint data in its stored dtype). Ops read weights
// in their stored dtype and accumulate in fp32.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "core/dtype.h"

namespace dgemma {

struct QuantizedWeight;  // quantize/quantized_weight.h
struct Tensor;

// A tensor's data in a backend's own memory (a device), attached by that
// backend (device-resident activations: docs/cuda.md §1). Immutable once attached:
// a backend never writes into a DeviceData it handed out, it attaches a new
// one, so copies of a Tensor may share it.
class DeviceData {
 public:
  virtual ~DeviceData() = default;
  // The backend context the data lives in (compared by identity).
  virtual const void* owner() const = 0;
  // Copies the data into t's host storage (t.f or t.i, sized to t's shape).
  virtual void copy_to_host(Tensor& t) const = 0;
  // The same, completed only by finish_copies() of any data of the same
  // owner: several tensors come to the host with one wait (default: at once).
  virtual void queue_copy_to_host(Tensor& t) const { copy_to_host(t); }
  virtual void finish_copies() const {}
};

struct Tensor {
  DType dtype = DType::kF32;  // kF32 or kI32
  std::vector<int64_t> shape;
  std::vector<float> f;    // when dtype == kF32
  std::vector<int32_t> i;  // when dtype == kI32
  // Device residency (ops/backend.h, Executor): `device`, when set, holds the
  // current data in a backend's memory; `host_stale` says that f/i do not
  // (the data was produced on the device and not copied back yet). Mutable:
  // bringing the host copy up to date (ensure_host) or caching an upload
  // does not change the tensor's value.
  mutable std::shared_ptr<const DeviceData> device;
  mutable bool host_stale = false;

  static Tensor f32(std::vector<int64_t> shape);
  static Tensor i32(std::vector<int64_t> shape);
  int64_t numel() const;
  int64_t dim(int k) const { return shape[size_t(k < 0 ? int(shape.size()) + k : k)]; }
  // Rows = product of all but the last dimension.
  int64_t rows() const { return shape.empty() ? 1 : numel() / shape.back(); }
  // Reshape without touching data (numel must match).
  void reshape(std::vector<int64_t> new_shape);
  // Resize storage to the shape (contents unspecified on growth).
  void resize(std::vector<int64_t> new_shape);
  std::string shape_string() const;
  // Makes f/i current (copies from the device when host_stale). Every host
  // reader of a tensor that a device backend may have produced calls this
  // first; the Executor does it for host backends and observers.
  void ensure_host() const;
  // Marks f/i as the only current copy, after host code wrote into them.
  void host_written() {
    device.reset();
    host_stale = false;
  }
};

std::string shape_string(const std::vector<int64_t>& shape);

// ensure_host() of several tensors, with one wait per device holding some.
void ensure_host(std::span<const Tensor* const> tensors);
inline void ensure_host(std::initializer_list<const Tensor*> tensors) {
  ensure_host(std::span<const Tensor* const>(tensors.begin(), tensors.size()));
}

// A weight in its stored dtype. `data` points into a mapped checkpoint or a
// converted buffer owned by the model.
struct WeightRef {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  // Set for a quantized weight (shape and dtype are then the logical ones and
  // `data` must not be read as dtype; see quantize/quantized_weight.h).
  std::shared_ptr<const QuantizedWeight> quant;

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  float at(size_t idx) const { return load_as_f32(dtype, data, idx); }
  // Row r of a 2-D (or flattened) weight converted to fp32 into `out`
  // (`cols` elements).
  void row_f32(int64_t r, int64_t cols, float* out) const;
};

}  // namespace dgemma
