// The CUDA runtime functions the CUDA backend calls, implemented on the host
// for the emulated device (DGEMMA_CUDA=EMULATE builds link this instead of
// libcudart). One device by default (DGEMMA_CUDA_EMULATED_DEVICES sets how
// many), the current one per thread. Device memory is host memory from the
// C allocator, so that a sanitizer build checks every kernel access against
// the exact allocation size; the runtime keeps the allocation map to check
// copies and frees like the real one does. Streams run their work at once,
// in order (a synchronize only reports errors), unless
// DGEMMA_CUDA_EMULATED_STREAMS=deferred: then the work of a created stream
// (kernels, cuBLAS calls, device-to-device copies, memsets, stream-ordered
// frees, event records) is queued and runs only when the host waits for it —
// cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, a copy
// to pageable host memory (which returns only once it completed, as on a
// GPU), cudaFree or cudaStreamDestroy. A copy from pageable host memory is
// taken at the call (the driver stages it, as on a GPU) and lands in device
// memory in stream order. So host code that reads results without waiting,
// or reads device memory directly, sees stale data, as it could on a GPU. Error semantics follow the
// runtime: a failed call sets the last error (cudaGetLastError returns and
// clears it); a device fault is sticky and every later call returns it.
//
// Pinned host memory (cudaHostAlloc, cudaMallocHost) is host memory the
// runtime remembers: in the deferred mode a copy from it is read when the
// stream gets there, and a copy to it lands then, without a wait (so host code
// that reuses a staging buffer too early, or reads one too soon, sees the
// difference, as on a GPU).
//
// Stream capture (cudaStreamBeginCapture) turns the stream's work into the
// nodes of a graph instead of running it; cudaGraphInstantiate,
// cudaGraphExecUpdate (same nodes, same kernels; the arguments may change) and
// cudaGraphLaunch replay it, in the stream's order. What breaks a capture on a
// GPU (in the relaxed mode, which lets other streams and threads go on) fails
// with cudaErrorStreamCaptureUnsupported and invalidates the capture: a wait
// for the capturing stream, a copy between it and pageable host memory, and a
// call that synchronizes the whole device while one of its streams captures
// (cudaFree, cudaFreeHost, cudaDeviceSynchronize, synchronous copies and
// memsets). Work the emulator does not capture (event records, stream-ordered
// allocation, child graphs) fails the same way, on the capturing stream only.
//
// DGEMMA_CUDA_EMULATED_MEMORY=guarded catches host code that dereferences a
// device pointer, which works on the emulated device (its memory is host
// memory) but is a segmentation fault, or garbage, on a GPU: device memory
// then comes from one reserved region that the host cannot access (mmap,
// PROT_NONE), opened only while the emulated device works on it (a kernel, a
// cuBLAS call, a copy or memset). A host access outside those windows faults;
// the handler names the allocation and the offset, then lets the fault take
// its course (AddressSanitizer's report with the host stack, or the default
// crash). Off by default: exact-size allocations from the C allocator let
// AddressSanitizer check every kernel access byte for byte, which the region
// cannot (the CTest entry cuda_tests_guarded_memory runs tests both ways).
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_emulator/launch_status.h"

// A captured graph: its nodes in stream order (a capture on one stream is a
// chain), each named for cudaGraphExecUpdate's check.
struct CUgraph_st {
  struct Node {
    std::string what;
    std::function<void()> run;
  };
  std::vector<Node> nodes;
};
struct CUgraphExec_st {
  int device = 0;
  std::vector<CUgraph_st::Node> nodes;
};

struct CUstream_st {
  unsigned flags = 0;
  int device = 0;                 // the device current when it was created
  CUgraph_st* capture = nullptr;  // the graph being captured, if any
  bool capture_invalidated = false;
  // Deferred mode: the work not yet run, in order; `always` work (frees)
  // also runs after a fault broke the context.
  struct Work {
    std::function<void()> run;
    bool always = false;
  };
  std::deque<Work> queue;
};
struct CUmemPoolHandle_st {
  uint64_t release_threshold = 0;
};
// Streams run their work at once, so an event records the host's clock when
// it is recorded: the elapsed time between two events is the time the work
// between them took.
struct CUevent_st {
  int device = 0;
  bool recorded = false;          // the record ran (in deferred mode: when its stream got there)
  cudaStream_t stream = nullptr;  // of the last record
  std::chrono::steady_clock::time_point at;
};

