#pragma once
// What the OpenCL tests share (tests/opencl): the device they run on and the
// text of an error. Include only in a DGEMMA_HAVE_OPENCL build.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/opencl/opencl_backend.h"
#include "dgemma/error.h"

namespace dgemma::testing {

// The text of the dgemma::Error `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The device the tests use: the first PoCL device (CI's), else the first one;
// null when the machine has none (`why` says why).
inline const OpenClDeviceInfo* test_device(const std::vector<OpenClDeviceInfo>& devices) {
  for (const OpenClDeviceInfo& d : devices)
    if (d.platform_name.find("Portable Computing Language") != std::string::npos) return &d;
  return devices.empty() ? nullptr : &devices.front();
}

// A backend on test_device(), or null when there is none (or, with
// `need_fp64`, when it has no fp64: the sample op is refused there).
inline std::unique_ptr<OpenClBackend> make_test_backend(bool need_fp64 = false) {
  std::string why;
  const std::vector<OpenClDeviceInfo> devices = opencl_devices(&why);
  const OpenClDeviceInfo* d = test_device(devices);
  if (!d || (need_fp64 && !d->fp64)) return nullptr;
  return std::make_unique<OpenClBackend>(OpenClBackendOptions{d->platform, d->device, false});
}

}  // namespace dgemma::testing

// The devices this machine has, or a skip when it has none.
#define REQUIRE_OPENCL_DEVICE(devices)                                     \
  std::string why_none;                                                    \
  const std::vector<OpenClDeviceInfo> devices = opencl_devices(&why_none); \
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device here: " << why_none
