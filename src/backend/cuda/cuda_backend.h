#pragma once
// The CUDA backend: runs each op of the vocabulary (ops/op.h) on one NVIDIA
// GPU with simple kernels (cuda_kernels.cu) and cuBLAS for the two matrix
// products. Weights are uploaded once, in their stored dtype, and cached on
// the device.
//
// Activations are device-resident (ops/backend.h, docs/cuda.md §1): an op's outputs
// stay in device memory, attached to their Tensor, when the caller allows it
// (OpCall::device_outputs: the model's Executor without an observer), and the
// next op reads them there. The KV cache grows on the device (concat_rows),
// attention reads it there (a flash kernel over the cache's rows and the new
// ones), and moe_experts routes on the device (only the E expert counts come
// to the host). Small host inputs (positions, token ids) are uploaded once and their
// device copy is reused while their host data is unchanged. `traffic()`
// counts what crosses the bus, the synchronizations and the launches.
// The checker mode (`cuda:checker`, implied by debug) is the per-op round
// trip: every input uploaded, every output copied back, nothing kept between
// ops, which is what `doctor` uses to localize a fault.
// Quantized weights (NF4, NVFP4, MLX affine, int8) stay packed there
// (quant_upload.h); the kernels dequantize per element with the CPU's
// formulas, and the matrix products widen chunks to fp32 for cuBLAS.
//
// Fault guards (docs/placement.md, Requirements 5-7):
//  - every CUDA and cuBLAS call is checked; errors become dgemma::Error naming
//    the op (kind, site, layer, pass, step), the kernel and the CUDA error;
//  - `sync`: synchronize and check after every launch, so that an
//    asynchronous fault is reported at the kernel that caused it (the
//    equivalent of CUDA_LAUNCH_BLOCKING=1); without it a fault is still
//    attributed to the right op, because every op ends by copying its outputs
//    back, which waits for its kernels;
//  - `debug` (implies sync): device buffers of an op are padded with a canary
//    region that is checked after the op ("op X wrote past output N"), fresh
//    buffers are filled with NaN (0xFF bytes; -1 for int32) so that a read of
//    uninitialized memory shows up as NaN, and the error message carries the
//    last 64 launches and the live allocation map; and an output holding NaN
//    or Inf fails the op (it names where a NaN is born, or says that an
//    input already held one);
//  - index inputs are bounds-checked in every mode: embedding ids and expert
//    ids that are host tensors on the host before the launch (it is free);
//    expert ids still on the device (the router's output) by the routing
//    kernel, whose invalid pairs are left out and reported at the next wait
//    for the device (at once in `sync` and `checker`).
//
// This header has no CUDA types, so C++ code that does not use CUDA can
// include it. The backend touches the CUDA runtime only when it runs its
// first op: `dgemma doctor` constructs backends before it forks its checked
// child, and a process that initialized CUDA cannot use it after fork().
// Not thread-safe: one thread drives one backend.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace dgemma {

struct CudaBackendOptions {
  int device = 0;
  bool sync = false;
  bool debug = false;
  bool checker = false;  // per-op round trip, no device-resident activations
  // The dot mode (`--precision bf16-dot`, spec option "bf16-dot"): products
  // over bf16 weights (linear, experts) round their activations to bf16 and
  // run on the tensor cores with fp32 accumulation, as the CPU's dot mode
  // rounds them (CpuBackendOptions::bf16_dot). Off: pedantic fp32.
  bool bf16_dot = false;
  // The integer mode (`--precision int8-dot`, spec option "int8-dot", which
  // implies bf16-dot): linear and expert products over quantized weights
  // that the CPU's int8-dot takes (int8_dot_supported) run on int8
  // activation blocks on the integer tensor cores (int8_dot_kernels.cu),
  // bit-identical to the CPU's int8-dot; other weights as in bf16-dot.
  bool int8_dot = false;
  // Attention as two pedantic fp32 cuBLAS products around a softmax kernel
  // (spec option "cublas-attention"), over the keys gathered into one buffer,
  // instead of the flash kernel that reads the KV cache where it lies (the
  // default for head dims up to 512). For comparisons and benchmarks.
  bool cublas_attention = false;
  // Graphs (the default where ops do not wait: not sync, debug, checker or
  // while profiling): the ops between two host waits are captured into one
  // CUDA graph and launched at the wait; the next run of the same launches (a
  // step of the same shape) updates that graph with its arguments instead of
  // instantiating one (stream_graphs.h). Device buffers come from a block
  // cache and host inputs are staged in pinned memory. `eager` (spec option
  // "eager", like vLLM's --enforce-eager) launches every kernel directly.
  bool eager = false;
  // Test hooks for the fault guards (tests/cuda): kWritePastOutput launches a
  // deliberately bad kernel that writes one element past output 0 after the
  // op; kSkipKernels launches nothing, so outputs keep their initial contents
  // (NaN in debug mode).
  enum class TestFault { kNone, kWritePastOutput, kSkipKernels };
  TestFault test_fault = TestFault::kNone;
  // Upper bound on one temporary in floats (widened weight chunk, attention
  // scores, softmax probabilities): 64 Mi floats = 256 MiB, so that a
  // full-vocabulary soft embedding or a long prefill never needs gigabytes of
  // scratch. Tests make it small to run the chunked paths on small shapes.
  int64_t scratch_elems = int64_t(64) << 20;
};

