// Host side of the CUDA backend: device setup, the weight cache, per-op
// buffers with fault guards, the launch log, cuBLAS, and the op dispatch.
// Compiled by the C++ compiler (not nvcc); the kernels are behind the plain
// launch functions of cuda_kernels.h.
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

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
namespace {

std::atomic<bool> g_cuda_initialized{false};

constexpr size_t kLaunchLogSize = 64;
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
constexpr size_t kFreedHistory = 256;
// Debug mode pads every op buffer with this many canary bytes, starting right
// at the logical end so that even an off-by-one store lands in it.
constexpr int64_t kCanaryBytes = 256;
constexpr unsigned char kCanaryByte = 0xA5;
// Fresh buffers in debug mode: 0xFF bytes read as NaN (fp32) and -1 (int32).
constexpr unsigned char kFreshByte = 0xFF;

std::string hex(const void* p) {
  char b[32];
  std::snprintf(b, sizeof b, "%p", p);
  return b;
}

std::string where_of(const OpCall& c) {
  std::string s(op_name(c.kind));
  if (!c.site.empty()) s += " (" + std::string(c.site) + ")";
  s += c.layer >= 0 ? " in layer " + std::to_string(c.layer) : std::string(" (model level)");
  s += ", " + std::string(pass_name(c.pass)) + " pass, step " + std::to_string(c.step);
  return s;
}

// Appends piece by piece: GCC 12 warns (-Wrestrict, a known false positive)
// on "literal" + std::string chains at -O3.
std::string shapes_of(const OpCall& c) {
  std::string s;
  auto tensor = [&s](const Tensor& t) {
    if (!s.empty()) s += ' ';
    s += t.shape_string();
    if (t.dtype == DType::kI32) s += "i32";
  };
  for (const Tensor* t : c.in) tensor(*t);
  for (const WeightRef* w : c.w) {
    if (!w) continue;
    s += ' ';
    s += w->name;
    s += shape_string(w->shape);
    s += dtype_name(w->dtype);
  }
  s += " ->";
  for (const Tensor* t : c.out) tensor(*t);
  return s;
}

// Errors after which the context is unusable (every later call fails too).
bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable: return true;
    default: return false;
  }
}

std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

// Cheap identity of a host weight buffer: FNV-1a over its size and up to 64
// evenly spaced 8-byte samples (all bytes when small). The cache is keyed by
// the host pointer; this catches a pointer reused for different data (a freed
// and reallocated buffer) at the cost of 64 reads per use.
uint64_t fingerprint(const void* data, int64_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](unsigned char b) { h = (h ^ b) * 1099511628211ull; };
  for (int s = 0; s < 8; ++s) mix(static_cast<unsigned char>(uint64_t(bytes) >> (8 * s)));
  if (bytes <= 4096) {
    for (int64_t i = 0; i < bytes; ++i) mix(p[i]);
    return h;
  }
  constexpr int64_t kSamples = 64;
  for (int64_t s = 0; s <= kSamples; ++s) {
    const int64_t off = std::min(bytes - 8, (bytes - 8) * s / kSamples);
    for (int64_t i = 0; i < 8; ++i) mix(p[off + i]);
  }
  return h;
}

k::WType wtype_of(const WeightRef& w, const std::string& where) {
  k::WType t;
  if (!k::float_wtype(w.dtype, &t))
    throw Error("cuda backend: op " + where + ": weight " + w.name + " has dtype " + std::string(dtype_name(w.dtype)) +
                ", which the CUDA backend cannot read (F32, BF16, F16)");
  return t;
}

// ---- cuBLAS, loaded on first use --------------------------------------------

// cuBLAS drags in cuBLASLt (about 600 MB of libraries): linked, it costs every
// process that links dgemma (each CLI call, each test) seconds of start-up and
// 200 MB of memory, GPU or not. So it is opened when a CUDA backend first
// runs, from the loader's search path or the toolkit's library folder.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  // Spelled out: C++ also sees an inline overload (legacy compute types).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;  // why it could not be loaded ("" when loaded)
};

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    CublasApi a;
#if DGEMMA_CUDA_EMULATION
    // The emulated device (DGEMMA_CUDA=EMULATE) has its own cuBLAS subset.
    a.create = &cuda_emu::cublas_create;
    a.destroy = &cuda_emu::cublas_destroy;
    a.set_stream = &cuda_emu::cublas_set_stream;
    a.set_math_mode = &cuda_emu::cublas_set_math_mode;
    a.set_workspace = &cuda_emu::cublas_set_workspace;
    a.gemm_ex = &cuda_emu::cublas_gemm_ex;
    a.gemm_strided_batched_ex = &cuda_emu::cublas_gemm_strided_batched_ex;
    a.status_name = &cuda_emu::cublas_status_name;
    a.status_string = &cuda_emu::cublas_status_string;
    return a;
#else
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::string tried;
    void* h = nullptr;
    for (const std::string& name : {soname, std::string(DGEMMA_CUDA_LIBRARY_DIR) + "/" + soname}) {
      if ((h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
      const char* e = dlerror();
      if (!tried.empty()) tried += "; ";
      tried += e ? e : name.c_str();
    }
    if (!h) {
      a.error = "cannot load " + soname + " (" + tried + ")";
      return a;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)> >(dlsym(h, name));
      if (!fn && a.error.empty()) a.error = soname + " has no symbol " + name;
    };
    sym(a.create, "cublasCreate_v2");
    sym(a.destroy, "cublasDestroy_v2");
    sym(a.set_stream, "cublasSetStream_v2");
    sym(a.set_math_mode, "cublasSetMathMode");
    sym(a.set_workspace, "cublasSetWorkspace_v2");
    sym(a.gemm_ex, "cublasGemmEx");
    sym(a.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
    sym(a.status_name, "cublasGetStatusName");
    sym(a.status_string, "cublasGetStatusString");
    return a;  // the library stays loaded for the life of the process
#endif
  }();
  return api;
}

// ---- device probe (no CUDA in this process) --------------------------------

struct ProbedDevice {
  char name[256] = {};
  uint64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0, multiprocessors = 0;
};

constexpr int kProbedDevices = 16;  // properties kept for the first 16 devices

struct DeviceProbe {
  int count = 0;
  char reason[240] = {};
  ProbedDevice devices[kProbedDevices];
};

