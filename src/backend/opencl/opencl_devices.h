#pragma once
// The OpenCL devices of this machine, as `dgemma devices` lists them and as
// `--backend opencl[:P.D]` selects them (docs/opencl.md §2). No OpenCL types
// here: callers that do not run kernels include it without the headers.
#include <cstdint>
#include <string>
#include <vector>

namespace dgemma {

struct OpenClDeviceInfo {
  int platform = 0, device = 0;  // indices in the ICD loader's order
  std::string platform_name, platform_version;
  std::string name, vendor, driver_version;
  std::string type;       // "gpu", "cpu", "accelerator", "custom" (several joined with '+')
  std::string c_version;  // CL_DEVICE_OPENCL_C_VERSION, e.g. "OpenCL C 1.2 PoCL"
  int64_t global_mem_bytes = 0;
  int64_t compute_units = 0;
  int64_t max_work_group = 0;
  bool fp16 = false;       // cl_khr_fp16
  bool fp64 = false;       // cl_khr_fp64
  bool subgroups = false;  // cl_khr_subgroups or cl_intel_subgroups
  bool int8_dot = false;   // cl_khr_integer_dot_product or cl_arm_integer_dot_product_int8
  std::string spec;        // the --backend string that selects it: "opencl:P.D"
};

// Every device of every platform; empty when there is no platform (no ICD
// installed), with the reason in `why` when given. Throws only for an
// OpenCL error other than "no platform".
std::vector<OpenClDeviceInfo> opencl_devices(std::string* why = nullptr);

// Whether this process has asked the ICD loader for its platforms (listed
// devices or made a backend): the drivers are loaded then, and some (PoCL)
// start threads that a forked child does not have, so a fork() after it
// cannot use OpenCL (backend_factory.h check_backend_name, `doctor`).
bool opencl_started_in_this_process();

// The device `--backend opencl` takes: the first GPU, else the first device.
// Throws dgemma::Error when there is none.
const OpenClDeviceInfo& default_opencl_device(const std::vector<OpenClDeviceInfo>& devices);

}  // namespace dgemma
