#pragma once
// Finding an OpenCL device by its indices (opencl_devices.h), with the
// handles the backend needs.
#include <string>

#include "backend/opencl/cl_api.h"
#include "backend/opencl/opencl_devices.h"

namespace dgemma::opencl {

struct ClDevice {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  OpenClDeviceInfo info;
};

// Platform P's device D, or (P < 0) the default device. Throws dgemma::Error
// naming `spec` and what exists when there is no such device or no platform.
ClDevice find_device(int platform, int device, const std::string& spec);

}  // namespace dgemma::opencl
