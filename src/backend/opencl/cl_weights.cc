#include "backend/opencl/cl_weights.h"

#include "backend/opencl/cl_quant_upload.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

cl_mem WeightCache::upload(const void* data, size_t bytes, const std::string& what, const std::string& where) {
  cl_mem m = runtime_->alloc(bytes, where + " (" + what + ")");
  try {
    runtime_->write(m, data, bytes, where + " (uploading " + what + ")", true);
  } catch (...) {
    clReleaseMemObject(m);
    throw;
  }
  bytes_ += int64_t(bytes);
  return m;
}

namespace {

// FNV-1a over the first and the last 64 bytes of a weight's data: cheap, and
// different for another weight made at the address of a freed one.
uint64_t ends_of(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  const size_t head = bytes < 64 ? bytes : 64;
  mix(0, head);
  mix(bytes - (bytes - head < 64 ? bytes - head : 64), bytes);
  return h;
}

}  // namespace

cl_mem WeightCache::get(const WeightRef& w, const std::string& where) {
  if (w.data == nullptr) throw Error("opencl backend: weight '" + w.name + "' has no data, in " + where);
  const size_t bytes = size_t(w.numel()) * size_t(dtype_bits(w.dtype) / 8);
  if (bytes == 0) throw Error("opencl backend: weight '" + w.name + "' is empty, in " + where);
  const uint64_t ends = ends_of(w.data, bytes);
  Key key{w.data, w.dtype, w.shape};
  auto it = buffers_.find(key);
  if (it != buffers_.end()) {
    if (it->second.ends == ends) return it->second.mem;
    clReleaseMemObject(it->second.mem);  // another weight at a freed one's address
    bytes_ -= it->second.bytes;
    buffers_.erase(it);
  }
  cl_mem m = upload(w.data, bytes, "weight '" + w.name + "'", where);
  buffers_.emplace(std::move(key), Plain{m, ends, int64_t(bytes)});
  return m;
}

void WeightCache::release(Quant& q) {
  for (cl_mem m : q.buffers) clReleaseMemObject(m);
  q.buffers.clear();
  bytes_ -= q.bytes;
  q.bytes = 0;
}

const ClQuantWeight& WeightCache::quant(const WeightRef& w, const std::string& where) {
  if (!w.quant) throw Error("opencl backend: internal: weight '" + w.name + "' is not quantized, in " + where);
  const std::weak_ptr<const QuantizedWeight> key = w.quant;
  auto it = quants_.find(key);
  if (it != quants_.end()) return it->second.view;
  for (auto e = quants_.begin(); e != quants_.end();)  // weights freed since: their buffers go
    if (e->first.expired()) {
      release(e->second);
      e = quants_.erase(e);
    } else {
      ++e;
    }
  const QuantUploadPlan plan = plan_quant_upload(*w.quant, w.name);
  Quant& q = quants_[key];
  try {
    // Each part into one buffer, its pieces one after another.
    auto part = [&](const QuantUploadPlan::Part& p) -> cl_mem {
      const size_t bytes = p.bytes();
      if (bytes == 0) return nullptr;
      const std::string what = p.what + " of weight '" + w.name + "'";
      cl_mem m = runtime_->alloc(bytes, where + " (" + what + ")");
      q.buffers.push_back(m);
      q.bytes += int64_t(bytes);
      bytes_ += int64_t(bytes);
      size_t at = 0;
      for (const auto& [data, n] : p.pieces) {
        if (data == nullptr) throw Error("opencl backend: " + what + " has no data, in " + where);
        runtime_->write(m, data, n, where + " (uploading " + what + ")", true, at);
        at += n;
      }
      return m;
    };
    ClQuantWeight& d = q.view;
    d.scheme = plan.scheme;
    d.cols = plan.cols;
    d.block = plan.block;
    d.p0 = plan.p0;
    d.p1 = plan.p1;
    d.f0 = plan.f0;
    d.codes = part(plan.codes);
    if (d.codes == nullptr) throw Error("opencl backend: weight '" + w.name + "' has no codes, in " + where);
    d.scales = part(plan.scales);
    d.extra = part(plan.extra);
    d.table = part(plan.table);
    for (cl_mem* m : {&d.scales, &d.extra, &d.table})
      if (*m == nullptr) *m = d.codes;
    return d;
  } catch (...) {
    release(q);
    quants_.erase(key);
    throw;
  }
}

void WeightCache::clear() {
  for (auto& [key, p] : buffers_) clReleaseMemObject(p.mem);
  for (auto& [key, q] : quants_) release(q);
  buffers_.clear();
  quants_.clear();
  bytes_ = 0;
}

}  // namespace dgemma::opencl
