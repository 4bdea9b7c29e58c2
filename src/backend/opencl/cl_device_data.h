#pragma once
// A tensor's data in an OpenCL buffer (core/tensor.h DeviceData): an op's
// output left on the device (docs/opencl.md §1). It keeps the device's
// runtime alive and releases the buffer when the last tensor sharing it goes.
// In the debug mode the buffer is the usable part of a guarded one
// (cl_guard.h), whose zones a later op's check still reads.
#include <memory>
#include <vector>

#include "backend/opencl/cl_guard.h"
#include "backend/opencl/cl_runtime.h"
#include "core/tensor.h"

namespace dgemma::opencl {

class ClDeviceData final : public DeviceData {
 public:
  // Takes ownership of `mem` (one reference), and of `guarded.parent` when
  // `mem` is a guarded buffer's usable part.
  ClDeviceData(std::shared_ptr<ClRuntime> runtime, cl_mem mem, size_t bytes, GuardedBuffer guarded = {})
      : runtime_(std::move(runtime)), mem_(mem), bytes_(bytes), guarded_(guarded) {}
  ~ClDeviceData() override {
    if (mem_) clReleaseMemObject(mem_);
    if (guarded_.parent) clReleaseMemObject(guarded_.parent);
  }
  ClDeviceData(const ClDeviceData&) = delete;
  ClDeviceData& operator=(const ClDeviceData&) = delete;

  const void* owner() const override { return runtime_.get(); }
  // An upload of host data kept for reuse (docs/opencl.md §1): valid while the
  // host bytes equal `snapshot`. Otherwise an op's output, current by
  // construction.
  bool from_host = false;
  std::vector<unsigned char> snapshot;
  void copy_to_host(Tensor& t) const override;
  cl_mem mem() const { return mem_; }
  size_t bytes() const { return bytes_; }
  // The guarded buffer around mem() (parent null when it has no guard zones).
  const GuardedBuffer& guarded() const { return guarded_; }

 private:
  std::shared_ptr<ClRuntime> runtime_;
  cl_mem mem_;
  size_t bytes_;
  GuardedBuffer guarded_;
};

}  // namespace dgemma::opencl
