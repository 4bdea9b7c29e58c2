#pragma once
// The OpenCL backend (docs/opencl.md): runs ops of the vocabulary (ops/op.h)
// on one OpenCL device (an Intel, AMD or NVIDIA GPU, a CPU through PoCL) with
// portable OpenCL C 1.2 kernels (kernels_*.cl) that the driver compiles when the
// backend is created.
//
// Like the CUDA backend (docs/cuda.md §1), activations are device-resident:
// an op's outputs stay in device buffers, attached to their Tensor, when the
// call allows it (OpCall::device_outputs), and the next op reads them there;
// small host inputs are uploaded once and kept while their bytes stay the
// same. Weights are uploaded once, plain ones in their stored dtype and
// quantized ones packed (decoded in the kernels), and cached. What it does
// not run (a quantized weight in an op that reads only plain ones, a layout
// the decoders do not read, the sample op without fp64) it refuses through
// supports() with the reason.
//
// No OpenCL types in this header. Not thread-safe: one thread drives one
// backend.
#include <cstdint>
#include <memory>
#include <string>

#include "backend/opencl/opencl_devices.h"
#include "ops/backend.h"

namespace dgemma {

struct OpenClBackendOptions {
  int platform = -1, device = -1;  // -1: the default device (the first GPU, else the first device)
  // `debug` (spec option "debug", or "sync" as for CUDA): wait for the device
  // after every op, so that a fault is reported at the op that caused it;
  // the op's buffers get guard zones checked after it, fresh outputs hold
  // NaN until written, and an output holding NaN or an infinity fails the
  // op (cl_op.h, docs/opencl.md §4).
  bool debug = false;
};

// Parses "opencl", "opencl:P.D", "opencl:P.D,debug", "opencl:debug"; throws
// dgemma::Error naming the spec and what is wrong.
OpenClBackendOptions parse_opencl_spec(const std::string& spec);

// What OpenClBackend::supports answers without a device (the sample op's
// fp64 is the backend's own check): quantized weights in ops that read only
// plain ones, layouts the decoders do not read, and plain weights of a dtype
// they do not read are refused, with the reason in `why`.
bool opencl_supports(const OpCall& call, std::string* why = nullptr);

class OpenClBackend : public Backend {
 public:
  // Creates the context and builds the kernels; throws dgemma::Error when the
  // device does not exist (naming the ones that do) or the build fails (with
  // the driver's log).
  explicit OpenClBackend(OpenClBackendOptions options = {});
  ~OpenClBackend() override;
  OpenClBackend(const OpenClBackend&) = delete;
  OpenClBackend& operator=(const OpenClBackend&) = delete;

  std::string name() const override;  // "opencl:P.D"
  void run(const OpCall& call) override;
  // opencl_supports(call, why).
  bool supports(const OpCall& call, std::string* why = nullptr) const override;
  bool supports_device_outputs() const override { return true; }
  void release_weight_copies() override;
  std::optional<DeviceTraffic> device_traffic() const override;
  void reset_traffic() override;
  // Device time per op from the queue's profiling stamps (docs/opencl.md §1).
  bool set_profiling(bool on) override;
  std::vector<OpDeviceTime> take_profile() override;

  const OpenClDeviceInfo& device() const;
  const OpenClBackendOptions& options() const { return options_; }
  // Bytes of weights resident on the device.
  int64_t cached_weight_bytes() const;

 private:
  struct Impl;
  OpenClBackendOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgemma
