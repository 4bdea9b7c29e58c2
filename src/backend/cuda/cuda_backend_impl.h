#pragma once
// Private to the CUDA backend (cuda_backend.cc, cuda_ops.cc): what outlives
// single ops on a device (CudaArena) and the backend's state (CudaBackend::Impl).
// Not a public header: nothing outside src/backend/cuda includes it.
#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/quant_upload.h"
#include "backend/cuda/stream_graphs.h"
#include "dgemma/error.h"
#include "quantize/integer_levels.h"
#include "quantize/quantized_weight.h"
#if DGEMMA_CUDA_EMULATION
#include "cuda_emulator/fake_cublas.h"
#endif

namespace dgemma {

namespace k = dgemma::cuda;

// The message for an invalid routing (moe_route_kernel status words from
// code on: code, entry, second entry, expert index); "" when valid.
std::string routing_error(const int32_t* st, int64_t K, int64_t E);

// Makes `device` current for a scope and restores the caller's device: the
// data of one backend may be touched while another device's backend runs an
// op (a pipeline stage reading the previous stage's output).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (saved_ != device)
      cudaSetDevice(device);
    else
      saved_ = -1;
  }
  ~DeviceScope() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = -1;
};

// What outlives single ops: the stream and memory pool, the traffic counters
// and the registry of device-resident tensors. Shared by the backend and
// every tensor it attached device data to, so that a tensor may outlive the
// backend (the model's workspace usually does).
struct CudaArena {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  CudaTraffic traffic;
  std::map<uintptr_t, std::pair<int64_t, std::string>> resident;  // start -> (bytes, what)
  // The first invalid expert routing of an op that nobody waited for:
  // {code, entry, entry, index, site} (moe_route_kernel), read with every copy
  // to the host; `sites` names the ops by site number.
  int32_t* sticky = nullptr;
  std::vector<std::string> sites;
  std::vector<int64_t> site_k, site_e;
  // The error recorded in a copy of `sticky` ("" when none), which is reset.
  std::string take_routing_error(const int32_t* st) {
    if (st[0] == 0) return "";
    cudaMemsetAsync(sticky, 0, 5 * sizeof(int32_t), stream);
    const size_t site = size_t(st[4]);
    const bool known = site < sites.size();
    return "op " + (known ? sites[site] : std::string("moe_experts")) + ": " +
           routing_error(st, known ? site_k[site] : 1, known ? site_e[site] : 0) +
           "\n  (found at the next wait for the device; the pairs were left out. Run with backend cuda:sync to "
           "stop at that op)";
  }
  int32_t site_id(const std::string& where, int64_t K, int64_t E) {
    for (size_t i = 0; i < sites.size(); ++i)
      if (sites[i] == where && site_k[i] == K && site_e[i] == E) return int32_t(i);
    sites.push_back(where);
    site_k.push_back(K);
    site_e.push_back(E);
    return int32_t(sites.size() - 1);
  }

  // Graph mode (CudaBackend::Impl::graphs_on): the ops between two waits are
  // captured into one graph (stream_graphs.h), device memory comes from the
  // block cache instead of the pool, and host inputs are staged in pinned
  // memory.
  bool graphs = false;
  k::StreamGraphs captured;
  k::DeviceBlockCache blocks;
  k::PinnedStaging staging;
  cudaEvent_t done = nullptr;  // recorded and waited for by wait()
  // Launches the captured work, if any: before every call that is not
  // stream work (a wait, an allocation, a copy to pageable memory).
  cudaError_t end_capture() {
    const int64_t launches = captured.launches(), made = captured.instantiations();
    const cudaError_t e = captured.end_and_launch(stream);
    traffic.graph_launches += captured.launches() - launches;
    traffic.graph_instantiations += captured.instantiations() - made;
    return e;
  }