DeviceProbe probe_in_process() {
  DeviceProbe p;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::snprintf(p.reason, sizeof p.reason, "cudaGetDeviceCount: %s", cuda_error_text(e).c_str());
    return p;
  }
  p.count = n;
  if (n == 0) std::snprintf(p.reason, sizeof p.reason, "cudaGetDeviceCount reported 0 devices");
  for (int k = 0; k < n && k < kProbedDevices; ++k) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, k) != cudaSuccess) {
      cudaGetLastError();
      continue;  // listed without properties
    }
    ProbedDevice& d = p.devices[k];
    std::snprintf(d.name, sizeof d.name, "%s", prop.name);
    d.memory_bytes = uint64_t(prop.totalGlobalMem);
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.multiprocessors = prop.multiProcessorCount;
  }
  return p;
}

// The CUDA runtime cannot be used in a child forked after the parent
// initialized it, and cudaGetDeviceCount initializes it. The doctor forks its
// checked run, so the device count is taken in a throwaway child instead.
DeviceProbe probe_in_child() {
  DeviceProbe p;
  int fds[2];
  if (pipe(fds) != 0) {
    std::snprintf(p.reason, sizeof p.reason, "device probe: pipe failed: %s", std::strerror(errno));
    return p;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    std::snprintf(p.reason, sizeof p.reason, "device probe: fork failed: %s", std::strerror(errno));
    return p;
  }
  if (pid == 0) {
    close(fds[0]);
    const DeviceProbe r = probe_in_process();
    const ssize_t w = write(fds[1], &r, sizeof r);
    _exit(w == ssize_t(sizeof r) ? 0 : 1);
  }
  close(fds[1]);
  char buf[sizeof(DeviceProbe)];
  size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t r = read(fds[0], buf + got, sizeof buf - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof buf) {
    std::snprintf(p.reason, sizeof p.reason, "the CUDA device probe process failed (status %d)", status);
    return p;
  }
  std::memcpy(&p, buf, sizeof p);
  p.reason[sizeof p.reason - 1] = '\0';
  return p;
}

const DeviceProbe& device_probe() {
  static const DeviceProbe probe = g_cuda_initialized.load() ? probe_in_process() : probe_in_child();
  return probe;
}

}  // namespace

int cuda_device_count() { return device_probe().count; }

std::vector<CudaDeviceInfo> cuda_devices() {
  const DeviceProbe& p = device_probe();
  std::vector<CudaDeviceInfo> out;
  for (int k = 0; k < p.count && k < kProbedDevices; ++k) {
    const ProbedDevice& d = p.devices[k];
    CudaDeviceInfo info;
    info.index = k;
    info.name = std::string(d.name, strnlen(d.name, sizeof d.name));
    info.memory_bytes = d.memory_bytes;
    info.cc_major = d.cc_major;
    info.cc_minor = d.cc_minor;
    info.multiprocessors = d.multiprocessors;
    out.push_back(std::move(info));
  }
  return out;
}
bool cuda_device_available() { return cuda_device_count() > 0; }
std::string cuda_unavailable_reason() { return cuda_device_available() ? "" : device_probe().reason; }
bool cuda_initialized_in_this_process() { return g_cuda_initialized.load(); }

CudaBackendOptions parse_cuda_spec(const std::string& spec) {
  CudaBackendOptions o;
  if (spec == "cuda") return o;
  if (spec.rfind("cuda:", 0) != 0) throw Error("backend '" + spec + "': not a CUDA backend name");
  std::string tok;
  const std::string rest = spec.substr(5) + ",";
  for (char ch : rest) {
    if (ch != ',' && ch != ':') {
      tok += ch;
      continue;
    }
    if (tok == "sync") {
      o.sync = true;
    } else if (tok == "checker") {
      o.checker = true;
    } else if (tok == "bf16-dot") {
      o.bf16_dot = true;
    } else if (tok == "int8-dot") {
      o.bf16_dot = o.int8_dot = true;
    } else if (tok == "cublas-attention") {
      o.cublas_attention = true;
    } else if (tok == "eager") {
      o.eager = true;
    } else if (tok == "debug") {
      o.debug = o.sync = o.checker = true;
    } else if (!tok.empty() && tok.size() <= 4 && tok.find_first_not_of("0123456789") == std::string::npos) {
      o.device = std::stoi(tok);
    } else {
      throw Error(
          "backend '" + spec + "': unknown CUDA option '" + tok +
          "' (expected sync, debug, checker, eager, bf16-dot, int8-dot, cublas-attention or a device number, e.g. "
          "cuda:1,sync)");
    }
    tok.clear();
  }
  return o;
}

// ---- device-resident tensors -------------------------------------------------

// The message for an invalid routing (moe_route_kernel status words from
// code on: code, entry, second entry, expert index); "" when valid.
std::string routing_error(const int32_t* st, int64_t K, int64_t E) {
  const int64_t KK = std::max<int64_t>(K, 1);
  if (st[0] == 1)
    return "expert index " + std::to_string(st[3]) + " at (" + std::to_string(st[1] / KK) + ", " +
           std::to_string(st[1] % KK) + ") is out of range [0, " + std::to_string(E) + ")";
  // The expert outputs of a token are combined once per expert, so a token
  // may route to an expert once (the router's top-k are distinct).
  if (st[0] == 2)
    return "token " + std::to_string(st[1] / KK) + " routes to expert " + std::to_string(st[3]) + " twice (top-k " +
           std::to_string(st[1] % KK) + " and " + std::to_string(st[2] % KK) +
           "): expert indices of a token must be distinct";
  return "";
}

