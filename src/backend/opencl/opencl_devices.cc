#include <algorithm>
#include <atomic>
#include <vector>

#include "backend/opencl/cl_devices.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

using opencl::cl_check;

const char* const kWhere = "listing the OpenCL devices";

std::atomic<bool> g_started{false};

std::vector<cl_platform_id> platforms(cl_int* status) {
  g_started = true;  // the ICD loader loads the drivers here
  cl_uint n = 0;
  *status = clGetPlatformIDs(0, nullptr, &n);
  if (*status != CL_SUCCESS || n == 0) return {};
  std::vector<cl_platform_id> ids(n);
  cl_check(clGetPlatformIDs(n, ids.data(), nullptr), "clGetPlatformIDs", kWhere);
  return ids;
}

std::vector<cl_device_id> devices_of(cl_platform_id p) {
  cl_uint n = 0;
  const cl_int e = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
  if (e == CL_DEVICE_NOT_FOUND || n == 0) return {};
  cl_check(e, "clGetDeviceIDs", kWhere);
  std::vector<cl_device_id> ids(n);
  cl_check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr), "clGetDeviceIDs", kWhere);
  return ids;
}

std::string type_name(cl_device_type t) {
  std::string s;
  auto add = [&](cl_device_type bit, const char* name) {
    if (!(t & bit)) return;
    if (!s.empty()) s += '+';
    s += name;
  };
  add(CL_DEVICE_TYPE_GPU, "gpu");
  add(CL_DEVICE_TYPE_CPU, "cpu");
  add(CL_DEVICE_TYPE_ACCELERATOR, "accelerator");
  add(CL_DEVICE_TYPE_CUSTOM, "custom");
  return s.empty() ? "other" : s;
}

bool has_extension(const std::string& list, const char* ext) {
  const std::string e(ext);
  size_t at = 0;
  while ((at = list.find(e, at)) != std::string::npos) {
    const size_t end = at + e.size();
    if ((at == 0 || list[at - 1] == ' ') && (end == list.size() || list[end] == ' ')) return true;
    at = end;
  }
  return false;
}

OpenClDeviceInfo describe(cl_platform_id p, cl_device_id d, int pi, int di) {
  using namespace opencl;
  OpenClDeviceInfo info;
  info.platform = pi;
  info.device = di;
  info.platform_name = platform_string(p, CL_PLATFORM_NAME);
  info.platform_version = platform_string(p, CL_PLATFORM_VERSION);
  info.name = device_string(d, CL_DEVICE_NAME);
  info.vendor = device_string(d, CL_DEVICE_VENDOR);
  info.driver_version = device_string(d, CL_DRIVER_VERSION);
  info.type = type_name(device_value<cl_device_type>(d, CL_DEVICE_TYPE));
  info.c_version = device_string(d, CL_DEVICE_OPENCL_C_VERSION);
  info.global_mem_bytes = int64_t(device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
  info.compute_units = int64_t(device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
  info.max_work_group = int64_t(device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  const std::string ext = device_string(d, CL_DEVICE_EXTENSIONS);
  info.fp16 = has_extension(ext, "cl_khr_fp16");
  info.fp64 = has_extension(ext, "cl_khr_fp64");
  info.subgroups = has_extension(ext, "cl_khr_subgroups") || has_extension(ext, "cl_intel_subgroups");
  info.int8_dot =
      has_extension(ext, "cl_khr_integer_dot_product") || has_extension(ext, "cl_arm_integer_dot_product_int8");
  info.spec = "opencl:" + std::to_string(pi) + "." + std::to_string(di);
  return info;
}

std::string no_platform_reason(cl_int status) {
  return "no OpenCL platform found (clGetPlatformIDs: " + opencl::cl_error_name(status) +
         "; install an OpenCL driver, e.g. intel-opencl-icd for Intel GPUs or pocl-opencl-icd for the CPU)";
}

// "opencl:0.0 (pthread-…, cpu), opencl:0.1 (…)".
std::string list_of(const std::vector<OpenClDeviceInfo>& all) {
  std::string s;
  for (const OpenClDeviceInfo& d : all) s += (s.empty() ? "" : ", ") + d.spec + " (" + d.name + ", " + d.type + ")";
  return s;
}

}  // namespace

bool opencl_started_in_this_process() { return g_started.load(); }

std::vector<OpenClDeviceInfo> opencl_devices(std::string* why) {
  cl_int status = CL_SUCCESS;
  const std::vector<cl_platform_id> ps = platforms(&status);
  if (ps.empty()) {
    if (why) *why = no_platform_reason(status == CL_SUCCESS ? opencl::kPlatformNotFound : status);
    return {};
  }
  std::vector<OpenClDeviceInfo> all;
  for (size_t pi = 0; pi < ps.size(); ++pi) {
    const std::vector<cl_device_id> ds = devices_of(ps[pi]);
    for (size_t di = 0; di < ds.size(); ++di) all.push_back(describe(ps[pi], ds[di], int(pi), int(di)));
  }
  if (all.empty() && why) *why = "the OpenCL platforms present have no device";
  return all;
}

const OpenClDeviceInfo& default_opencl_device(const std::vector<OpenClDeviceInfo>& devices) {
  if (devices.empty()) throw Error("no OpenCL device found");
  auto gpu = std::find_if(devices.begin(), devices.end(),
                          [](const OpenClDeviceInfo& d) { return d.type.find("gpu") != std::string::npos; });
  return gpu != devices.end() ? *gpu : devices.front();
}

namespace opencl {

ClDevice find_device(int platform, int device, const std::string& spec) {
  cl_int status = CL_SUCCESS;
  const std::vector<cl_platform_id> ps = platforms(&status);
  if (ps.empty())
    throw Error("backend '" + spec +
                "': " + no_platform_reason(status == CL_SUCCESS ? opencl::kPlatformNotFound : status));
  std::string why;
  const std::vector<OpenClDeviceInfo> all = opencl_devices(&why);
  if (all.empty()) throw Error("backend '" + spec + "': " + why);
  const OpenClDeviceInfo* chosen = nullptr;
  if (platform < 0) {
    chosen = &default_opencl_device(all);
  } else {
    for (const OpenClDeviceInfo& d : all)
      if (d.platform == platform && d.device == device) chosen = &d;
    if (!chosen)
      throw Error("backend '" + spec + "': OpenCL device " + std::to_string(platform) + "." + std::to_string(device) +
                  " does not exist (" + std::to_string(ps.size()) + " platform(s); devices: " + list_of(all) +
                  "; `dgemma devices` lists them)");
  }
  ClDevice c;
  c.platform = ps[size_t(chosen->platform)];
  c.device = devices_of(c.platform)[size_t(chosen->device)];
  c.info = *chosen;
  return c;
}

}  // namespace opencl
}  // namespace dgemma
