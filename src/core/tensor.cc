#include "core/tensor.h"

#include <cstring>

#include "dgemma/error.h"

namespace dgemma {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

static int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor Tensor::f32(std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.f.assign(size_t(product(t.shape)), 0.0f);
  return t;
}

Tensor Tensor::i32(std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = DType::kI32;
  t.shape = std::move(shape);
  t.i.assign(size_t(product(t.shape)), 0);
  return t;
}

int64_t Tensor::numel() const { return product(shape); }

void Tensor::reshape(std::vector<int64_t> new_shape) {
  if (product(new_shape) != numel())
    throw Error("internal: cannot reshape " + shape_string() + " to " + dgemma::shape_string(new_shape));
  shape = std::move(new_shape);
}

void Tensor::resize(std::vector<int64_t> new_shape) {
  shape = std::move(new_shape);
  if (dtype == DType::kF32)
    f.resize(size_t(product(shape)));
  else
    i.resize(size_t(product(shape)));
}

std::string Tensor::shape_string() const { return dgemma::shape_string(shape); }

void ensure_host(std::span<const Tensor* const> tensors) {
  std::vector<const DeviceData*> owners;  // one data per owner, to finish its copies
  std::vector<const Tensor*> queued;
  for (const Tensor* t : tensors) {
    if (!t->host_stale) continue;
    if (!t->device) t->ensure_host();        // throws the "no current copy" error
    Tensor& self = const_cast<Tensor&>(*t);  // as in Tensor::ensure_host
    const size_t n = size_t(t->numel());
    if (t->dtype == DType::kF32)
      self.f.resize(n);
    else
      self.i.resize(n);
    t->device->queue_copy_to_host(self);
    queued.push_back(t);
    bool seen = false;
    for (const DeviceData* o : owners) seen = seen || o->owner() == t->device->owner();
    if (!seen) owners.push_back(t->device.get());
  }
  for (const DeviceData* o : owners) o->finish_copies();
  for (const Tensor* t : queued) t->host_stale = false;
}

void Tensor::ensure_host() const {
  if (!host_stale) return;
  if (!device) throw Error("internal: tensor " + shape_string() + " has no current copy (host stale, no device data)");
  Tensor& self = const_cast<Tensor&>(*this);  // the host copy is a cache of the value
  const size_t n = size_t(numel());
  if (dtype == DType::kF32)
    self.f.resize(n);
  else
    self.i.resize(n);
  device->copy_to_host(self);
  host_stale = false;
}

int64_t WeightRef::numel() const { return product(shape); }

void WeightRef::row_f32(int64_t r, int64_t cols, float* out) const {
  switch (dtype) {
    case DType::kF32: std::memcpy(out, static_cast<const float*>(data) + r * cols, size_t(cols) * 4); return;
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(data) + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(p[c]);
      return;
    }
    default:
      for (int64_t c = 0; c < cols; ++c) out[c] = load_as_f32(dtype, data, size_t(r * cols + c));
  }
}

}  // namespace dgemma