namespace dgemma::cuda_emu {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee
constexpr int kMaxDevices = 16;

struct Allocation {
  size_t bytes = 0;
  int device = 0;
  size_t chunk = 0;  // guarded memory: the region's bytes it holds (whole pages), else 0
};

// All emulated devices share one host memory; allocations, streams and
// pools remember the device they belong to.
struct Device {
  std::mutex mu;
  std::map<uintptr_t, Allocation> allocations;  // by start address
  std::set<CUstream_st*> streams;
  std::set<CUmemPoolHandle_st*> pools;
  std::map<uintptr_t, size_t> pinned;  // pinned host allocations, by start address
  // A device fault breaks that device's context only (as each device has its
  // own primary context).
  cudaError_t sticky[kMaxDevices] = {};
  // Guarded memory: the reserved region, its used prefix, the free chunks
  // (by size) and the device work in progress (any thread; the region is
  // open while it is above zero).
  uintptr_t region = 0;
  size_t region_bytes = 0, region_used = 0;
  std::multimap<size_t, uintptr_t> free_chunks;
  int open_windows = 0;
};

Device& device() {
  static Device* d = new Device;  // lives until exit (objects may be freed by static destructors)
  return *d;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;  // cudaSetDevice

// DGEMMA_CUDA_EMULATED_DEVICES (1 to 16, default 1): how many devices the
// emulator reports, e.g. to run a placement plan over cuda:0 and cuda:1.
int device_count() {
  static const int n = [] {
    const char* e = std::getenv("DGEMMA_CUDA_EMULATED_DEVICES");
    if (!e || !*e) return 1;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end != '\0' || v < 1 || v > kMaxDevices) {
      std::fprintf(stderr,
                   "dgemma CUDA emulator: DGEMMA_CUDA_EMULATED_DEVICES='%s' is not a count in [1, %d]; using 1\n", e,
                   kMaxDevices);
      return 1;
    }
    return int(v);
  }();
  return n;
}

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

// The sticky error of the current device's broken context, else success.
cudaError_t broken() {
  Device& d = device();
  std::lock_guard lock(d.mu);
  return d.sticky[t_device];
}

// The allocation holding [a, a + bytes), or null.
const Allocation* find_locked(Device& d, uintptr_t a, size_t bytes) {
  auto it = d.allocations.upper_bound(a);
  if (it == d.allocations.begin()) return nullptr;
  --it;
  const size_t size = it->second.bytes;
  const bool inside = a >= it->first && a - it->first <= size && bytes <= size - (a - it->first);
  return inside ? &it->second : nullptr;
}

bool range_ok_locked(Device& d, uintptr_t a, size_t bytes) { return find_locked(d, a, bytes) != nullptr; }

void break_context(cudaError_t e, const std::string& what) {
  Device& d = device();
  {
    std::lock_guard lock(d.mu);
    if (d.sticky[t_device] == cudaSuccess) d.sticky[t_device] = e;
  }
  t_last_error = e;
  std::fprintf(stderr, "dgemma CUDA emulator: device %d: %s: %s\n", t_device, cudaGetErrorName(e), what.c_str());
}

bool stream_ok(cudaStream_t s) {
  if (!s) return true;  // the legacy default stream
  Device& d = device();
  std::lock_guard lock(d.mu);
  return d.streams.count(s) > 0;
}

// Work goes to a stream of the current device (else the runtime reports an
// invalid handle: a backend that forgot cudaSetDevice).
bool stream_on_current_device(cudaStream_t s) { return stream_ok(s) && (!s || s->device == t_device); }

// Whether [p, p + bytes) lies inside one pinned host allocation.
bool pinned_range(const void* p, size_t bytes) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = d.pinned.upper_bound(a);
  if (it == d.pinned.begin()) return false;
  --it;
  return a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

void invalidate_capture(cudaStream_t s, const std::string& why) {
  if (!s->capture_invalidated)
    std::fprintf(stderr, "dgemma CUDA emulator: device %d: stream capture invalidated: %s\n", s->device, why.c_str());
  s->capture_invalidated = true;
}

// Whether `s` captures, so that the call `why` names breaks its capture: then
// the capture is invalidated and the last error set to
// cudaErrorStreamCaptureUnsupported, which the caller returns.
bool capture_refuses(cudaStream_t s, const std::string& why) {
  if (!s || !s->capture) return false;
  invalidate_capture(s, why);
  fail(cudaErrorStreamCaptureUnsupported);
  return true;
}

// `call` synchronizes the whole device: while a stream of the current device
// captures, it fails with cudaErrorStreamCaptureUnsupported and invalidates
// the capture (see the top of this file); cudaSuccess otherwise.
cudaError_t outside_capture_only(const char* call) {
  std::vector<cudaStream_t> capturing;
  {
    Device& d = device();
    std::lock_guard lock(d.mu);
    for (CUstream_st* s : d.streams)
      if (s->capture && s->device == t_device) capturing.push_back(s);
  }
  if (capturing.empty()) return cudaSuccess;
  for (cudaStream_t s : capturing) invalidate_capture(s, std::string(call) + " while the stream captures");
  return fail(cudaErrorStreamCaptureUnsupported);
}

// DGEMMA_CUDA_EMULATED_STREAMS: "immediate" (default) or "deferred".
bool deferred_streams() {
  static const bool deferred = [] {
    const char* e = std::getenv("DGEMMA_CUDA_EMULATED_STREAMS");
    if (!e || !*e || std::strcmp(e, "immediate") == 0) return false;
    if (std::strcmp(e, "deferred") == 0) return true;
    std::fprintf(stderr,
                 "dgemma CUDA emulator: DGEMMA_CUDA_EMULATED_STREAMS='%s' is neither immediate nor deferred; using "
                 "immediate\n",
                 e);
    return false;
  }();
  return deferred;
}

// ---- guarded memory (DGEMMA_CUDA_EMULATED_MEMORY=guarded) ---------------------

bool guarded_memory() {
  static const bool guarded = [] {
    const char* e = std::getenv("DGEMMA_CUDA_EMULATED_MEMORY");
    if (!e || !*e || std::strcmp(e, "plain") == 0) return false;
    if (std::strcmp(e, "guarded") == 0) return true;
    std::fprintf(stderr,
                 "dgemma CUDA emulator: DGEMMA_CUDA_EMULATED_MEMORY='%s' is neither plain nor guarded; using plain\n",
                 e);
    return false;
  }();
  return guarded;
}

size_t page_size() {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return page;
}

constexpr size_t kGuardedRegionBytes = size_t(64) << 30;  // reserved address space, not memory

void set_access_locked(Device& d, int prot) {
  if (d.region_used) mprotect(reinterpret_cast<void*>(d.region), d.region_used, prot);
}

struct sigaction g_previous_segv;

// Names the device allocation a faulting address falls in (async-signal-safe
// calls only; the map is read without its lock, as the process is about to
// die), then restores the previous handler and returns: the access faults
// again and that handler reports it.
void on_segv(int, siginfo_t* info, void*) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(info->si_addr);
  Device& d = device();
  if (at >= d.region && at < d.region + d.region_bytes && d.open_windows == 0) {
    char msg[400];
    int n = 0;
    auto it = d.allocations.upper_bound(at);
    if (it != d.allocations.begin() && at < std::prev(it)->first + std::prev(it)->second.bytes) {
      --it;
      n = std::snprintf(msg, sizeof msg,
                        "dgemma CUDA emulator: host code read or wrote emulated device memory at %p, %zu bytes into a "
                        "%zu-byte allocation of device %d: on a GPU this is a crash or garbage; copy it to the host "
                        "first (cudaMemcpy, Tensor::ensure_host)\n",
                        info->si_addr, size_t(at - it->first), it->second.bytes, it->second.device);
    } else {
      n = std::snprintf(msg, sizeof msg,
                        "dgemma CUDA emulator: host code read or wrote emulated device memory at %p, outside any live "
                        "allocation (freed or never allocated)\n",
                        info->si_addr);
    }
    if (n > 0) (void)!write(2, msg, size_t(n < int(sizeof msg) ? n : int(sizeof msg) - 1));
  }
  sigaction(SIGSEGV, &g_previous_segv, nullptr);
}

