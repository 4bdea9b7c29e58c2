#include "backend/opencl/cl_weights.h"

#include "dgemma/error.h"

namespace dgemma::opencl {

cl_mem WeightCache::get(const WeightRef& w, const std::string& where) {
  Key key{w.data, w.dtype, w.shape};
  auto it = buffers_.find(key);
  if (it != buffers_.end()) return it->second;
  if (w.data == nullptr) throw Error("opencl backend: weight '" + w.name + "' has no data, in " + where);
  const size_t bytes = size_t(w.numel()) * size_t(dtype_bits(w.dtype) / 8);
  if (bytes == 0) throw Error("opencl backend: weight '" + w.name + "' is empty, in " + where);
  cl_mem m = runtime_->alloc(bytes, where + " (weight '" + w.name + "')");
  try {
    runtime_->write(m, w.data, bytes, where + " (uploading weight '" + w.name + "')", true);
  } catch (...) {
    clReleaseMemObject(m);
    throw;
  }
  buffers_.emplace(std::move(key), m);
  bytes_ += int64_t(bytes);
  return m;
}

void WeightCache::clear() {
  for (auto& [key, m] : buffers_) clReleaseMemObject(m);
  buffers_.clear();
  bytes_ = 0;
}

}  // namespace dgemma::opencl
