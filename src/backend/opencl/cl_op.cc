#include "backend/opencl/cl_op.h"

#include <cstring>

#include "backend/opencl/cl_device_data.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

std::string where_of(const OpCall& c) {
  std::string s(op_name(c.kind));
  if (!c.site.empty()) s += " (" + std::string(c.site) + ")";
  s += c.layer >= 0 ? " in layer " + std::to_string(c.layer) : std::string(" (model level)");
  s += ", " + std::string(pass_name(c.pass)) + " pass, step " + std::to_string(c.step);
  return "op " + s;
}

ClOp::ClOp(std::shared_ptr<ClRuntime> runtime, WeightCache& weights, const OpCall& call)
    : runtime_(std::move(runtime)), weights_(weights), call_(call), where_(where_of(call)) {
  outputs_.assign(call.out.size(), nullptr);
}

ClOp::~ClOp() {
  for (cl_mem m : uploads_) clReleaseMemObject(m);
  for (cl_mem m : outputs_)
    if (m) clReleaseMemObject(m);
}

namespace {

// Host inputs up to this size are uploaded once and reused while their bytes
// stay the same (positions, token ids, the step's uniforms: docs/opencl.md §1).
constexpr size_t kKeptUploadBytes = 64 << 10;

const void* host_bytes(const Tensor& t) {
  return t.dtype == DType::kF32 ? static_cast<const void*>(t.f.data()) : static_cast<const void*>(t.i.data());
}

}  // namespace

cl_mem ClOp::input(size_t k) {
  const Tensor& t = *call_.in[k];
  const size_t bytes = size_t(t.numel()) * 4;
  const std::string what = "input " + std::to_string(k) + " of " + where_;
  if (bytes == 0) throw Error("opencl backend: internal: " + what + " is empty");
  if (t.device && t.device->owner() == runtime_.get()) {
    const auto& d = static_cast<const ClDeviceData&>(*t.device);
    if (d.bytes() != bytes)
      throw Error("opencl backend: " + what + ": its device data holds " + std::to_string(d.bytes()) +
                  " bytes, its shape " + t.shape_string() + " needs " + std::to_string(bytes));
    if (!d.from_host || (!t.host_stale && std::memcmp(d.snapshot.data(), host_bytes(t), bytes) == 0)) return d.mem();
  }
  t.ensure_host();  // device data of another backend comes through the host
  const size_t have = (t.dtype == DType::kF32 ? t.f.size() : t.i.size()) * 4;
  if (have < bytes)
    throw Error("opencl backend: " + what + ": its storage holds fewer elements than its shape " + t.shape_string());
  if (bytes > kKeptUploadBytes) return upload(host_bytes(t), bytes, what);
  // A small input: uploaded once and attached to the tensor, so that the next
  // op (and the next step, while the bytes are the same) finds it there.
  cl_mem m = runtime_->alloc(bytes, what);
  auto data = std::make_shared<ClDeviceData>(runtime_, m, bytes);
  const auto* h = static_cast<const unsigned char*>(host_bytes(t));
  data->from_host = true;
  data->snapshot.assign(h, h + bytes);
  runtime_->write(m, data->snapshot.data(), bytes, what);
  t.device = std::move(data);
  return m;
}

cl_mem ClOp::upload(const void* data, size_t bytes, const std::string& what) {
  cl_mem m = runtime_->alloc(bytes, what);
  uploads_.push_back(m);
  runtime_->write(m, data, bytes, what);
  return m;
}

cl_mem ClOp::scratch(size_t bytes, const std::string& what) {
  cl_mem m = runtime_->alloc(bytes, what + " of " + where_);
  uploads_.push_back(m);
  return m;
}

cl_mem ClOp::output(size_t k) {
  const size_t bytes = size_t(call_.out[k]->numel()) * 4;
  if (bytes == 0) throw Error("opencl backend: internal: output " + std::to_string(k) + " of " + where_ + " is empty");
  if (!outputs_[k]) outputs_[k] = runtime_->alloc(bytes, "output " + std::to_string(k) + " of " + where_);
  return outputs_[k];
}

void ClOp::set_arg(cl_kernel k, const std::string& name, cl_uint index, size_t size, const void* value) {
  cl_check(clSetKernelArg(k, index, size, value), "clSetKernelArg",
           "argument " + std::to_string(index) + " of kernel " + name + ", " + where_);
}

void ClOp::enqueue(cl_kernel k, const std::string& name, std::vector<size_t> global, std::vector<size_t> local) {
  bool fixed = false;
  for (size_t d = 0; d < global.size(); ++d)
    if (d < local.size() && local[d] > 0) {
      global[d] = (global[d] + local[d] - 1) / local[d] * local[d];
      fixed = true;
    }
  cl_check(clEnqueueNDRangeKernel(runtime_->queue(), k, cl_uint(global.size()), nullptr, global.data(),
                                  fixed ? local.data() : nullptr, 0, nullptr, nullptr),
           "clEnqueueNDRangeKernel", "kernel " + name + ", " + where_);
  ++runtime_->traffic.kernel_launches;
}

void ClOp::copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes) {
  cl_check(clEnqueueCopyBuffer(runtime_->queue(), src, dst, src_offset, dst_offset, bytes, 0, nullptr, nullptr),
           "clEnqueueCopyBuffer", where_);
  ++runtime_->traffic.kernel_launches;
}

void ClOp::finish(bool debug) {
  if (debug) runtime_->finish(where_ + " (debug: waiting after every op)");
  for (size_t k = 0; k < call_.out.size(); ++k) {
    Tensor& t = *call_.out[k];
    t.device.reset();
    t.host_stale = false;
    if (!outputs_[k]) continue;  // empty: nothing to hold
    const size_t bytes = size_t(t.numel()) * 4;
    t.device = std::make_shared<ClDeviceData>(runtime_, outputs_[k], bytes);
    outputs_[k] = nullptr;  // owned by the tensor's data now
    if (call_.device_outputs) {
      t.host_stale = true;
    } else {
      void* dst = t.dtype == DType::kF32 ? static_cast<void*>(t.f.data()) : static_cast<void*>(t.i.data());
      runtime_->read(dst, static_cast<const ClDeviceData&>(*t.device).mem(), bytes,
                     "output " + std::to_string(k) + " of " + where_);
    }
  }
}

}  // namespace dgemma::opencl