// The region, reserved on first use, and the handler; false when the address
// space cannot be reserved.
bool reserve_region_locked(Device& d) {
  if (d.region) return true;
  void* map = mmap(nullptr, kGuardedRegionBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return false;
  d.region = reinterpret_cast<uintptr_t>(map);
  d.region_bytes = kGuardedRegionBytes;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous_segv);
  return true;
}

// A chunk of whole pages: the smallest free one that fits (its rest goes back
// to the free list), else the next part of the region; 0 when it is full.
uintptr_t take_chunk_locked(Device& d, size_t bytes) {
  auto it = d.free_chunks.lower_bound(bytes);
  if (it != d.free_chunks.end()) {
    const size_t size = it->first;
    const uintptr_t at = it->second;
    d.free_chunks.erase(it);
    if (size > bytes) d.free_chunks.emplace(size - bytes, at + bytes);
    return at;
  }
  if (d.region_used + bytes > d.region_bytes) return 0;
  const uintptr_t at = d.region + d.region_used;
  d.region_used += bytes;
  // New pages take the region's current access (open inside a window).
  if (d.open_windows > 0) mprotect(reinterpret_cast<void*>(at), bytes, PROT_READ | PROT_WRITE);
  return at;
}

// The window in which the emulated device works on its memory (guarded
// memory: opened for the first window of any thread, closed after the last).
class DeviceAccess {
 public:
  DeviceAccess() : on_(guarded_memory()) {
    if (!on_) return;
    Device& d = device();
    std::lock_guard lock(d.mu);
    if (d.open_windows++ == 0) set_access_locked(d, PROT_READ | PROT_WRITE);
  }
  ~DeviceAccess() {
    if (!on_) return;
    Device& d = device();
    std::lock_guard lock(d.mu);
    if (--d.open_windows == 0) set_access_locked(d, PROT_NONE);
  }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

