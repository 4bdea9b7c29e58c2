#include "backend/opencl/cl_runtime.h"

#include <algorithm>
#include <vector>

#include "dgemma/error.h"

namespace dgemma::opencl {

extern const char kKernelSource[];  // kernels_*.cl joined, embedded by cmake/embed_text.cmake

namespace {
const char* const kSetUp = "setting up the OpenCL backend";
}

ClRuntime::ClRuntime(const ClDevice& device, const char* source) : device_(device) {
  cl_int e = CL_SUCCESS;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device_.platform),
                                         0};
  context_ = clCreateContext(props, 1, &device_.device, nullptr, nullptr, &e);
  cl_check(e, "clCreateContext", kSetUp);
  // Profiling is a property of the queue: always on, so that set_profiling()
  // can time ops without making a new queue (no launch waits for it).
  queue_ = clCreateCommandQueue(context_, device_.device, CL_QUEUE_PROFILING_ENABLE, &e);
  if (e != CL_SUCCESS) {
    clReleaseContext(context_);
    cl_fail(e, "clCreateCommandQueue", kSetUp);
  }
  // The product's square work-group and the norm's reduction fit the device.
  const int64_t max_wg = std::max<int64_t>(device_.info.max_work_group, 1);
  tile_ = 16;
  while (tile_ > 1 && int64_t(tile_) * tile_ > max_wg) tile_ /= 2;
  norm_group_ = 256;
  while (norm_group_ > 1 && norm_group_ > max_wg) norm_group_ /= 2;
  const size_t align = device_value<cl_uint>(device_.device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;  // bits
  guard_bytes_ = align > 256 ? align : (align > 0 && 256 % align != 0 ? (256 / align + 1) * align : 256);
  try {
    build_program(source ? source : kKernelSource);
  } catch (...) {
    for (auto& [name, k] : kernels_) clReleaseKernel(k);
    if (program_) clReleaseProgram(program_);
    clReleaseCommandQueue(queue_);
    clReleaseContext(context_);
    throw;
  }
}

ClRuntime::~ClRuntime() {
  // Best effort, never throwing: outstanding work finishes before release.
  clFinish(queue_);
  release_profile();
  for (auto& [key, m] : constants_) clReleaseMemObject(m);
  for (auto& [name, k] : kernels_) clReleaseKernel(k);
  clReleaseProgram(program_);
  clReleaseCommandQueue(queue_);
  clReleaseContext(context_);
}

void ClRuntime::build_program(const char* src) {
  cl_int e = CL_SUCCESS;
  program_ = clCreateProgramWithSource(context_, 1, &src, nullptr, &e);
  cl_check(e, "clCreateProgramWithSource", kSetUp);
  std::string options = "-cl-std=CL1.2 -DTILE=" + std::to_string(tile_) + " -DNORM_WG=" + std::to_string(norm_group_);
  // Divisions and square roots rounded as the CPU rounds them, where the
  // device offers it (optional in OpenCL 1.2).
  const auto fp = device_value<cl_device_fp_config>(device_.device, CL_DEVICE_SINGLE_FP_CONFIG);
  if (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) options += " -cl-fp32-correctly-rounded-divide-sqrt";
  e = clBuildProgram(program_, 1, &device_.device, options.c_str(), nullptr, nullptr);
  if (e != CL_SUCCESS) {
    std::string log;
    size_t n = 0;
    if (clGetProgramBuildInfo(program_, device_.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) == CL_SUCCESS && n > 0) {
      std::vector<char> text(n + 1, '\0');
      if (clGetProgramBuildInfo(program_, device_.device, CL_PROGRAM_BUILD_LOG, n, text.data(), nullptr) == CL_SUCCESS)
        log = text.data();
    }
    throw Error("opencl backend: clBuildProgram failed with " + cl_error_name(e) + " (" + std::to_string(e) +
                ") building the kernels for " + device_.info.spec + " (" + device_.info.name + ", options '" + options +
                "'); the driver's build log:\n" + (log.empty() ? std::string("(empty)") : log));
  }
}

cl_kernel ClRuntime::kernel(const std::string& name) {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  cl_int e = CL_SUCCESS;
  cl_kernel k = clCreateKernel(program_, name.c_str(), &e);
  cl_check(e, "clCreateKernel", "creating kernel '" + name + "'");
  kernels_[name] = k;
  return k;
}

cl_mem ClRuntime::alloc(size_t bytes, const std::string& where) {
  cl_int e = CL_SUCCESS;
  cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &e);
  cl_check(e, "clCreateBuffer", where);
  return m;
}

void ClRuntime::write(cl_mem dst, const void* src, size_t bytes, const std::string& where, bool weight, size_t offset) {
  cl_check(clEnqueueWriteBuffer(queue_, dst, CL_TRUE, offset, bytes, src, 0, nullptr, nullptr), "clEnqueueWriteBuffer",
           where);
  (weight ? traffic.weight_h2d_bytes : traffic.h2d_bytes) += int64_t(bytes);
  ++traffic.synchronizations;
}

void ClRuntime::read(void* dst, cl_mem src, size_t bytes, const std::string& where) {
  read_at(dst, src, 0, bytes, where);
}

void ClRuntime::read_at(void* dst, cl_mem src, size_t offset, size_t bytes, const std::string& where) {
  cl_check(clEnqueueReadBuffer(queue_, src, CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr), "clEnqueueReadBuffer",
           where);
  traffic.d2h_bytes += int64_t(bytes);
  ++traffic.synchronizations;
}

cl_mem ClRuntime::constant(const std::string& key, const std::function<std::vector<float>()>& make,
                           const std::string& where) {
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  const std::vector<float> values = make();
  cl_mem m = alloc(values.size() * 4, where);
  try {
    write(m, values.data(), values.size() * 4, where, /*weight=*/true);
  } catch (...) {
    clReleaseMemObject(m);
    throw;
  }
  constants_[key] = m;
  return m;
}

void ClRuntime::release_profile() {
  for (ProfiledOp& op : profiled_)
    for (cl_event e : op.events) clReleaseEvent(e);
  profiled_.clear();
}

void ClRuntime::set_profiling(bool on) {
  profiling_ = on;
  if (!on) release_profile();
}

void ClRuntime::record_op(OpKind kind, int layer, std::vector<cl_event> events) {
  profiled_.push_back({kind, layer, std::move(events)});
}

std::vector<OpDeviceTime> ClRuntime::take_profile() {
  finish("take_profile");
  std::vector<OpDeviceTime> times;
  times.reserve(profiled_.size());
  try {
    for (const ProfiledOp& op : profiled_) {
      double seconds = 0;
      for (cl_event e : op.events) {
        cl_ulong start = 0, end = 0;
        cl_check(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
                 "clGetEventProfilingInfo", "take_profile");
        cl_check(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
                 "clGetEventProfilingInfo", "take_profile");
        if (end > start) seconds += double(end - start) * 1e-9;  // nanoseconds
      }
      times.push_back({op.kind, op.layer, seconds});
    }
  } catch (...) {
    release_profile();
    throw;
  }
  release_profile();
  return times;
}

void ClRuntime::finish(const std::string& where) {
  cl_check(clFinish(queue_), "clFinish", where);
  ++traffic.synchronizations;
}

}  // namespace dgemma::opencl
