#pragma once
// One op on the device (docs/opencl.md §1): its inputs found where they are
// (a buffer of this device used in place, host data uploaded for the op), its
// weights from the cache, its outputs allocated and, when the op is done,
// attached to their tensors (left on the device when the call allows it,
// copied to the host otherwise), and kernel launches whose errors name the
// op.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/opencl/cl_runtime.h"
#include "backend/opencl/cl_weights.h"
#include "ops/op.h"

namespace dgemma::opencl {

// "linear (self_attn.q_proj) in layer 2, decoder pass, step 1".
std::string where_of(const OpCall& c);

class ClOp {
 public:
  ClOp(std::shared_ptr<ClRuntime> runtime, WeightCache& weights, const OpCall& call);
  ~ClOp();
  ClOp(const ClOp&) = delete;
  ClOp& operator=(const ClOp&) = delete;

  const OpCall& call() const { return call_; }
  const std::string& where() const { return where_; }
  ClRuntime& runtime() { return *runtime_; }

  // Input k's buffer (its element count must be > 0).
  cl_mem input(size_t k);
  // A buffer holding `bytes` (> 0) bytes of host data, for this op only.
  cl_mem upload(const void* data, size_t bytes, const std::string& what);
  // An uninitialized buffer of `bytes` (> 0) bytes for this op only (the
  // kernels' intermediate results), released with the op.
  cl_mem scratch(size_t bytes, const std::string& what);
  cl_mem weight(size_t k) { return weights_.get(*call_.w[k], where_); }
  // Weight k when quantized (w.quant set): its packed buffers on the device.
  const ClQuantWeight& quant_weight(size_t k) { return weights_.quant(*call_.w[k], where_); }
  // Output k's buffer (its element count must be > 0), attached by finish().
  cl_mem output(size_t k);

  // Launches `name` over `global` work-items (rounded up to whole groups of
  // `local`; local 0: the driver picks) with the arguments in order.
  template <typename... Args>
  void launch(const std::string& name, std::vector<size_t> global, std::vector<size_t> local, const Args&... args) {
    cl_kernel k = runtime_->kernel(name);
    cl_uint index = 0;
    (set_arg(k, name, index++, sizeof(Args), &args), ...);
    enqueue(k, name, std::move(global), std::move(local));
  }
  void copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes);

  // Attaches the outputs; waits for the device in the debug mode.
  void finish(bool debug);

 private:
  void set_arg(cl_kernel k, const std::string& name, cl_uint index, size_t size, const void* value);
  void enqueue(cl_kernel k, const std::string& name, std::vector<size_t> global, std::vector<size_t> local);

  std::shared_ptr<ClRuntime> runtime_;
  WeightCache& weights_;
  const OpCall& call_;
  std::string where_;
  std::vector<cl_mem>
      uploads_;  // uploads and scratch buffers, released with the op (the driver keeps them while kernels read them)
  std::vector<cl_mem> outputs_;  // per output; null until allocated
};

// The op kinds this backend runs (the others are not yet on OpenCL).
bool implemented_on_opencl(OpKind kind);
// Runs a prepared, supported call.
void run_op(ClOp& op);

}  // namespace dgemma::opencl
