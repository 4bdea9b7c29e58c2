#include "backend/opencl/cl_op.h"

#include <cmath>
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
  output_guards_.assign(call.out.size(), GuardedBuffer{});
}

ClOp::~ClOp() {
  for (cl_event e : events_)
    if (e) clReleaseEvent(e);
  for (cl_mem m : uploads_) clReleaseMemObject(m);
  for (size_t k = 0; k < outputs_.size(); ++k)
    if (outputs_[k]) {
      clReleaseMemObject(outputs_[k]);
      if (output_guards_[k].parent) clReleaseMemObject(output_guards_[k].parent);
    }
  for (auto& [g, label] : guarded_)
    if (g.parent) clReleaseMemObject(g.parent);
}

cl_mem ClOp::fresh(size_t bytes, bool poison, std::string label) {
  // Guard zones need whole words; every buffer of fp32 or int32 elements has them.
  if (!runtime_->debug || bytes % 4 != 0) {
    cl_mem m = runtime_->alloc(bytes, label + " of " + where_);
    uploads_.push_back(m);
    return m;
  }
  GuardedBuffer g = alloc_guarded(*runtime_, bytes, poison, label + " of " + where_);
  uploads_.push_back(g.mem);
  guarded_.emplace_back(g, std::move(label));
  return g.mem;
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
  if (bytes > kKeptUploadBytes) {
    cl_mem m = fresh(bytes, false, "input " + std::to_string(k));
    runtime_->write(m, host_bytes(t), bytes, what);
    return m;
  }
  // A small input: uploaded once and attached to the tensor, so that the next
  // op (and the next step, while the bytes are the same) finds it there; in
  // the debug mode with guard zones, checked by every op that reads it.
  GuardedBuffer g;
  cl_mem m = nullptr;
  if (runtime_->debug) {
    g = alloc_guarded(*runtime_, bytes, false, what);
    m = g.mem;
  } else {
    m = runtime_->alloc(bytes, what);
  }
  auto data = std::make_shared<ClDeviceData>(runtime_, m, bytes, g);
  const auto* h = static_cast<const unsigned char*>(host_bytes(t));
  data->from_host = true;
  data->snapshot.assign(h, h + bytes);
  runtime_->write(m, data->snapshot.data(), bytes, what);
  t.device = std::move(data);
  return m;
}

cl_mem ClOp::upload(const void* data, size_t bytes, const std::string& what) {
  cl_mem m = fresh(bytes, false, "upload '" + what + "'");
  runtime_->write(m, data, bytes, what);
  return m;
}

cl_mem ClOp::scratch(size_t bytes, const std::string& what) { return fresh(bytes, true, "scratch '" + what + "'"); }

cl_mem ClOp::output(size_t k) {
  const size_t bytes = size_t(call_.out[k]->numel()) * 4;
  if (bytes == 0) throw Error("opencl backend: internal: output " + std::to_string(k) + " of " + where_ + " is empty");
  if (outputs_[k]) return outputs_[k];
  const std::string what = "output " + std::to_string(k) + " of " + where_;
  if (runtime_->debug) {
    output_guards_[k] = alloc_guarded(*runtime_, bytes, true, what);
    outputs_[k] = output_guards_[k].mem;
  } else {
    outputs_[k] = runtime_->alloc(bytes, what);
  }
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
                                  fixed ? local.data() : nullptr, 0, nullptr, event_slot()),
           "clEnqueueNDRangeKernel", "kernel " + name + ", " + where_);
  ++runtime_->traffic.kernel_launches;
}

void ClOp::copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes) {
  cl_check(clEnqueueCopyBuffer(runtime_->queue(), src, dst, src_offset, dst_offset, bytes, 0, nullptr, event_slot()),
           "clEnqueueCopyBuffer", where_);
  ++runtime_->traffic.kernel_launches;
}

void ClOp::check_guards_or_throw() {
  std::string wrote;
  auto check = [&](const GuardedBuffer& g, const std::string& label) {
    if (!g.parent || !wrote.empty()) return;
    wrote = check_guards(*runtime_, g, label);
  };
  for (size_t k = 0; k < outputs_.size(); ++k) check(output_guards_[k], "output " + std::to_string(k));
  for (const auto& [g, label] : guarded_) check(g, label);
  // Buffers an earlier op left on this device: a kernel may write through an
  // input's pointer as well.
  for (size_t k = 0; k < call_.in.size(); ++k) {
    const Tensor& t = *call_.in[k];
    if (t.device && t.device->owner() == runtime_.get())
      check(static_cast<const ClDeviceData&>(*t.device).guarded(), "input " + std::to_string(k));
  }
  if (!wrote.empty()) throw Error("opencl backend (debug): " + where_ + " wrote " + wrote);
}