 private:
  bool on_;
};

// Runs the queued work of `s` in order, on the stream's device. After a
// fault broke that device's context only `always` work runs (as a GPU runs
// nothing more), so the error surfaces at the wait.
void drain(cudaStream_t s) {
  if (!s) return;
  const int saved = t_device;
  t_device = s->device;
  while (!s->queue.empty()) {
    CUstream_st::Work w = std::move(s->queue.front());
    s->queue.pop_front();
    if (w.always || broken() == cudaSuccess) {
      DeviceAccess access;
      w.run();
    }
  }
  t_device = saved;
}

// Every stream of the current device (cudaDeviceSynchronize, cudaFree).
void drain_device() {
  std::vector<cudaStream_t> mine;
  {
    Device& d = device();
    std::lock_guard lock(d.mu);
    for (CUstream_st* s : d.streams)
      if (s->device == t_device) mine.push_back(s);
  }
  for (cudaStream_t s : mine) drain(s);
}

cudaError_t allocate(void** p, size_t bytes) {
  if (!p) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = broken()) return fail(e);
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  Device& d = device();
  if (guarded_memory()) {
    std::lock_guard lock(d.mu);
    const size_t page = page_size(), chunk = (bytes + page - 1) / page * page;
    const uintptr_t at = reserve_region_locked(d) ? take_chunk_locked(d, chunk) : 0;
    if (!at) return fail(cudaErrorMemoryAllocation);
    d.allocations[at] = Allocation{bytes, t_device, chunk};
    *p = reinterpret_cast<void*>(at);
    return cudaSuccess;
  }
  void* mem = nullptr;
  if (posix_memalign(&mem, kAlignment, bytes) != 0) return fail(cudaErrorMemoryAllocation);
  std::lock_guard lock(d.mu);
  d.allocations[reinterpret_cast<uintptr_t>(mem)] = Allocation{bytes, t_device, 0};
  *p = mem;
  return cudaSuccess;
}

cudaError_t release(void* p) {
  if (!p) return cudaSuccess;
  Device& d = device();
  {
    std::lock_guard lock(d.mu);
    auto it = d.allocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == d.allocations.end()) return fail(cudaErrorInvalidValue);
    const size_t chunk = it->second.chunk;
    d.allocations.erase(it);
    if (chunk) {  // back to the free list (its pages keep their contents: a GPU's freed memory does too)
      d.free_chunks.emplace(chunk, reinterpret_cast<uintptr_t>(p));
      return cudaSuccess;
    }
  }
  std::free(p);
  return cudaSuccess;
}