// A tensor's data in device memory (core/tensor.h DeviceData). `from_host`:
// an upload of host data kept for reuse, valid while the host bytes equal
// `snapshot`; otherwise the output of an op, current by construction.
class CudaDeviceData final : public DeviceData {
 public:
  CudaDeviceData(std::shared_ptr<CudaArena> arena, void* p, int64_t bytes)
      : arena_(std::move(arena)), p_(p), bytes_(bytes) {}
  ~CudaDeviceData() override {
    if (p_) arena_->release(p_);
  }
  const void* owner() const override { return arena_.get(); }
  void copy_to_host(Tensor& t) const override {
    queue_copy_to_host(t);
    finish_copies();
  }
  void queue_copy_to_host(Tensor& t) const override {
    if (bytes_ == 0) return;
    void* dst = t.dtype == DType::kF32 ? static_cast<void*>(t.f.data()) : static_cast<void*>(t.i.data());
    DeviceScope on(arena_->device);
    const cudaError_t e = arena_->copy_to_host(dst, p_, size_t(bytes_));
    if (e != cudaSuccess) {
      arena_->copy_outs.clear();  // the tensors of the batch may go away with the exception
      fail_copy(e, t.shape_string());
    }
  }
  // One wait for the queued copies; the routing status comes along.
  void finish_copies() const override {
    DeviceScope on(arena_->device);
    std::string bad;
    const cudaError_t e = arena_->wait(true, &bad);
    if (e != cudaSuccess) fail_copy(e, "");
    if (!bad.empty()) throw Error("cuda backend: " + bad);
  }
  void* data() const { return p_; }
  int64_t bytes() const { return bytes_; }
  bool from_host = false;
  std::vector<unsigned char> snapshot;

 private:
  [[noreturn]] static void fail_copy(cudaError_t e, const std::string& shape) {
    cudaGetLastError();
    throw Error("cuda backend: copying a device-resident tensor " + shape + " to the host: " + cuda_error_text(e) +
                "\n  (kernels run asynchronously: a fault of an earlier op can surface here; use backend cuda:sync "
                "to stop at the faulting launch, or cuda:debug)");
  }
  std::shared_ptr<CudaArena> arena_;
  void* p_;
  int64_t bytes_;
};

// Host inputs up to this size are uploaded once and reused (positions, ids).
constexpr int64_t kCachedUploadBytes = 64 << 10;

const void* host_bytes(const Tensor& t) {
  return t.dtype == DType::kF32 ? static_cast<const void*>(t.f.data()) : static_cast<const void*>(t.i.data());
}

CudaBackend::Impl::~Impl() {
  if (!stream && !blas && !pool) return;  // CUDA never initialized by this backend (the arena owns stream and pool)
  // Best effort: after a sticky error every call fails, and a destructor must
  // not throw. The process exit reclaims the device memory in any case.
  cudaSetDevice(opt.device);
  // Captured work is launched: tensors may outlive the backend and read it.
  if (broken.empty() && arena->end_capture() == cudaSuccess) cudaStreamSynchronize(stream);
  for (auto& [host, w] : weights) cudaFree(w.dev);
  for (auto& [q, c] : quant_weights)
    for (void* p : c.buffers) cudaFree(p);
  for (auto& [key, p] : rope_freqs) cudaFree(p);
  for (const TimedOp& t : timed) spare_events.insert(spare_events.end(), {t.begin, t.end});
  for (cudaEvent_t e : spare_events) cudaEventDestroy(e);
  if (blas) cublas_api().destroy(blas);
  if (blas_tc) cublas_api().destroy(blas_tc);
  if (blas_workspace) cudaFree(blas_workspace);
  cudaGetLastError();
}

void CudaBackend::Impl::ensure_ready() {
  if (ready) {
    check(cudaSetDevice(opt.device), "cudaSetDevice");
    return;
  }
  g_cuda_initialized = true;
#if DGEMMA_CUDA_EMULATION
  static bool told = false;
  if (!told) {
    told = true;
    std::fprintf(stderr,
                 "dgemma: CUDA backend on the emulated device of this build (DGEMMA_CUDA=EMULATE): the kernels run "
                 "on the CPU, for testing\n");
  }
#endif
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    fail("no CUDA device found (" + (e != cudaSuccess ? "cudaGetDeviceCount: " + cuda_error_text(e) : "0 devices") +
         ")");
  }
  if (opt.device < 0 || opt.device >= count)
    fail("CUDA device " + std::to_string(opt.device) + " does not exist (" + std::to_string(count) + " present)");
  check(cudaSetDevice(opt.device), "cudaSetDevice");
  const CublasApi& api = cublas_api();
  if (!api.error.empty()) fail("cuBLAS is not available: " + api.error);
  // Each step is skipped if an earlier, partly failed initialization did it.
  if (!stream) check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  arena->stream = stream;
  if (!blas) check_blas(api.create(&blas), "cublasCreate");
  check_blas(api.set_stream(blas, stream), "cublasSetStream");
  // Plain fp32 products: no TF32 or other reduced-precision shortcuts, so that
  // results stay within fp32 rounding of the CPU reference.
  check_blas(api.set_math_mode(blas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  // The bf16 products (bf16_dot, bf16 soft embedding): tensor cores allowed.
  if (!blas_tc) check_blas(api.create(&blas_tc), "cublasCreate");
  check_blas(api.set_stream(blas_tc, stream), "cublasSetStream");
  check_blas(api.set_math_mode(blas_tc, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  // After cublasSetStream, which resets it: 32 MiB, what cuBLAS documents
  // for Hopper.
  if (!blas_workspace) check(cudaMalloc(&blas_workspace, kCublasWorkspaceBytes), "cudaMalloc (cuBLAS workspace)");
  for (cublasHandle_t h : {blas, blas_tc})
    check_blas(api.set_workspace(h, blas_workspace, kCublasWorkspaceBytes), "cublasSetWorkspace");
  int pools = 0;
  check(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, opt.device), "cudaDeviceGetAttribute");
  if (pools && !pool) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = opt.device;
    check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    // Keep freed memory in the pool across synchronizations (the default
    // threshold 0 would hand it back to the driver after every op).
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  }
  arena->pool = pool;
  arena->graphs = graphs_on();
  if (!arena->sticky) {
    void* p = nullptr;
    check(cudaMalloc(&p, 5 * sizeof(int32_t)), "cudaMalloc (routing status)");
    arena->sticky = static_cast<int32_t*>(p);
    check(cudaMemsetAsync(p, 0, 5 * sizeof(int32_t), stream), "cudaMemsetAsync (routing status)");
  }
  ready = true;
}

void CudaBackend::Impl::fail(const std::string& why) const { throw Error("cuda backend: op " + where + ": " + why); }

void CudaBackend::Impl::check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that the next op can run
  std::string msg = std::string(what) + ": " + cuda_error_text(e);
  if (is_sticky(e)) {
    if (broken.empty()) broken = "op " + where + ", " + msg;
    if (!opt.sync)
      msg +=
          "\n  (errors of kernels are reported asynchronously: the culprit is a kernel of this op, not "
          "necessarily this one; use backend cuda:sync to stop at the faulting launch)";
  }
  msg += "\n  op shapes: " + shapes;
  msg += "\n" + log_text(opt.debug ? kLaunchLogSize : 4);
  if (opt.debug) msg += alloc_map_text();
  fail(msg);
}