namespace {

// The first element of `n` floats that is NaN or infinite, or -1.
int64_t first_non_finite(const float* v, size_t n) {
  for (size_t k = 0; k < n; ++k)
    if (!std::isfinite(v[k])) return int64_t(k);
  return -1;
}

}  // namespace

void ClOp::check_finite_or_throw() {
  for (size_t k = 0; k < outputs_.size(); ++k) {
    const Tensor& t = *call_.out[k];
    if (!outputs_[k] || t.dtype != DType::kF32) continue;
    std::vector<float> v(size_t(t.numel()));
    runtime_->read(v.data(), outputs_[k], v.size() * 4, "output " + std::to_string(k) + " of " + where_ + " (debug)");
    const int64_t bad = first_non_finite(v.data(), v.size());
    if (bad < 0) continue;
    // Whether the value was born here or came in with an input.
    std::string origin = "no fp32 input holds one: it is born in this op";
    for (size_t i = 0; i < call_.in.size(); ++i) {
      const Tensor& in = *call_.in[i];
      if (in.dtype != DType::kF32 || in.numel() == 0) continue;
      std::vector<float> x(size_t(in.numel()));
      if (in.device && in.device->owner() == runtime_.get())
        runtime_->read(x.data(), static_cast<const ClDeviceData&>(*in.device).mem(), x.size() * 4,
                       "input " + std::to_string(i) + " of " + where_ + " (debug)");
      else if (!in.device || !in.host_stale)
        x.assign(in.f.begin(), in.f.begin() + int64_t(x.size()));
      else
        continue;  // on another backend's device: not read here
      if (first_non_finite(x.data(), x.size()) >= 0) {
        origin = "input " + std::to_string(i) + " already holds one: it comes from an earlier op";
        break;
      }
    }
    throw Error("opencl backend (debug): output " + std::to_string(k) + " of " + where_ + " holds " +
                (std::isnan(v[size_t(bad)]) ? "NaN" : "an infinity") + " at element " + std::to_string(bad) + " of " +
                std::to_string(v.size()) + " (" + origin + ")");
  }
}

void ClOp::zero_output(size_t k) {
  const size_t bytes = size_t(call_.out[k]->numel()) * 4;
  if (bytes == 0) return;
  const float zero = 0.0f;
  cl_check(clEnqueueFillBuffer(runtime_->queue(), output(k), &zero, sizeof zero, 0, bytes, 0, nullptr, event_slot()),
           "clEnqueueFillBuffer", where_);
  ++runtime_->traffic.kernel_launches;
}

// Where the next launch puts its event: a new slot while profiling, else none.
// The slot is added before the launch fills it, so a failed launch leaves a
// null event behind, which nothing releases.
cl_event* ClOp::event_slot() {
  if (!runtime_->profiling()) return nullptr;
  events_.push_back(nullptr);
  return &events_.back();
}

void ClOp::finish(bool debug) {
  if (runtime_->profiling()) {
    std::vector<cl_event> events;
    for (cl_event e : events_)
      if (e) events.push_back(e);
    events_.clear();
    runtime_->record_op(call_.kind, call_.layer, std::move(events));
  }
  if (debug) runtime_->finish(where_ + " (debug: waiting after every op)");
  if (runtime_->debug) {
    check_guards_or_throw();
    check_finite_or_throw();
  }
  for (size_t k = 0; k < call_.out.size(); ++k) {
    Tensor& t = *call_.out[k];
    t.device.reset();
    t.host_stale = false;
    if (!outputs_[k]) continue;  // empty: nothing to hold
    const size_t bytes = size_t(t.numel()) * 4;
    t.device = std::make_shared<ClDeviceData>(runtime_, outputs_[k], bytes, output_guards_[k]);
    outputs_[k] = nullptr;  // owned by the tensor's data now
    output_guards_[k] = GuardedBuffer{};
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