// Device-side ranges of a copy must be allocated; host-side ones are the
// caller's memory (pageable, or pinned: see the top of this file).
cudaError_t copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s = nullptr) {
  if (cudaError_t e = broken()) return fail(e);
  if (n == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault;
  if (kind != cudaMemcpyHostToHost && !dst_dev && !src_dev) return fail(cudaErrorInvalidMemcpyDirection);
  {
    Device& d = device();
    std::lock_guard lock(d.mu);
    const bool dst_in = range_ok_locked(d, reinterpret_cast<uintptr_t>(dst), n);
    const bool src_in = range_ok_locked(d, reinterpret_cast<uintptr_t>(src), n);
    if (kind == cudaMemcpyDefault) {
      // Unified addressing: each side is device memory when it is allocated.
    } else if ((dst_dev && !dst_in) || (src_dev && !src_in)) {
      return fail(cudaErrorInvalidValue);
    }
  }
  const bool host_dst_pinned = !dst_dev && pinned_range(dst, n);
  const bool host_src_pinned = !src_dev && pinned_range(src, n);
  if (!s) {
    if (cudaError_t e = outside_capture_only("a synchronous cudaMemcpy")) return e;
  } else if ((!dst_dev && !host_dst_pinned) || (!src_dev && !host_src_pinned)) {
    if (capture_refuses(s, "cudaMemcpyAsync to or from pageable host memory (a graph's copy needs pinned memory)"))
      return cudaErrorStreamCaptureUnsupported;
  }
  if (!s || (!deferred_streams() && !s->capture)) {
    DeviceAccess access;
    std::memmove(dst, src, n);
    return cudaSuccess;
  }
  if ((!dst_dev && !host_dst_pinned) && !s->capture) {
    // To pageable host memory: returns once the copy completed.
    drain(s);
    if (cudaError_t e = broken()) return fail(e);
    DeviceAccess access;
    std::memmove(dst, src, n);
    return cudaSuccess;
  }
  // From pageable host memory the data is taken now (the driver stages it);
  // from pinned memory it is read when the stream gets there. Device memory
  // is written in stream order (and must still be allocated then).
  std::shared_ptr<std::vector<unsigned char>> staged;
  if (!src_dev && !host_src_pinned) {
    const auto* h = static_cast<const unsigned char*>(src);
    staged = std::make_shared<std::vector<unsigned char>>(h, h + n);
  }
  enqueue_work(
      s,
      [dst, src, n, staged, dst_dev, src_dev] {
        if ((dst_dev && !device_range_ok(dst, n)) || (src_dev && !device_range_ok(src, n))) {
          illegal_address("cudaMemcpyAsync: a device range of a queued copy is no longer allocated");
          return;
        }
        std::memmove(dst, staged ? staged->data() : src, n);
      },
      "cudaMemcpyAsync");
  return cudaSuccess;
}

cudaError_t fill(void* p, int value, size_t n, cudaStream_t s) {
  if (cudaError_t e = broken()) return fail(e);
  if (!stream_on_current_device(s)) return fail(cudaErrorInvalidResourceHandle);
  if (n == 0) return cudaSuccess;
  if (!device_range_ok(p, n)) return fail(cudaErrorInvalidValue);
  if (!s)
    if (cudaError_t e = outside_capture_only("a synchronous cudaMemset")) return e;
  enqueue_work(
      s,
      [p, value, n] {
        if (!device_range_ok(p, n)) return illegal_address("cudaMemsetAsync: the queued range is no longer allocated");
        std::memset(p, value, n);
      },
      "cudaMemsetAsync");
  return cudaSuccess;
}

}  // namespace

// cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize):
// the opt-in per kernel.
constexpr size_t kDefaultDynamicShared = 48 << 10, kMaxDynamicShared = 227 << 10;
std::mutex g_func_mu;
std::map<const void*, size_t> g_max_dynamic_shared;