// Parses "cuda", "cuda:sync", "cuda:debug", "cuda:checker", "cuda:eager", "cuda:bf16-dot", "cuda:int8-dot",
// "cuda:cublas-attention", "cuda:1", "cuda:1,sync,debug"
// (options after the colon, separated by ',' or ':'; a number is the device).
CudaBackendOptions parse_cuda_spec(const std::string& spec);

// What crossed between host and device (ops/backend.h), and the device time
// of one op (CudaBackend::take_profile).
using CudaTraffic = DeviceTraffic;
using CudaOpTime = OpDeviceTime;

// One kernel launch (or cuBLAS call) as kept in the launch log.
struct CudaLaunchRecord {
  uint64_t seq = 0;
  std::string op;      // "linear (self_attn.q_proj) in layer 2, decoder pass, step 1"
  std::string kernel;  // "attention.scores", "cublasGemmEx", ...
  unsigned grid[3] = {0, 0, 0};
  unsigned block = 0;
  std::vector<const void*> args;  // device pointers passed to the kernel
  std::string shapes;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(CudaBackendOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override;
  void run(const OpCall& call) override;
  // Refuses what run() would reject for want of an implementation: plain
  // weights of a dtype other than F32, BF16 and F16 (the CPU also reads F64
  // and FP8 ones), MLX affine weights whose scales are of another dtype, and
  // moe_experts routing a token to one expert twice (checked when the
  // indices are on the host; the device checks its own).
  bool supports(const OpCall& call, std::string* why = nullptr) const override;
  bool supports_device_outputs() const override { return !options_.checker; }

  const CudaBackendOptions& options() const { return options_; }
  // Maps a device address (e.g. from compute-sanitizer's report) to the
  // tensor that owns it: "output 0 of op linear (...)", "weight W", the canary
  // padding past a tensor, or a recently freed tensor.
  std::string describe_address(const void* device_ptr) const;
  // The last launches, oldest first (at most 64).
  std::vector<CudaLaunchRecord> recent_launches() const;
  std::string launch_log() const;
  // Bytes of weights resident on the device.
  int64_t cached_weight_bytes() const;
  CudaTraffic traffic() const;
  std::optional<DeviceTraffic> device_traffic() const override { return traffic(); }
  void reset_traffic() override;
  // Device time per op: while on, each op's launches are bracketed by CUDA
  // events (no extra waits); take_profile() waits for the device and returns
  // the ops run since profiling was switched on (or since the last take), in
  // order. Measured on the stream, so the times add up to the device's busy
  // time, not to the host's launch time.
  bool set_profiling(bool on) override;
  std::vector<CudaOpTime> take_profile() override;

 private:
  struct Impl;
  CudaBackendOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Number of CUDA devices, without initializing CUDA in this process (unless it
// already is): the count is taken in a short-lived child process, so that a
// later fork() (the doctor's) can still use CUDA. Never throws; 0 when there
// is no driver or no device. Cached after the first call.
int cuda_device_count();
bool cuda_device_available();
// The devices' properties (`dgemma devices`), taken by the same child
// process as the count (cudaGetDeviceProperties); the first 16 devices. A
// device whose properties could not be read has an empty name.
struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;       // total global memory
  int cc_major = 0, cc_minor = 0;  // compute capability
  int multiprocessors = 0;
};
std::vector<CudaDeviceInfo> cuda_devices();
// Why no device is available ("" when one is), for error messages.
std::string cuda_unavailable_reason();
// Whether this process has initialized CUDA (the backend ran an op).
bool cuda_initialized_in_this_process();

}  // namespace dgemma
