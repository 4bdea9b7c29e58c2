#include "backend/opencl/cl_device_data.h"

#include "dgemma/error.h"

namespace dgemma::opencl {

void ClDeviceData::copy_to_host(Tensor& t) const {
  const size_t n = size_t(t.numel());
  if (n * 4 != bytes_)
    throw Error("opencl backend: a device-resident tensor " + t.shape_string() + " holds " + std::to_string(bytes_) +
                " bytes, its shape needs " + std::to_string(n * 4));
  if (n == 0) return;
  void* dst = t.dtype == DType::kF32 ? static_cast<void*>(t.f.data()) : static_cast<void*>(t.i.data());
  runtime_->read(dst, mem_, bytes_, "copying a device-resident tensor " + t.shape_string() + " to the host");
}

}  // namespace dgemma::opencl