bool launch_begins(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream, size_t dynamic_shared_bytes,
                   const void* func) {
  if (cudaError_t e = broken()) {
    fail(e);
    return false;
  }
  if (!stream_on_current_device(stream)) {
    fail(cudaErrorInvalidResourceHandle);
    std::fprintf(stderr,
                 "dgemma CUDA emulator: kernel %s launched into a stream that is not of the current device %d\n",
                 kernel, t_device);
    return false;
  }
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  const bool ok = grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 &&
                  grid.z <= 65535 && threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 &&
                  block.z <= 64;
  if (dynamic_shared_bytes > kDefaultDynamicShared) {
    size_t allowed = kDefaultDynamicShared;
    {
      std::lock_guard lock(g_func_mu);
      auto it = g_max_dynamic_shared.find(func);
      if (func && it != g_max_dynamic_shared.end()) allowed = it->second;
    }
    if (dynamic_shared_bytes > allowed) {
      fail(cudaErrorInvalidValue);
      std::fprintf(stderr,
                   "dgemma CUDA emulator: kernel %s: %zu bytes of dynamic shared memory, over the %zu it may take "
                   "(cudaFuncSetAttribute with cudaFuncAttributeMaxDynamicSharedMemorySize raises it to %zu)\n",
                   kernel, dynamic_shared_bytes, allowed, kMaxDynamicShared);
      return false;
    }
  }
  if (!ok) {
    fail(cudaErrorInvalidConfiguration);
    std::fprintf(stderr,
                 "dgemma CUDA emulator: kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)\n",
                 kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return false;
  }
  return true;
}

void enqueue_work(cudaStream_t stream, std::function<void()> work, const char* what) {
  if (stream && stream->capture) {
    stream->capture->nodes.push_back({what, std::move(work)});
    return;
  }
  if (!stream || !deferred_streams()) {
    DeviceAccess access;
    return work();
  }
  stream->queue.push_back({std::move(work), false});
}

void launch_ends(const char* kernel, const std::string& fault) {
  (void)kernel;  // named in `fault`
  if (!fault.empty()) break_context(cudaErrorLaunchFailure, fault);
}

bool device_range_ok(const void* p, size_t bytes) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  const Allocation* a = find_locked(d, reinterpret_cast<uintptr_t>(p), bytes);
  return a && a->device == t_device;
}

void illegal_address(const std::string& what) { break_context(cudaErrorIllegalAddress, what); }

void refuse_in_capture(cudaStream_t stream, const std::string& why) {
  if (!(stream && stream_ok(stream) && capture_refuses(stream, why))) fail(cudaErrorStreamCaptureUnsupported);
}

int current_device() { return t_device; }

}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

// ---- the runtime API ---------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return emu::fail(cudaErrorInvalidValue);
  *count = emu::device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  if (dev < 0 || dev >= emu::device_count()) return emu::fail(cudaErrorInvalidDevice);
  emu::t_device = dev;
  return emu::broken() ? emu::fail(emu::broken()) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* dev) {
  if (!dev) return emu::fail(cudaErrorInvalidValue);
  *dev = emu::t_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev) {
  if (!value) return emu::fail(cudaErrorInvalidValue);
  if (dev < 0 || dev >= emu::device_count()) return emu::fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMemoryPoolsSupported: *value = 1; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrMaxGridDimX: *value = 0x7fffffff; return cudaSuccess;
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ: *value = 65535; return cudaSuccess;
    default: return emu::fail(cudaErrorInvalidValue);
  }
}

cudaError_t cudaGetLastError() {
  const cudaError_t sticky = emu::broken();
  const cudaError_t e = emu::t_last_error;
  emu::t_last_error = cudaSuccess;
  return sticky ? sticky : e;
}

cudaError_t cudaPeekAtLastError() {
  const cudaError_t sticky = emu::broken();
  return sticky ? sticky : emu::t_last_error;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalState: return "the resource is not in a valid state to perform the requested operation";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorGraphExecUpdateFailure:
      return "the graph update was not performed because it included changes which violated constraints specific "
             "to instantiated graph update";
    default: return "unknown error";
  }
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  if (!s) return emu::fail(cudaErrorInvalidValue);
  if (cudaError_t e = emu::broken()) return emu::fail(e);
  *s = new CUstream_st;
  (*s)->flags = flags;
  (*s)->device = emu::t_device;
  emu::Device& d = emu::device();
  std::lock_guard lock(d.mu);
  d.streams.insert(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s && emu::stream_ok(s) && s->capture) return emu::fail(cudaErrorStreamCaptureUnsupported);
  if (emu::stream_ok(s)) emu::drain(s);
  emu::Device& d = emu::device();
  {
    std::lock_guard lock(d.mu);
    if (!s || !d.streams.erase(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  }
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!emu::stream_ok(s)) return emu::fail(cudaErrorInvalidResourceHandle);  // any device's stream
  if (emu::capture_refuses(s, "cudaStreamSynchronize on the capturing stream"))
    return cudaErrorStreamCaptureUnsupported;
  emu::drain(s);
  if (cudaError_t e = emu::broken()) return emu::fail(e);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = emu::outside_capture_only("cudaDeviceSynchronize")) return e;
  emu::drain_device();
  if (cudaError_t e = emu::broken()) return emu::fail(e);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) { return emu::allocate(p, bytes); }

