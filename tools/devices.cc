// dgemma devices [--json]: the devices the backends can run on
// (docs/opencl.md §2): every OpenCL device with the --backend string that
// selects it, and the CUDA devices (name, memory, compute capability) when
// the CUDA backend is built.
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "cli.h"
#include "core/format.h"
#include "core/json.h"
#include "flags.h"
#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_devices.h"
#endif

namespace dgemma::cli {
namespace {

const char* yes_no(bool b) { return b ? "yes" : "no"; }

#if DGEMMA_HAVE_OPENCL
json::Value device_json(const OpenClDeviceInfo& d) {
  json::Value v = json::Object{};
  v.set("backend", d.spec);
  v.set("platform", d.platform);
  v.set("device", d.device);
  v.set("platform_name", d.platform_name);
  v.set("platform_version", d.platform_version);
  v.set("name", d.name);
  v.set("vendor", d.vendor);
  v.set("driver_version", d.driver_version);
  v.set("type", d.type);
  v.set("global_memory_bytes", d.global_mem_bytes);
  v.set("compute_units", d.compute_units);
  v.set("max_work_group_size", d.max_work_group);
  v.set("opencl_c_version", d.c_version);
  v.set("fp16", d.fp16);
  v.set("fp64", d.fp64);
  v.set("subgroups", d.subgroups);
  v.set("int8_dot", d.int8_dot);
  return v;
}

void print_device(const OpenClDeviceInfo& d) {
  std::printf("  %s  %s (%s)\n", d.spec.c_str(), d.name.c_str(), d.type.c_str());
  std::printf("    platform        %s (%s)\n", d.platform_name.c_str(), d.platform_version.c_str());
  std::printf("    global memory   %s\n", human_bytes(uint64_t(d.global_mem_bytes)).c_str());
  std::printf("    compute units   %lld\n", static_cast<long long>(d.compute_units));
  std::printf("    max work-group  %lld\n", static_cast<long long>(d.max_work_group));
  std::printf("    OpenCL C        %s\n", d.c_version.c_str());
  std::printf("    extensions      fp16 %s, fp64 %s, subgroups %s, int8 dot %s\n", yes_no(d.fp16), yes_no(d.fp64),
              yes_no(d.subgroups), yes_no(d.int8_dot));
}
#endif

int run_devices(const Args& args) {
  bool as_json = false;
  FlagParser p("dgemma devices [--json]",
               "Lists the devices the backends can run on: every OpenCL device (platform, name, type, memory, "
               "compute units, work-group limit, OpenCL C version, the fp16/fp64/subgroup/int8-dot extensions) "
               "with the --backend string that selects it, and the CUDA devices (name, memory, compute capability, "
               "multiprocessors) when this build has the CUDA backend.");
  p.add_bool("--json", &as_json, "print the list as JSON");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw UsageError("devices: unexpected argument '" + p.positional()[0] + "'");

  json::Value out = json::Object{};
  json::Value ocl = json::Object{};
#if DGEMMA_HAVE_OPENCL
  std::string why;
  const std::vector<OpenClDeviceInfo> devices = opencl_devices(&why);
  ocl.set("built", true);
  json::Array list;
  for (const OpenClDeviceInfo& d : devices) list.push_back(device_json(d));
  ocl.set("devices", json::Value(std::move(list)));
  if (!devices.empty()) ocl.set("default", default_opencl_device(devices).spec);
  if (devices.empty()) ocl.set("error", why);
  if (!as_json) {
    std::printf("OpenCL devices: %zu\n", devices.size());
    for (const OpenClDeviceInfo& d : devices) print_device(d);
    if (devices.empty())
      std::printf("  %s\n", why.c_str());
    else
      std::printf("  --backend opencl selects %s (the first GPU, else the first device)\n",
                  default_opencl_device(devices).spec.c_str());
  }
#else
  ocl.set("built", false);
  if (!as_json) std::printf("OpenCL: this build has no OpenCL backend (DGEMMA_OPENCL)\n");
#endif
  out.set("opencl", std::move(ocl));
  const int cuda = cuda_devices_in_this_build();
  const std::vector<CudaDeviceSummary> gpus = cuda_device_list();
  json::Value cu = json::Object{};
  cu.set("built", cuda >= 0);
  if (cuda >= 0) {
    cu.set("count", cuda);
    json::Array list;
    for (const CudaDeviceSummary& d : gpus) {
      json::Value v = json::Object{};
      v.set("backend", d.backend);
      v.set("name", d.name);
      v.set("memory_bytes", d.memory_bytes);
      v.set("compute_capability", d.compute_capability);
      v.set("multiprocessors", d.multiprocessors);
      list.push_back(std::move(v));
    }
    cu.set("devices", json::Value(std::move(list)));
  }
  out.set("cuda", std::move(cu));
  if (as_json) {
    std::printf("%s\n", json::dump(out, 2).c_str());
    return 0;
  }
  if (cuda < 0) {
    std::printf("CUDA: this build has no CUDA backend (DGEMMA_CUDA)\n");
    return 0;
  }
  std::printf("CUDA devices: %d\n", cuda);
  for (const CudaDeviceSummary& d : gpus) {
    if (d.name.empty()) {
      std::printf("  %s  (its properties could not be read)\n", d.backend.c_str());
      continue;
    }
    std::printf("  %s  %s\n", d.backend.c_str(), d.name.c_str());
    std::printf("    memory              %s\n", human_bytes(d.memory_bytes).c_str());
    std::printf("    compute capability  %s\n", d.compute_capability.c_str());
    std::printf("    multiprocessors     %d\n", d.multiprocessors);
  }
  if (cuda > int(gpus.size()))
    std::printf("  (%d more, cuda:%zu to cuda:%d, not listed)\n", cuda - int(gpus.size()), gpus.size(), cuda - 1);
  return 0;
}

const Subcommand kDevices("devices", "list the OpenCL (and CUDA) devices and the --backend string of each",
                          run_devices);

}  // namespace
}  // namespace dgemma::cli
