#pragma once
// One OpenCL device as the backend drives it: its context, the in-order
// command queue, the kernel program built from kernels_*.cl when the backend is
// created (docs/opencl.md §3), the kernels by name, and the traffic counts.
// Shared (std::shared_ptr) by the backend and by every tensor's device data,
// so that a tensor can be read back after its backend is gone.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/opencl/cl_devices.h"
#include "ops/backend.h"

namespace dgemma::opencl {

class ClRuntime {
 public:
  // Builds the kernels of kernels_*.cl, or of `source` when given (tests of the
  // build-failure report).
  explicit ClRuntime(const ClDevice& device, const char* source = nullptr);
  ~ClRuntime();
  ClRuntime(const ClRuntime&) = delete;
  ClRuntime& operator=(const ClRuntime&) = delete;

  const OpenClDeviceInfo& info() const { return device_.info; }
  cl_context context() const { return context_; }
  cl_command_queue queue() const { return queue_; }
  // A kernel of the program; throws naming `name` when it has none.
  cl_kernel kernel(const std::string& name);
  int tile() const { return tile_; }
  int norm_group() const { return norm_group_; }
  // Bytes of each guard zone of the debug mode's buffers (cl_guard.h): at
  // least 256 and a multiple of the device's base address alignment, where a
  // sub-buffer must start.
  size_t guard_bytes() const { return guard_bytes_; }

  // The debug mode (docs/opencl.md §4): ClOp allocates the op's buffers with
  // guard zones, fills fresh outputs with NaN and checks the zones after the
  // op. Set by the backend from its options (or by a test).
  bool debug = false;

  // A buffer of `bytes` (> 0) bytes; `where` names the op in errors.
  cl_mem alloc(size_t bytes, const std::string& where);
  // Blocking copies between host and device, counted in traffic(); a write
  // lands `offset` bytes into `dst`.
  void write(cl_mem dst, const void* src, size_t bytes, const std::string& where, bool weight = false,
             size_t offset = 0);
  void read(void* dst, cl_mem src, size_t bytes, const std::string& where);
  // Reads `bytes` bytes of `src` from `offset` on.
  void read_at(void* dst, cl_mem src, size_t offset, size_t bytes, const std::string& where);
  // Waits for the queue (counted as a synchronization).
  void finish(const std::string& where);
  // A constant the host computes (RoPE frequencies): `make` runs and its
  // values go up the first time `key` is asked for, kept for the runtime's
  // life; counted as weight traffic (docs/opencl.md §1).
  cl_mem constant(const std::string& key, const std::function<std::vector<float>()>& make, const std::string& where);

  DeviceTraffic traffic;

  // Device time per op (Backend::set_profiling, docs/opencl.md §1): while on,
  // ClOp asks the queue for an event of each of its launches and hands them
  // over with record_op(); take_profile() waits for the device and sums each
  // op's commands from their start to their end stamps.
  void set_profiling(bool on);
  bool profiling() const { return profiling_; }
  void record_op(OpKind kind, int layer, std::vector<cl_event> events);
  std::vector<OpDeviceTime> take_profile();

 private:
  void build_program(const char* source);

  ClDevice device_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  std::map<std::string, cl_kernel> kernels_;
  std::map<std::string, cl_mem> constants_;
  int tile_ = 16, norm_group_ = 256;
  size_t guard_bytes_ = 256;
  struct ProfiledOp {
    OpKind kind;
    int layer;
    std::vector<cl_event> events;
  };
  bool profiling_ = false;
  std::vector<ProfiledOp> profiled_;
  void release_profile();
};

}  // namespace dgemma::opencl