// Synchronous: the device's queued work runs first (it may still use p).
cudaError_t cudaFree(void* p) {
  if (cudaError_t e = emu::outside_capture_only("cudaFree")) return e;
  emu::drain_device();
  return emu::release(p);
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  if (!pool || !props) return emu::fail(cudaErrorInvalidValue);
  if (props->location.type != cudaMemLocationTypeDevice || props->location.id < 0 ||
      props->location.id >= emu::device_count())
    return emu::fail(cudaErrorInvalidValue);
  *pool = new CUmemPoolHandle_st;
  emu::Device& d = emu::device();
  std::lock_guard lock(d.mu);
  d.pools.insert(*pool);
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  emu::Device& d = emu::device();
  {
    std::lock_guard lock(d.mu);
    if (!pool || !d.pools.erase(pool)) return emu::fail(cudaErrorInvalidValue);
  }
  delete pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!pool || !value) return emu::fail(cudaErrorInvalidValue);
  if (attr == cudaMemPoolAttrReleaseThreshold) std::memcpy(&pool->release_threshold, value, sizeof(uint64_t));
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void** p, size_t bytes, cudaMemPool_t pool, cudaStream_t s) {
  if (!pool) return emu::fail(cudaErrorInvalidValue);
  if (!emu::stream_on_current_device(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  if (emu::capture_refuses(s, "cudaMallocFromPoolAsync on the capturing stream (memory nodes are not emulated)"))
    return cudaErrorStreamCaptureUnsupported;
  return emu::allocate(p, bytes);
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (!emu::stream_ok(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  if (emu::capture_refuses(s, "cudaFreeAsync on the capturing stream (memory nodes are not emulated)"))
    return cudaErrorStreamCaptureUnsupported;
  if (!s || !emu::deferred_streams()) return emu::release(p);
  s->queue.push_back({[p] { emu::release(p); }, true});  // stream-ordered, also after a fault
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return emu::copy(dst, src, n, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  if (!emu::stream_ok(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  return emu::copy(dst, src, n, kind, s);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) { return emu::fill(p, value, n, s); }

cudaError_t cudaMemset(void* p, int value, size_t n) { return emu::fill(p, value, n, nullptr); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  if (flags & ~unsigned(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
    return emu::fail(cudaErrorInvalidValue);
  return cudaEventCreate(e);
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (!e) return emu::fail(cudaErrorInvalidValue);
  if (cudaError_t err = emu::broken()) return emu::fail(err);
  *e = new CUevent_st;
  (*e)->device = emu::t_device;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!e) return emu::fail(cudaErrorInvalidResourceHandle);
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return emu::fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t err = emu::broken()) return emu::fail(err);
  // An event of one device recorded on another device's stream is invalid.
  if (!emu::stream_on_current_device(s) || e->device != emu::t_device) return emu::fail(cudaErrorInvalidResourceHandle);
  if (emu::capture_refuses(s, "cudaEventRecord on the capturing stream (event nodes are not emulated)"))
    return cudaErrorStreamCaptureUnsupported;
  e->recorded = false;
  e->stream = s;
  emu::enqueue_work(s, [e] {
    e->recorded = true;
    e->at = std::chrono::steady_clock::now();
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e) return emu::fail(cudaErrorInvalidResourceHandle);
  if (e->stream && emu::stream_ok(e->stream)) emu::drain(e->stream);
  if (cudaError_t err = emu::broken()) return emu::fail(err);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t begin, cudaEvent_t end) {
  if (!ms || !begin || !end) return emu::fail(cudaErrorInvalidValue);
  if (cudaError_t err = emu::broken()) return emu::fail(err);
  if (!begin->recorded || !end->recorded) return emu::fail(cudaErrorNotReady);  // not recorded, or not reached yet
  *ms = std::chrono::duration<float, std::milli>(end->at - begin->at).count();
  return cudaSuccess;
}

// ---- pinned host memory -------------------------------------------------------

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int flags) {
  if (!p) return emu::fail(cudaErrorInvalidValue);
  (void)flags;
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  void* mem = nullptr;
  if (posix_memalign(&mem, emu::kAlignment, bytes) != 0) return emu::fail(cudaErrorMemoryAllocation);
  emu::Device& d = emu::device();
  std::lock_guard lock(d.mu);
  d.pinned[reinterpret_cast<uintptr_t>(mem)] = bytes;
  *p = mem;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }

// Synchronous, as on a GPU: queued copies may still read or write it.
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  if (cudaError_t e = emu::outside_capture_only("cudaFreeHost")) return e;
  emu::drain_device();
  emu::Device& d = emu::device();
  {
    std::lock_guard lock(d.mu);
    if (!d.pinned.erase(reinterpret_cast<uintptr_t>(p))) return emu::fail(cudaErrorInvalidValue);
  }
  std::free(p);
  return cudaSuccess;
}

// ---- stream capture and graphs ----------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  (void)mode;  // every mode is checked as strictly (see the top of this file)
  if (!s || !emu::stream_on_current_device(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = emu::broken()) return emu::fail(e);
  if (s->capture) return emu::fail(cudaErrorIllegalState);
  s->capture = new CUgraph_st;
  s->capture_invalidated = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  if (!graph) return emu::fail(cudaErrorInvalidValue);
  *graph = nullptr;
  if (!s || !emu::stream_ok(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  if (!s->capture) return emu::fail(cudaErrorIllegalState);
  CUgraph_st* g = s->capture;
  s->capture = nullptr;
  if (s->capture_invalidated) {
    s->capture_invalidated = false;
    delete g;
    return emu::fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  if (!status) return emu::fail(cudaErrorInvalidValue);
  if (!emu::stream_ok(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  *status = !s || !s->capture        ? cudaStreamCaptureStatusNone
            : s->capture_invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  if (!exec || !graph || flags != 0) return emu::fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{emu::t_device, graph->nodes};
  return cudaSuccess;
}

// The emulator's update rule: the same number of nodes, each of the same
// name (kernel, cuBLAS routine, copy or memset); their arguments are taken
// from `graph`.
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  if (!exec || !graph) return emu::fail(cudaErrorInvalidValue);
  cudaGraphExecUpdateResult result = cudaGraphExecUpdateSuccess;
  if (graph->nodes.size() != exec->nodes.size()) {
    result = cudaGraphExecUpdateErrorTopologyChanged;
  } else {
    for (size_t i = 0; i < graph->nodes.size(); ++i)
      if (graph->nodes[i].what != exec->nodes[i].what) result = cudaGraphExecUpdateErrorNodeTypeChanged;
  }
  if (info) {
    info->result = result;
    info->errorNode = nullptr;
    info->errorFromNode = nullptr;
  }
  if (result != cudaGraphExecUpdateSuccess) return emu::fail(cudaErrorGraphExecUpdateFailure);
  exec->nodes = graph->nodes;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (!exec) return emu::fail(cudaErrorInvalidValue);
  if (cudaError_t e = emu::broken()) return emu::fail(e);
  if (!emu::stream_on_current_device(s) || exec->device != emu::t_device)
    return emu::fail(cudaErrorInvalidResourceHandle);
  if (emu::capture_refuses(s, "cudaGraphLaunch into the capturing stream (child graphs are not emulated)"))
    return cudaErrorStreamCaptureUnsupported;
  for (const CUgraph_st::Node& n : exec->nodes) emu::enqueue_work(s, n.run, n.what.c_str());
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return emu::fail(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec) return emu::fail(cudaErrorInvalidValue);
  delete exec;
  return cudaSuccess;
}

// ---- kernel attributes ------------------------------------------------------------

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func) return emu::fail(cudaErrorInvalidDeviceFunction);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return emu::fail(cudaErrorInvalidValue);  // not emulated
  if (value < 0 || size_t(value) > emu::kMaxDynamicShared) return emu::fail(cudaErrorInvalidValue);
  std::lock_guard lock(emu::g_func_mu);
  emu::g_max_dynamic_shared[func] = std::max(size_t(value), emu::kDefaultDynamicShared);
  return cudaSuccess;
}
