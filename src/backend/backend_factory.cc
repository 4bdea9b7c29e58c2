#include "backend/backend_factory.h"

#include "backend/inject_backend.h"
#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#endif
#include "dgemma/error.h"
#include "backend/cpu/cpu_backend.h"

namespace dgemma {

namespace {
#if DGEMMA_HAVE_OPENCL
const char* const kAvailable = "cpu, opencl, opencl:P.D, inject:OP:LAYER:PASS:STEP:KIND[:SITE][@BACKEND]";
#else
const char* const kAvailable = "cpu, inject:OP:LAYER:PASS:STEP:KIND[:SITE][@BACKEND]";
#endif

bool is_opencl_name(const std::string& spec) { return spec == "opencl" || spec.rfind("opencl:", 0) == 0; }
}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& spec, int threads) {
  if (spec == "cpu") return std::make_unique<CpuBackend>(threads);
  if (spec.rfind("inject:", 0) == 0) {
    InjectSpec inject = parse_inject_spec(spec);
    std::unique_ptr<Backend> inner =
        inject.inner == "cpu" ? std::make_unique<CpuBackend>(threads) : make_backend(inject.inner, threads);
    return std::make_unique<InjectBackend>(std::move(inner), std::move(inject));
  }
  if (spec == "cuda" || spec.rfind("cuda:", 0) == 0) {
#if DGEMMA_HAVE_CUDA
    // "cuda", "cuda:sync", "cuda:debug", "cuda:1,sync". The device check runs
    // in a throwaway child process (cuda_device_count), so constructing the
    // backend here leaves CUDA uninitialized in this process until its first op.
    const CudaBackendOptions options = parse_cuda_spec(spec);
    if (!cuda_device_available())
      throw Error("backend '" + spec + "': no CUDA device found (" + cuda_unavailable_reason() + ")");
    if (options.device >= cuda_device_count())
      throw Error("backend '" + spec + "': CUDA device " + std::to_string(options.device) + " does not exist (" +
                  std::to_string(cuda_device_count()) + " present)");
    return std::make_unique<CudaBackend>(options);
#else
    throw Error("backend '" + spec +
                "': this build of dgemma has no CUDA backend (it is built when CMake finds "
                "nvcc; see DGEMMA_CUDA) (available: " +
                kAvailable + ")");
#endif
  }
  if (is_opencl_name(spec)) {
#if DGEMMA_HAVE_OPENCL
    // "opencl" (the first GPU, else the first device), "opencl:P.D", "opencl:P.D,debug"
    // (docs/opencl.md §2); the device is found and the kernels built here.
    return std::make_unique<OpenClBackend>(parse_opencl_spec(spec));
#else
    throw Error("backend '" + spec +
                "': this build of dgemma has no OpenCL backend (it is built when CMake finds the OpenCL headers "
                "and ICD loader; see DGEMMA_OPENCL) (available: " +
                kAvailable + ")");
#endif
  }
  throw Error("unknown backend '" + spec + "' (available: " + kAvailable + ")");
}

void check_backend_name(const std::string& spec) {
  if (spec.rfind("inject:", 0) == 0) return check_backend_name(parse_inject_spec(spec).inner);
#if DGEMMA_HAVE_OPENCL
  if (is_opencl_name(spec)) {
    parse_opencl_spec(spec);
    return;
  }
#endif
  make_backend(spec, 1);
}

bool opencl_unusable_after_fork(const std::string& spec) {
  if (spec.rfind("inject:", 0) == 0) return opencl_unusable_after_fork(parse_inject_spec(spec).inner);
#if DGEMMA_HAVE_OPENCL
  return is_opencl_name(spec) && opencl_started_in_this_process();
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_cpu_backend(int threads, bool bf16_dot, bool int8_dot) {
  CpuBackendOptions options;
  options.threads = threads;
  options.bf16_dot = bf16_dot;
  options.int8_dot = int8_dot;
  return std::make_unique<CpuBackend>(options);
}

int cuda_devices_in_this_build() {
#if DGEMMA_HAVE_CUDA
  return cuda_device_count();
#else
  return -1;
#endif
}

std::vector<CudaDeviceSummary> cuda_device_list() {
  std::vector<CudaDeviceSummary> out;
#if DGEMMA_HAVE_CUDA
  for (const CudaDeviceInfo& d : cuda_devices()) {
    CudaDeviceSummary s;
    s.backend = "cuda:" + std::to_string(d.index);
    s.name = d.name;
    s.memory_bytes = d.memory_bytes;
    s.compute_capability = d.name.empty() ? "" : std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
    s.multiprocessors = d.multiprocessors;
    out.push_back(std::move(s));
  }
#endif
  return out;
}

uint64_t device_memory_bytes(const std::string& name) {
  const std::string ask = "device '" + name + "': ";
  if (is_opencl_name(name)) {
#if DGEMMA_HAVE_OPENCL
    const OpenClBackendOptions o = parse_opencl_spec(name);
    std::string why;
    const std::vector<OpenClDeviceInfo> devices = opencl_devices(&why);
    if (devices.empty()) throw Error(ask + "no OpenCL device here (" + why + "); give its size as " + name + "=SIZE");
    if (o.platform < 0) return uint64_t(default_opencl_device(devices).global_mem_bytes);
    for (const OpenClDeviceInfo& d : devices)
      if (d.platform == o.platform && d.device == o.device) return uint64_t(d.global_mem_bytes);
    throw Error(ask + "no such OpenCL device (`dgemma devices` lists them); give its size as " + name + "=SIZE");
#else
    throw Error(ask + "this build has no OpenCL backend to read its memory from; give its size as " + name + "=SIZE");
#endif
  }
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    const std::string index = name == "cuda" ? "0" : name.substr(5);
    for (const CudaDeviceSummary& d : cuda_device_list())
      if (d.backend == "cuda:" + index && d.memory_bytes > 0) return d.memory_bytes;
    throw Error(ask +
                (cuda_devices_in_this_build() < 0 ? "this build has no CUDA backend to read its memory from"
                                                  : "no such CUDA device here") +
                "; give its size as " + name + "=SIZE");
  }
  throw Error(ask + "only OpenCL and CUDA devices report their memory; give its size as " + name + "=SIZE");
}

std::string with_device_option(const std::string& spec, const std::string& option) {
  if (spec == "cuda" || spec == "opencl") return spec + ":" + option;
  if (spec.rfind("cuda:", 0) == 0 || spec.rfind("opencl:", 0) == 0) return spec + "," + option;
  return spec;
}

}  // namespace dgemma
