#pragma once
// One op on the device (docs/opencl.md §1): its inputs found where they are
// (a buffer of this device used in place, host data uploaded for the op), its
// weights from the cache, its outputs allocated and, when the op is done,
// attached to their tensors (left on the device when the call allows it,
// copied to the host otherwise), and kernel launches whose errors name the
// op. In the debug mode (ClRuntime::debug, docs/opencl.md §4) every buffer
// the op allocates has guard zones (cl_guard.h), fresh outputs and scratch
// hold NaN until a kernel writes them, and finish() checks the zones and the
// outputs for NaN and infinities.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/opencl/cl_guard.h"
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
  // Output k all zeros (an empty sum), when it has elements; timed like a launch.
  void zero_output(size_t k);

  // Attaches the outputs; waits for the device when `debug`. In the debug
  // mode, first checks every guard zone of the op's buffers and of its
  // inputs' (a kernel that wrote outside a buffer) and then the outputs (an
  // fp32 output holding NaN or an infinity); throws naming the op, the
  // buffer and the side.
  void finish(bool debug);

 private:
  // A buffer for this op only, guarded in the debug mode (`poison`: NaN-filled).
  cl_mem fresh(size_t bytes, bool poison, std::string label);
  void check_guards_or_throw();
  void check_finite_or_throw();

  void set_arg(cl_kernel k, const std::string& name, cl_uint index, size_t size, const void* value);
  void enqueue(cl_kernel k, const std::string& name, std::vector<size_t> global, std::vector<size_t> local);

  std::shared_ptr<ClRuntime> runtime_;
  WeightCache& weights_;
  const OpCall& call_;
  std::string where_;
  std::vector<cl_mem>
      uploads_;  // uploads and scratch buffers, released with the op (the driver keeps them while kernels read them)
  std::vector<cl_mem> outputs_;  // per output; null until allocated
  // Debug mode: the guarded buffers (their parents released with the op,
  // an output's with its tensor) and what each is ("output 0", "scratch 'x'").
  std::vector<std::pair<GuardedBuffer, std::string>> guarded_;
  std::vector<GuardedBuffer> output_guards_;
  // Profiling: the events of this op's launches, handed to the runtime by
  // finish() (released here if the op fails first).
  std::vector<cl_event> events_;
  cl_event* event_slot();
};

// The op kinds this backend runs (the others are not yet on OpenCL).
bool implemented_on_opencl(OpKind kind);
// Runs a prepared, supported call.
void run_op(ClOp& op);

}  // namespace dgemma::opencl
