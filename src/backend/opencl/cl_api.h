#pragma once
// The OpenCL C API as the backend uses it (OpenCL 1.2 entry points only, so
// that every ICD from 1.2 on runs it), and the check that turns an error code
// into a dgemma::Error naming the call, the code and the op (docs/opencl.md §4).
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>

namespace dgemma::opencl {

// What the ICD loader answers when no platform is installed (cl_khr_icd;
// CL/cl_ext.h, not included here).
inline constexpr cl_int kPlatformNotFound = -1001;

// "CL_OUT_OF_RESOURCES" for -5; "CL error -1234" for a code it does not know.
std::string cl_error_name(cl_int code);

// Throws dgemma::Error "opencl backend: CALL failed with NAME (CODE) in WHERE";
// `where` names the op (or what the backend was doing: "creating the
// context"). cl_check does so when `code` is not CL_SUCCESS.
[[noreturn]] void cl_fail(cl_int code, const char* call, const std::string& where);
inline void cl_check(cl_int code, const char* call, const std::string& where) {
  if (code != CL_SUCCESS) [[unlikely]]
    cl_fail(code, call, where);
}

// Strings and scalars of clGetDeviceInfo / clGetPlatformInfo.
std::string device_string(cl_device_id device, cl_device_info what);
std::string platform_string(cl_platform_id platform, cl_platform_info what);
template <typename T>
T device_value(cl_device_id device, cl_device_info what) {
  T v{};
  cl_check(clGetDeviceInfo(device, what, sizeof v, &v, nullptr), "clGetDeviceInfo", "reading a device's properties");
  return v;
}

}  // namespace dgemma::opencl