void CudaBackend::Impl::check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::string msg = std::string(what) + ": " + cublas_api().status_name(s) + " (" + cublas_api().status_string(s) + ")";
  msg += "\n  op shapes: " + shapes;
  msg += "\n" + log_text(opt.debug ? kLaunchLogSize : 4);
  fail(msg);
}

std::string CudaBackend::Impl::log_text(size_t last) const {
  std::string s = "  last launches (oldest first):\n";
  const size_t from = log.size() > last ? log.size() - last : 0;
  for (size_t i = from; i < log.size(); ++i) {
    const CudaLaunchRecord& r = log[i];
    char head[160];
    std::snprintf(head, sizeof head, "    #%llu %s grid (%u,%u,%u) block %u", (unsigned long long)r.seq,
                  r.kernel.c_str(), r.grid[0], r.grid[1], r.grid[2], r.block);
    s += head;
    s += " op ";
    s += r.op;
    s += " [";
    s += r.shapes;
    s += "] args";
    for (const void* a : r.args) {
      s += ' ';
      s += hex(a);
    }
    s += '\n';
  }
  return s;
}

std::string CudaBackend::Impl::alloc_map_text() const {
  std::string s = "  live device allocations:\n";
  size_t nweights = 0;
  for (const auto& [begin, a] : live) {
    if (a.what.rfind("weight ", 0) == 0) {
      ++nweights;
      continue;
    }
    s += "    " + hex(reinterpret_cast<void*>(begin)) + " .. " +
         hex(reinterpret_cast<void*>(begin + uintptr_t(a.bytes))) + " (" + std::to_string(a.bytes) + " bytes + " +
         std::to_string(a.padded - a.bytes) + " canary) " + a.what + " of op " + a.op + "\n";
  }
  s += "    and " + std::to_string(nweights) + " cached weights (" + std::to_string(weight_bytes) +
       " bytes; CudaBackend::describe_address names them)\n";
  return s;
}

std::string CudaBackend::Impl::describe(uintptr_t a) const {
  auto owner = [](const Alloc& al) { return al.what + (al.op.empty() ? "" : " of op " + al.op); };
  auto it = live.upper_bound(a);
  if (it != live.begin()) {
    --it;
    const uintptr_t b = it->first;
    const Alloc& al = it->second;
    if (a < b + uintptr_t(al.bytes))
      return "byte " + std::to_string(a - b) + " of " + std::to_string(al.bytes) + " of " + owner(al);
    if (a < b + uintptr_t(al.padded))
      return "canary padding, byte " + std::to_string(a - b - uintptr_t(al.bytes)) + " past the end of " + owner(al) +
             " (an out-of-bounds access)";
  }
  auto r = arena->resident.upper_bound(a);
  if (r != arena->resident.begin()) {
    --r;
    if (a < r->first + uintptr_t(r->second.first))
      return "byte " + std::to_string(a - r->first) + " of " + std::to_string(r->second.first) + " of " +
             r->second.second + " (device-resident)";
  }
  for (auto f = freed.rbegin(); f != freed.rend(); ++f)
    if (a >= f->first && a < f->first + uintptr_t(std::max<int64_t>(f->second.padded, 1)))
      return "freed memory: byte " + std::to_string(a - f->first) + " of " + owner(f->second) +
             " (freed after that op; a use after free if accessed later)";
  return "address " + hex(reinterpret_cast<void*>(a)) + " is not a known allocation of this CUDA backend";
}

// Graph mode: from the block cache (no CUDA call inside a capture); a new
// block ends the capture first, and an exhausted device gives the kept blocks
// back. Else stream-ordered from the pool when the device has pools, else
// plain.
void* CudaBackend::Impl::device_alloc(int64_t bytes) {
  void* p = nullptr;
  if (arena->graphs) {
    if ((p = arena->blocks.take(size_t(bytes)))) return p;
    outside_capture("cudaMalloc (new device block)");
    const size_t size = k::DeviceBlockCache::rounded(size_t(bytes));
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation && arena->blocks.kept_bytes() > 0) {
      cudaGetLastError();
      sync_stream("cudaStreamSynchronize (before returning kept device blocks)");
      arena->blocks.release_kept();
      e = cudaMalloc(&p, size);
    }
    check(e, "cudaMalloc");
    arena->blocks.adopt(p, size_t(bytes));
    return p;
  }
  if (pool)
    check(cudaMallocFromPoolAsync(&p, size_t(bytes), pool, stream), "cudaMallocFromPoolAsync");
  else
    check(cudaMalloc(&p, size_t(bytes)), "cudaMalloc");
  return p;
}

void* CudaBackend::Impl::alloc(int64_t bytes, const std::string& what, bool fresh_fill) {
  const int64_t pad = opt.debug ? kCanaryBytes : 0;
  if (bytes + pad == 0) return nullptr;
  void* p = device_alloc(bytes + pad);
  bufs.push_back({p, bytes, pad});
  live[reinterpret_cast<uintptr_t>(p)] = Alloc{bytes, bytes + pad, what, where};
  if (opt.debug) {
    if (fresh_fill && bytes > 0)
      check(cudaMemsetAsync(p, kFreshByte, size_t(bytes), stream), "cudaMemsetAsync (NaN fill)");
    check(cudaMemsetAsync(static_cast<char*>(p) + bytes, kCanaryByte, size_t(pad), stream), "cudaMemsetAsync (canary)");
  }
  return p;
}

void CudaBackend::Impl::release_op_buffers() {
  for (const OpBuffer& b : bufs) {
    const auto a = reinterpret_cast<uintptr_t>(b.p);
    auto it = live.find(a);
    if (it != live.end()) {
      freed.emplace_back(a, std::move(it->second));
      if (freed.size() > kFreedHistory) freed.pop_front();
      live.erase(it);
    }
    // Stream-ordered: safe even if a kernel of this op is still running (an
    // exception in the middle of an op). Errors are moot here.
    if (arena->blocks.give(b.p)) continue;
    if (pool)
      cudaFreeAsync(b.p, stream);
    else
      cudaFree(b.p);
  }
  bufs.clear();
  for (void* p : pending) arena->release(p);  // an op that failed before attaching its outputs
  pending.clear();
}