  // Copies dev[0, bytes) to host memory that the caller reads only after the
  // next wait(). Graph mode: into pinned staging (inside the capture, if
  // any), copied out to `host` by the wait; else straight to `host`
  // (pageable: the call returns once the copy is done).
  struct CopyOut {
    const void* pinned;
    void* host;
    size_t bytes;
  };
  std::vector<CopyOut> copy_outs;
  cudaError_t copy_to_host(void* host, const void* dev, size_t bytes) {
    traffic.d2h_bytes += int64_t(bytes);
    if (!graphs) return cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream);
    void* slot = staging.reserve(bytes);
    if (!slot) {
      cudaError_t e = end_capture();
      if (e == cudaSuccess) e = staging.grow(bytes);
      if (e != cudaSuccess) return e;
      slot = staging.reserve(bytes);
    }
    captured.note("cudaMemcpyAsync (download)", nullptr, 0, bytes);
    const cudaError_t e = cudaMemcpyAsync(slot, dev, bytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) copy_outs.push_back({slot, host, bytes});
    return e;
  }

  // One wait for the stream (an event recorded after its work, waited for
  // with a blocking sync, so that the host thread sleeps meanwhile), counted;
  // then the staged outputs reach their host memory. With `routing`, the
  // status of unchecked routings comes along (20 bytes) and an invalid one
  // recorded there is returned in *bad (else "").
  cudaError_t wait(bool routing, std::string* bad) {
    int32_t st[5] = {0, 0, 0, 0, 0};
    const bool read = routing && sticky;
    cudaError_t e = read ? copy_to_host(st, sticky, sizeof st) : cudaSuccess;
    if (e == cudaSuccess) e = end_capture();
    if (e == cudaSuccess && !done) e = cudaEventCreateWithFlags(&done, cudaEventBlockingSync | cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(done, stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(done);
    ++traffic.synchronizations;
    if (e == cudaSuccess)
      for (const CopyOut& c : copy_outs) std::memcpy(c.host, c.pinned, c.bytes);
    copy_outs.clear();
    if (e == cudaSuccess) staging.recycle();
    if (e == cudaSuccess && read) *bad = take_routing_error(st);
    return e;
  }

  ~CudaArena() {
    if (!stream && !pool) return;
    DeviceScope on(device);
    captured.abandon(stream);
    if (stream) cudaStreamSynchronize(stream);
    if (done) cudaEventDestroy(done);
    blocks.release_kept();
    if (sticky) cudaFree(sticky);
    if (pool) cudaMemPoolDestroy(pool);
    if (stream) cudaStreamDestroy(stream);
    cudaGetLastError();
  }
  void release(void* p) {
    resident.erase(reinterpret_cast<uintptr_t>(p));
    if (blocks.give(p)) return;  // reused in stream order
    DeviceScope on(device);
    if (pool)
      cudaFreeAsync(p, stream);
    else
      cudaFree(p);
  }
};

// ---- the backend -----------------------------------------------------------

struct CudaBackend::Impl {
  struct Alloc {
    int64_t bytes = 0;   // logical size
    int64_t padded = 0;  // with canary
    std::string what;    // "output 0", "weight model.embed_tokens.weight", ...
    std::string op;      // the op that allocated it
  };
  struct OpBuffer {
    void* p = nullptr;
    int64_t bytes = 0;
    int64_t pad = 0;
  };
  struct CachedWeight {
    void* dev = nullptr;
    int64_t bytes = 0;
    DType dtype = DType::kF32;
    uint64_t fingerprint = 0;
  };
  // A quantized weight on the device: its packed buffers, the slice table and
  // the QView (quant_upload.h). Keyed by the QuantizedWeight, which the
  // entry keeps alive, so its address is never reused for other data.
  struct CachedQuant {
    std::shared_ptr<const QuantizedWeight> weight;
    std::vector<void*> buffers;  // the QView last
    int64_t bytes = 0;
  };

  explicit Impl(const CudaBackendOptions& o) : opt(o), arena(std::make_shared<CudaArena>()) {
    arena->device = o.device;
  }
  ~Impl();

  CudaBackendOptions opt;
  std::shared_ptr<CudaArena> arena;
  bool ready = false;
  std::string broken;  // first sticky error; the context is unusable after it
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;     // pedantic fp32 math
  cublasHandle_t blas_tc = nullptr;  // default math: bf16 inputs on the tensor cores
  // Both handles' workspace (they share the stream): cuBLAS would otherwise
  // allocate its default one inside a graph capture (CUDA 12.2+).
  void* blas_workspace = nullptr;
  cudaMemPool_t pool = nullptr;  // stream-ordered allocator (fast per-op buffers)

  std::unordered_map<const void*, CachedWeight> weights;
  std::unordered_map<const QuantizedWeight*, CachedQuant> quant_weights;
  int64_t weight_bytes = 0;
  std::map<uintptr_t, Alloc> live;  // device allocation map, by start address
  std::deque<std::pair<uintptr_t, Alloc>> freed;
  std::deque<CudaLaunchRecord> log;
  uint64_t seq = 0;

  // Inverse RoPE frequencies by (pairs, rotated width, theta): constants.
  std::map<std::tuple<int, int64_t, double>, void*> rope_freqs;

  // Profiling (set_profiling): events around each op, read by take_profile.
  struct TimedOp {
    OpKind kind;
    int layer;
    cudaEvent_t begin, end;
  };
  bool profiling = false;
  std::vector<TimedOp> timed;
  std::vector<cudaEvent_t> spare_events;
  cudaEvent_t event();
  std::vector<CudaOpTime> take_profile();

  // The op being run.
  const OpCall* call = nullptr;
  std::string where, shapes;
  std::vector<OpBuffer> bufs;
  std::vector<void*> pending;  // resident output buffers not yet attached to their tensor
  bool copied_out = false;     // an output was queued for copying to the host

  void ensure_ready();
  void run(const OpCall& c);
  void dispatch(const OpCall& c);
  void release_op_buffers();

  [[noreturn]] void fail(const std::string& why) const;
  void check(cudaError_t e, const char* what);
  void check_blas(cublasStatus_t s, const char* what);
  std::string log_text(size_t last) const;
  std::string alloc_map_text() const;
  std::string describe(uintptr_t a) const;

  void* device_alloc(int64_t bytes);
  // Graph mode: on where ops never wait for the device (not checker, sync,
  // debug or a test fault) unless `eager`; no capture while profiling.
  bool graphs_on() const {
    return !opt.eager && !opt.checker && !opt.sync && !opt.debug &&
           opt.test_fault == CudaBackendOptions::TestFault::kNone;
  }
  // Ends the capture in progress (launching it) before `what`, which is not
  // stream work.
  void outside_capture(const char* what) { check(arena->end_capture(), what); }
  // host[0, bytes) where a copy of the stream can read it until the next
  // wait: pinned staging in graph mode, else host itself.
  const void* staged(const void* host, int64_t bytes);
  void* alloc(int64_t bytes, const std::string& what, bool fresh_fill);
  void* upload(const Tensor& t, const std::string& what);
  void* input(const Tensor& t, const std::string& what);
  void sync_stream(const char* what);
  void* alloc_output(size_t k);
  void download(size_t k, const void* dev);
  void zero(void* p, int64_t bytes);
  void check_canaries();
  void check_finite(const OpCall& c) const;
  const void* weight(const WeightRef& w, k::WType* wt);
  const void* quant_weight(const WeightRef& w);
  // The integer mode (options int8_dot): whether W's products take the
  // integer path, activations x [M, K] quantized for it, and the (grouped)
  // product on it; dw is weight()'s device QView of W.
  bool int8_path(const WeightRef& W) const;
  // The dot mode over FP8 weights with a scale per channel (one slice): the
  // tensor-core product on bf16 activations, the codes widened in the tile;
  // the weight's device codes and per-row scales.
  bool fp8_path(const WeightRef& W) const;
  void fp8_gemm(const char* kernel, const uint16_t* a, int64_t K, const int32_t* starts, int64_t E, int64_t max_rows,
                const WeightRef& W, int64_t N, float* y);
  struct I8Acts {
    const int8_t* q = nullptr;
    const float *d = nullptr, *ds = nullptr;
    const int32_t* qsum = nullptr;
  };
  I8Acts quantize_i8(const float* x, int64_t M, int64_t K, const char* what);
  void i8_gemm(const char* kernel, const I8Acts& a, int64_t K, const int32_t* starts, int64_t E, int64_t max_rows,
               const WeightRef& W, const void* dw, int64_t N, float* y);
  void* upload_weight_bytes(const void* host, int64_t bytes, const std::string& what, CachedQuant& into);
  void record_launch(const char* kernel, std::initializer_list<const void*> args, const std::string& detail,
                     const k::LaunchShape* shape = nullptr);
  void launched(const char* kernel, const k::LaunchShape& s, std::initializer_list<const void*> args,
                const std::string& detail = "");
  // One cuBLAS product as cuBLAS sees it (column major), `batch` of them at
  // the given element strides. fp32 operands run in pedantic fp32 math; bf16
  // operands (A and B) on the tensor cores with fp32 accumulation. C is fp32.
  struct Gemm {
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    int64_t m = 0, n = 0, k = 0;
    float alpha = 1.0f, beta = 0.0f;
    const void* A = nullptr;
    int64_t lda = 0, stride_a = 0;
    const void* B = nullptr;
    int64_t ldb = 0, stride_b = 0;
    float* C = nullptr;
    int64_t ldc = 0, stride_c = 0;
    int64_t batch = 1;
    bool bf16 = false;
  };
  void gemm(const Gemm& g);
  uint16_t* to_bf16(const float* x, int64_t n, const char* what);

  void embedding(const OpCall& c);
  void soft_embedding(const OpCall& c);
  void rms_norm(const OpCall& c);
  void linear(const OpCall& c);
  int64_t chunk_rows(int64_t rows, int64_t K) const {
    return std::max<int64_t>(1, std::min(rows, opt.scratch_elems / std::max<int64_t>(K, 1)));
  }
  void rope(const OpCall& c);
  void attention(const OpCall& c);
  void attention_products(const OpCall& c, const k::FlashKeys (&segments)[2], const float* d_q, const int32_t* d_qpos,
                          const int32_t* d_blocks, float* out);
  void affine(const OpCall& c);
  void pool_cells(const OpCall& c);
  void scatter_rows(const OpCall& c);
  // An asynchronous device-to-device copy of `bytes`, logged and counted.
  void copy_device(void* dst, const void* src, int64_t bytes);
  void router_topk(const OpCall& c);
  void moe_experts(const OpCall& c);
  void elementwise(const OpCall& c);
  void concat_rows(const OpCall& c);
  void sample(const OpCall& c);
};

}  // namespace dgemma
