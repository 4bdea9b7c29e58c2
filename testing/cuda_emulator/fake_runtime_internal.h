#pragma once
// The emulated CUDA runtime (fake_runtime_*.cc): the CUDA runtime functions
// the CUDA backend calls, implemented on the host for the emulated device
// (DGEMMA_CUDA=EMULATE builds link these instead of libcudart). One device by
// default (DGEMMA_CUDA_EMULATED_DEVICES sets how many), the current one per
// thread. Device memory is host memory from the C allocator, so that a
// sanitizer build checks every kernel access against the exact allocation
// size; the runtime keeps the allocation map to check copies and frees like
// the real one does. Streams run their work at once, in order (a synchronize
// only reports errors), unless
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
//
// This header is the state those files share (the handles, the devices, the
// current device and last error of each thread) and the helpers one file
// defines for the others; nothing outside testing/cuda_emulator includes it.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

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

// ---- devices and the error state (fake_runtime_devices.cc, fake_runtime_errors.cc)

// The one Device object, alive until exit.
Device& device();

// The calling thread's last error and current device (cudaSetDevice).
extern thread_local constinit cudaError_t t_last_error;
extern thread_local constinit int t_device;

// DGEMMA_CUDA_EMULATED_DEVICES (1 to 16, default 1).
int device_count();

// A two-way setting read from the environment variable `name`: true when it
// is `on`; false when it is unset, empty or `off`, and (with a note on
// stderr) for anything else.
bool env_switch(const char* name, const char* off, const char* on);

// Sets the calling thread's last error to e and returns it.
cudaError_t fail(cudaError_t e);

// The sticky error of the current device's broken context, else success.
cudaError_t broken();

// A device fault: breaks the current device's context (sticky e) and prints
// what happened.
void break_context(cudaError_t e, const std::string& what);

// ---- memory (fake_runtime_memory.cc, fake_runtime_guarded.cc) -----------------

// The allocation holding [a, a + bytes), or null; d.mu held.
const Allocation* find_locked(Device& d, uintptr_t a, size_t bytes);

// Whether [p, p + bytes) lies inside one pinned host allocation.
bool pinned_range(const void* p, size_t bytes);

// DGEMMA_CUDA_EMULATED_MEMORY: "plain" (default) or "guarded".
bool guarded_memory();
size_t page_size();

// Guarded memory: the region, reserved on first use, and the fault handler;
// false when the address space cannot be reserved. d.mu held.
bool reserve_region_locked(Device& d);

// Guarded memory: a chunk of `bytes` (whole pages) of the region, 0 when it
// is full. d.mu held.
uintptr_t take_chunk_locked(Device& d, size_t bytes);

// The window in which the emulated device works on its memory (guarded
// memory: opened for the first window of any thread, closed after the last).
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

 private:
  bool on_;
};

// ---- streams (fake_runtime_streams.cc) ------------------------------------------

// Whether s is the legacy default stream or a live stream (of any device).
bool stream_ok(cudaStream_t s);

// Work goes to a stream of the current device (else the runtime reports an
// invalid handle: a backend that forgot cudaSetDevice).
bool stream_on_current_device(cudaStream_t s);

// DGEMMA_CUDA_EMULATED_STREAMS: "immediate" (default) or "deferred".
bool deferred_streams();

// Runs the queued work of `s` in order, on the stream's device.
void drain(cudaStream_t s);

// Every stream of the current device (cudaDeviceSynchronize, cudaFree).
void drain_device();

// ---- stream capture (fake_runtime_capture.cc) -------------------------------------

// Whether `s` captures, so that the call `why` names breaks its capture: then
// the capture is invalidated and the last error set to
// cudaErrorStreamCaptureUnsupported, which the caller returns.
bool capture_refuses(cudaStream_t s, const std::string& why);

// `call` synchronizes the whole device: while a stream of the current device
// captures, it fails with cudaErrorStreamCaptureUnsupported and invalidates
// the capture; cudaSuccess otherwise.
cudaError_t outside_capture_only(const char* call);

}  // namespace dgemma::cuda_emu