void* CudaBackend::Impl::upload(const Tensor& t, const std::string& what) {
  const int64_t n = t.numel();
  const bool f32 = t.dtype == DType::kF32;
  if (int64_t(f32 ? t.f.size() : t.i.size()) < n)
    fail(what + " storage holds fewer elements than its shape " + t.shape_string());
  void* p = alloc(n * 4, what, false);
  if (n > 0)
    check(cudaMemcpyAsync(p, staged(host_bytes(t), n * 4), size_t(n) * 4, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (upload)");
  arena->traffic.h2d_bytes += n * 4;
  return p;
}

const void* CudaBackend::Impl::staged(const void* host, int64_t bytes) {
  arena->captured.note("cudaMemcpyAsync (upload)", nullptr, 0, uint64_t(bytes));
  if (!arena->graphs) return host;
  if (const void* p = arena->staging.stage(host, size_t(bytes))) return p;
  outside_capture("cudaHostAlloc (pinned staging)");
  check(arena->staging.grow(size_t(bytes)), "cudaHostAlloc (pinned staging)");
  return arena->staging.stage(host, size_t(bytes));
}

// An op's input on the device: its device data when this backend holds it
// (no copy), else the host data uploaded. In the checker mode every input is
// uploaded from the host for every op (today's per-op round trip).
void* CudaBackend::Impl::input(const Tensor& t, const std::string& what) {
  const int64_t bytes = t.numel() * 4;
  if (!opt.checker && t.device && t.device->owner() == arena.get()) {
    const auto& d = static_cast<const CudaDeviceData&>(*t.device);
    if (d.bytes() != bytes)
      fail(what + ": its device data holds " + std::to_string(d.bytes()) + " bytes, its shape " + t.shape_string() +
           " needs " + std::to_string(bytes));
    if (!d.from_host || (!t.host_stale && std::memcmp(d.snapshot.data(), host_bytes(t), size_t(bytes)) == 0))
      return d.data();
  }
  t.ensure_host();  // device data of another backend (or device) comes through the host
  if (opt.checker || bytes == 0 || bytes > kCachedUploadBytes) return upload(t, what);
  if (int64_t(t.dtype == DType::kF32 ? t.f.size() : t.i.size()) * 4 < bytes)
    fail(what + " storage holds fewer elements than its shape " + t.shape_string());
  void* p = device_alloc(bytes);
  auto data = std::make_shared<CudaDeviceData>(arena, p, bytes);
  arena->resident[reinterpret_cast<uintptr_t>(p)] = {bytes, what + " of op " + where + " (upload kept for reuse)"};
  const auto* h = static_cast<const unsigned char*>(host_bytes(t));
  data->from_host = true;
  data->snapshot.assign(h, h + bytes);
  // From the snapshot, which lives as long as the device copy (or its pinned
  // stage): the async copy may still be reading when the caller changes its
  // host data.
  check(cudaMemcpyAsync(p, staged(data->snapshot.data(), bytes), size_t(bytes), cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync (upload)");
  arena->traffic.h2d_bytes += bytes;
  t.device = std::move(data);
  return p;
}

void CudaBackend::Impl::sync_stream(const char* what) {
  std::string none;
  check(arena->wait(false, &none), what);
}

void* CudaBackend::Impl::alloc_output(size_t k) {
  const std::string what = "output " + std::to_string(k);
  if (opt.checker) return alloc(call->out[k]->numel() * 4, what, true);
  // Resident: outlives the op, attached to the tensor by download().
  const int64_t bytes = call->out[k]->numel() * 4;
  if (bytes == 0) return nullptr;
  void* p = device_alloc(bytes);
  pending.push_back(p);
  arena->resident[reinterpret_cast<uintptr_t>(p)] = {bytes, what + " of op " + where};
  return p;
}

// Finishes output k: in the resident mode its buffer becomes the tensor's
// device data, copied to the host only when the call does not take device
// outputs; in the checker mode it is copied back (and freed with the op).
void CudaBackend::Impl::download(size_t k, const void* dev) {
  Tensor& t = *call->out[k];
  const int64_t n = t.numel();
  const bool f32 = t.dtype == DType::kF32;
  if (int64_t(f32 ? t.f.size() : t.i.size()) < n)
    fail("output " + std::to_string(k) + " storage holds fewer elements than its shape " + t.shape_string());
  if (!opt.checker) {
    auto it = std::find(pending.begin(), pending.end(), dev);
    if (it != pending.end()) pending.erase(it);
    t.device = std::make_shared<CudaDeviceData>(arena, const_cast<void*>(dev), n * 4);
    t.host_stale = call->device_outputs && n > 0;
    if (t.host_stale) return;
  }
  if (n == 0) return;
  void* dst = f32 ? static_cast<void*>(t.f.data()) : static_cast<void*>(t.i.data());
  check(arena->copy_to_host(dst, dev, size_t(n) * 4), "cudaMemcpyAsync (download)");
  copied_out = true;
}

void CudaBackend::Impl::zero(void* p, int64_t bytes) {
  if (bytes > 0) check(cudaMemsetAsync(p, 0, size_t(bytes), stream), "cudaMemsetAsync (zero)");
}

void CudaBackend::Impl::check_canaries() {
  std::vector<unsigned char> host(static_cast<size_t>(kCanaryBytes));
  for (const OpBuffer& b : bufs) {
    if (b.pad == 0) continue;
    check(cudaMemcpyAsync(host.data(), static_cast<const char*>(b.p) + b.bytes, size_t(b.pad), cudaMemcpyDeviceToHost,
                          stream),
          "cudaMemcpyAsync (canary check)");
    arena->traffic.d2h_bytes += b.pad;
    sync_stream("cudaStreamSynchronize (canary check)");
    for (int64_t i = 0; i < b.pad; ++i) {
      if (host[size_t(i)] == kCanaryByte) continue;
      const Alloc& a = live.at(reinterpret_cast<uintptr_t>(b.p));
      fail("wrote past " + a.what + " (canary overwritten " + std::to_string(i) + " bytes past its end at " +
           hex(static_cast<const char*>(b.p) + b.bytes + i) + ")\n  op shapes: " + shapes + "\n" +
           log_text(kLaunchLogSize) + alloc_map_text());
    }
  }
}

const void* CudaBackend::Impl::weight(const WeightRef& w, k::WType* wt) {
  // A quantized weight's `data` is not an array of its logical dtype (unless
  // the binder gave it a dense copy: quantize/resolve.h).
  if (w.quant && !w.quant->bound_dense) {
    *wt = k::WType::kQuant;
    return quant_weight(w);
  }
  *wt = wtype_of(w, where);
  const int64_t bytes = w.numel() * dtype_bits(w.dtype) / 8;
  const uint64_t fp = fingerprint(w.data, bytes);
  auto it = weights.find(w.data);
  if (it != weights.end()) {
    const CachedWeight& c = it->second;
    if (c.bytes == bytes && c.dtype == w.dtype && c.fingerprint == fp) return c.dev;
    // The host pointer now holds different data: replace the stale copy. Ops
    // end synchronized, so no earlier kernel still reads it.
    sync_stream("cudaStreamSynchronize (weight replacement)");
    live.erase(reinterpret_cast<uintptr_t>(c.dev));
    weight_bytes -= c.bytes;
    cudaFree(c.dev);
    weights.erase(it);
  }
  CachedWeight c{nullptr, bytes, w.dtype, fp};
  if (bytes > 0) {
    outside_capture("cudaMalloc (weight)");
    check(cudaMalloc(&c.dev, size_t(bytes)), "cudaMalloc (weight)");
    // On the op stream and waited for: a plain cudaMemcpy from pageable memory
    // may return before its DMA lands, and this non-blocking stream is not
    // ordered after the legacy stream it would use.
    cudaError_t e = cudaMemcpyAsync(c.dev, w.data, size_t(bytes), cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    arena->traffic.weight_h2d_bytes += bytes;
    if (e != cudaSuccess) {
      cudaFree(c.dev);
      check(e, "cudaMemcpyAsync (weight upload)");
    }
    live[reinterpret_cast<uintptr_t>(c.dev)] = Alloc{bytes, bytes, "weight " + w.name, ""};
  }
  weight_bytes += bytes;
  weights.emplace(w.data, c);
  return c.dev;
}

void* CudaBackend::Impl::upload_weight_bytes(const void* host, int64_t bytes, const std::string& what,
                                             CachedQuant& into) {
  if (bytes <= 0) return nullptr;
  void* dev = nullptr;
  outside_capture("cudaMalloc (quantized weight)");
  check(cudaMalloc(&dev, size_t(bytes)), "cudaMalloc (quantized weight)");
  into.buffers.push_back(dev);  // freed with the entry, also when the copy fails
  check(cudaMemcpyAsync(dev, host, size_t(bytes), cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync (quantized weight upload)");
  live[reinterpret_cast<uintptr_t>(dev)] = Alloc{bytes, bytes, what, ""};
  arena->traffic.weight_h2d_bytes += bytes;
  into.bytes += bytes;
  weight_bytes += bytes;
  return dev;
}

// Uploads the packed buffers of a quantized weight once (they stay quantized
// on the device), then its slice table and view; returns the device QView.
const void* CudaBackend::Impl::quant_weight(const WeightRef& w) {
  auto it = quant_weights.find(w.quant.get());
  if (it != quant_weights.end()) return it->second.buffers.back();
  k::QuantUpload up = k::plan_quant_upload(*w.quant, w.name);
  CachedQuant& c = quant_weights[w.quant.get()];
  c.weight = w.quant;
  try {
    std::vector<void*> dev;
    for (const k::QuantUpload::Buffer& b : up.buffers)
      dev.push_back(upload_weight_bytes(b.host, b.bytes, "weight " + w.name + " (" + b.what + ")", c));
    up.bind(dev);
    up.view.slices = static_cast<const k::QSlice*>(upload_weight_bytes(
        up.slices.data(), int64_t(up.slices.size() * sizeof(k::QSlice)), "weight " + w.name + " (slice table)", c));
    upload_weight_bytes(&up.view, sizeof(k::QView), "weight " + w.name + " (quantized view)", c);
    // The view and slice table are locals: wait for their copies (and the
    // codes', see weight()) before they go.
    sync_stream("cudaStreamSynchronize (quantized weight upload)");
  } catch (...) {
    for (void* p : c.buffers) {
      live.erase(reinterpret_cast<uintptr_t>(p));
      cudaFree(p);
    }
    weight_bytes -= c.bytes;
    quant_weights.erase(w.quant.get());
    throw;
  }
  return c.buffers.back();
}

// Keeps a launch (kernel, cuBLAS call or device copy) in the launch log and
// counts it.
void CudaBackend::Impl::record_launch(const char* kernel, std::initializer_list<const void*> args,
                                      const std::string& detail, const k::LaunchShape* shape) {
  CudaLaunchRecord r;
  r.seq = ++seq;
  r.op = where;
  r.kernel = kernel;
  if (shape) {
    std::copy(shape->grid, shape->grid + 3, r.grid);
    r.block = shape->block;
  }
  r.args.assign(args.begin(), args.end());
  r.shapes = detail.empty() ? shapes : shapes + "; " + detail;
  arena->captured.note(kernel, shape ? shape->grid : nullptr, shape ? shape->block : 0, 0);
  log.push_back(std::move(r));
  if (log.size() > kLaunchLogSize) log.pop_front();
  ++arena->traffic.kernel_launches;
}

void CudaBackend::Impl::copy_device(void* dst, const void* src, int64_t bytes) {
  record_launch("cudaMemcpyAsync (device to device)", {src, dst}, "");
  check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync (device to device)");
}

void CudaBackend::Impl::launched(const char* kernel, const k::LaunchShape& s, std::initializer_list<const void*> args,
                                 const std::string& detail) {
  if (!s.launched) {
    if (s.grid[0] != 0 && s.grid[1] != 0)
      fail(std::string(kernel) + ": grid (" + std::to_string(s.grid[0]) + ", " + std::to_string(s.grid[1]) +
           ") exceeds the device's limits\n  op shapes: " + shapes);
    return;  // empty grid: nothing to do
  }
  record_launch(kernel, args, detail, &s);
  check(cudaGetLastError(), kernel);
  if (opt.sync) sync_stream(kernel);
}

// Row-major products map onto column-major cuBLAS by transposing the whole
// product (see linear, soft_embedding and attention).
void CudaBackend::Impl::gemm(const Gemm& g) {
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch})
    if (v > INT_MAX) fail("matrix dimension " + std::to_string(v) + " exceeds cuBLAS's int range");
  const bool batched = g.batch > 1;
  const char* name = batched ? "cublasGemmStridedBatchedEx" : "cublasGemmEx";
  record_launch(name, {g.A, g.B, g.C},
                "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
                    (batched ? " batch=" + std::to_string(g.batch) : std::string()) + (g.bf16 ? " bf16" : " fp32"));
  const cudaDataType in = g.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasHandle_t h = g.bf16 ? blas_tc : blas;
  const CublasApi& api = cublas_api();
  if (batched)
    check_blas(
        api.gemm_strided_batched_ex(h, g.ta, g.tb, int(g.m), int(g.n), int(g.k), &g.alpha, g.A, in, int(g.lda),
                                    g.stride_a, g.B, in, int(g.ldb), g.stride_b, &g.beta, g.C, CUDA_R_32F, int(g.ldc),
                                    g.stride_c, int(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        name);
  else
    check_blas(api.gemm_ex(h, g.ta, g.tb, int(g.m), int(g.n), int(g.k), &g.alpha, g.A, in, int(g.lda), g.B, in,
                           int(g.ldb), &g.beta, g.C, CUDA_R_32F, int(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               name);
  check(cudaGetLastError(), name);
  if (opt.sync) sync_stream(name);
}

// x rounded to bf16 in a workspace of the op (the dot mode's GEMM inputs).
uint16_t* CudaBackend::Impl::to_bf16(const float* x, int64_t n, const char* what) {
  auto* out = static_cast<uint16_t*>(alloc(n * 2, what, true));
  launched("to_bf16", k::launch_to_bf16(stream, x, n, out), {x, out});
  return out;
}

void CudaBackend::Impl::dispatch(const OpCall& c) {
  switch (c.kind) {
    case OpKind::kEmbedding: return embedding(c);
    case OpKind::kSoftEmbedding: return soft_embedding(c);
    case OpKind::kRmsNorm: return rms_norm(c);
    case OpKind::kLinear: return linear(c);
    case OpKind::kRope: return rope(c);
    case OpKind::kAttention: return attention(c);
    case OpKind::kRouterTopk: return router_topk(c);
    case OpKind::kMoeExperts: return moe_experts(c);
    case OpKind::kGeluGlu:
    case OpKind::kAdd:
    case OpKind::kScale:
    case OpKind::kSoftcap: return elementwise(c);
    case OpKind::kConcatRows: return concat_rows(c);
    case OpKind::kSample: return sample(c);
    case OpKind::kAffine: return affine(c);
    case OpKind::kPoolCells: return pool_cells(c);
    case OpKind::kScatterRows: return scatter_rows(c);
  }
  fail("internal: unknown op kind " + std::to_string(int(c.kind)));
}

// Each op ends by queueing the copies of its outputs to the host; the
// synchronization below waits for them and surfaces asynchronous faults of
// this op's kernels here, before the next op runs. The canary check follows:
// when it fails the op throws, and the outputs it already copied are void.
void CudaBackend::Impl::run(const OpCall& c) {
  call = &c;
  where = where_of(c);
  shapes = shapes_of(c);
  if (!broken.empty())
    fail("the CUDA context is unusable after an earlier fault (" + broken + "); restart the process");
  ensure_ready();
  if (arena->graphs && !profiling) check(arena->captured.begin(stream), "cudaStreamBeginCapture");
  struct Release {
    Impl* self;
    ~Release() {
      // An op that throws: its outputs may go away with the exception, so
      // their staged copies are not copied out at the next wait.
      if (std::uncaught_exceptions() > 0) self->arena->copy_outs.clear();
      self->release_op_buffers();
    }
  } release{this};
  if (opt.test_fault == CudaBackendOptions::TestFault::kSkipKernels) {
    for (size_t k = 0; k < c.out.size(); ++k) download(k, alloc_output(k));
  } else {
    cudaEvent_t begin = nullptr;
    if (profiling) {
      outside_capture("cudaEventRecord (profile)");
      begin = event();
      check(cudaEventRecord(begin, stream), "cudaEventRecord");
    }
    // Hook for tests of the canary guard: write one element past output 0
    // with a real kernel, before the outputs are copied back.
    if (opt.test_fault == CudaBackendOptions::TestFault::kWritePastOutput) {
      const size_t first = bufs.size();
      dispatch(c);
      // Output 0 is the first buffer allocated with the name "output 0".
      for (size_t b = first; b < bufs.size(); ++b) {
        const Alloc& a = live.at(reinterpret_cast<uintptr_t>(bufs[b].p));
        if (a.what != "output 0") continue;
        auto* p = static_cast<float*>(bufs[b].p);
        launched("test.write_past_output", k::launch_write_at(stream, p, bufs[b].bytes / 4, 1.0f), {p});
        break;
      }
    } else {
      dispatch(c);
    }
    if (profiling) {
      cudaEvent_t end = event();
      check(cudaEventRecord(end, stream), "cudaEventRecord");
      timed.push_back({c.kind, c.layer, begin, end});
    }
  }
  // Outputs queued for the host are waited for (and asynchronous faults of
  // this op surface here); outputs that stay on the device are not.
  if (copied_out || opt.checker || opt.sync) {
    // A wait anyway: the routing status of unchecked ops comes along.
    std::string bad;
    check(arena->wait(copied_out && !opt.checker && !opt.sync, &bad), "cudaStreamSynchronize (end of op)");
    if (!bad.empty()) throw Error("cuda backend: " + bad);
  }
  copied_out = false;
  if (opt.debug) {
    check_canaries();
    check_finite(c);
  }
}

cudaEvent_t CudaBackend::Impl::event() {
  if (!spare_events.empty()) {
    cudaEvent_t e = spare_events.back();
    spare_events.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}

std::vector<CudaOpTime> CudaBackend::Impl::take_profile() {
  std::vector<CudaOpTime> out;
  if (timed.empty()) return out;
  DeviceScope on(opt.device);
  outside_capture("cudaEventSynchronize (profile)");
  check(cudaEventSynchronize(timed.back().end), "cudaEventSynchronize (profile)");
  ++arena->traffic.synchronizations;
  for (const TimedOp& t : timed) {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, t.begin, t.end), "cudaEventElapsedTime");
    out.push_back({t.kind, t.layer, double(ms) * 1e-3});
    spare_events.insert(spare_events.end(), {t.begin, t.end});
  }
  timed.clear();
  return out;
}

// Debug mode's NaN/Inf sentinel (docs/placement.md, requirement 9):
// no op of the model produces a non-finite value from finite inputs, so the
// first output that holds one names the op where a NaN is born (or, when an
// input already held one, says where it came in).
void CudaBackend::Impl::check_finite(const OpCall& c) const {
  auto first_bad = [](const Tensor& t, int64_t* count) {
    int64_t first = -1;
    *count = 0;
    if (t.dtype != DType::kF32) return first;
    for (size_t e = 0; e < size_t(t.numel()); ++e)
      if (!std::isfinite(t.f[e])) {
        if (first < 0) first = int64_t(e);
        ++*count;
      }
    return first;
  };
  for (size_t k = 0; k < c.out.size(); ++k) {
    int64_t count = 0;
    const int64_t e = first_bad(*c.out[k], &count);
    if (e < 0) continue;
    std::string inputs = "its inputs are finite: the op produced them";
    for (size_t j = 0; j < c.in.size(); ++j) {
      int64_t n = 0;
      if (first_bad(*c.in[j], &n) >= 0) {
        inputs = "input " + std::to_string(j) + " already holds " + std::to_string(n) +
                 " non-finite values: they come from before this op";
        break;
      }
    }
    const float v = c.out[k]->f[size_t(e)];
    char first[96];
    std::snprintf(first, sizeof first, "first %s at element %lld",
                  std::isnan(v) ? "NaN"
                  : v > 0       ? "+Inf"
                                : "-Inf",
                  (long long)e);
    fail("output " + std::to_string(k) + " " + c.out[k]->shape_string() + " holds " + std::to_string(count) +
         " non-finite values (" + first + "); " + inputs + "\n  op shapes: " + shapes + "\n" +
         log_text(kLaunchLogSize));
  }
}

// ---- public ------------------------------------------------------------------

CudaBackend::CudaBackend(CudaBackendOptions options) : options_(options) {
  if (options_.debug) options_.sync = options_.checker = true;
  if (options_.test_fault == CudaBackendOptions::TestFault::kWritePastOutput && !options_.debug)
    throw Error("cuda backend: the write-past-output test fault needs debug mode (canaries), else it corrupts memory");
  impl_ = std::make_unique<Impl>(options_);
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::name() const {
  std::string opts;
  if (options_.device != 0) opts += std::to_string(options_.device);
  if (options_.debug) {
    opts += std::string(opts.empty() ? "" : ",") + "debug";
  } else {
    if (options_.checker) opts += std::string(opts.empty() ? "" : ",") + "checker";
    if (options_.sync) opts += std::string(opts.empty() ? "" : ",") + "sync";
  }
  if (options_.int8_dot)
    opts += std::string(opts.empty() ? "" : ",") + "int8-dot";
  else if (options_.bf16_dot)
    opts += std::string(opts.empty() ? "" : ",") + "bf16-dot";
  if (options_.cublas_attention) opts += std::string(opts.empty() ? "" : ",") + "cublas-attention";
  return opts.empty() ? "cuda" : "cuda:" + opts;
}

void CudaBackend::run(const OpCall& call) { impl_->run(call); }

bool CudaBackend::supports(const OpCall& c, std::string* why) const {
  auto refuse = [why](const std::string& reason) {
    if (why) *why = "cuda backend: " + reason;
    return false;
  };
  k::WType t;
  for (const WeightRef* w : c.w) {
    if (!w) continue;
    if (w->quant && !w->quant->bound_dense) {
      if (w->quant->scheme == QuantScheme::kAffine && !k::float_wtype(w->quant->scale_dtype, &t))
        return refuse("quantized weight " + w->name + " has affine scales of dtype " +
                      std::string(dtype_name(w->quant->scale_dtype)) +
                      ", which the CUDA kernels cannot read (F32, BF16, F16)");
    } else if (!k::float_wtype(w->dtype, &t)) {
      return refuse("weight " + w->name + " has dtype " + std::string(dtype_name(w->dtype)) +
                    ", which the CUDA backend cannot read (F32, BF16, F16)");
    }
  }
  if (c.kind == OpKind::kMoeExperts && c.in.size() == 3 && c.in[1] && !c.in[1]->host_stale) {
    const Tensor& idx = *c.in[1];
    const int64_t K = idx.shape.size() == 2 ? idx.dim(1) : 0;
    for (int64_t m = 0; K > 0 && m < idx.dim(0); ++m)
      for (int64_t a = 1; a < K; ++a)
        for (int64_t b = 0; b < a; ++b)
          if (const int32_t e = idx.i[size_t(m * K + a)]; e == idx.i[size_t(m * K + b)])
            return refuse("token " + std::to_string(m) + " routes to expert " + std::to_string(e) + " twice (top-k " +
                          std::to_string(b) + " and " + std::to_string(a) +
                          "): the device combines a token's expert outputs once per expert");
  }
  return true;
}

std::string CudaBackend::describe_address(const void* device_ptr) const {
  return impl_->describe(reinterpret_cast<uintptr_t>(device_ptr));
}

std::vector<CudaLaunchRecord> CudaBackend::recent_launches() const { return {impl_->log.begin(), impl_->log.end()}; }

std::string CudaBackend::launch_log() const { return impl_->log_text(kLaunchLogSize); }

int64_t CudaBackend::cached_weight_bytes() const { return impl_->weight_bytes; }

CudaTraffic CudaBackend::traffic() const { return impl_->arena->traffic; }
bool CudaBackend::set_profiling(bool on) {
  impl_->profiling = on;
  return true;
}
std::vector<CudaOpTime> CudaBackend::take_profile() {
  impl_->where = "take_profile";
  impl_->shapes.clear();
  return impl_->take_profile();
}
void CudaBackend::reset_traffic() { impl_->arena->traffic = {}; }

}  // namespace dgemma
