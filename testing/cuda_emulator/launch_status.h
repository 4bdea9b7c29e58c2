#pragma once
// Between the emulated kernels/cuBLAS and the emulated CUDA runtime
// (fake_runtime_*.cc): launches check and record the runtime's error state the
// way the real runtime does for a device.
#include <cstddef>
#include <functional>
#include <string>

#include <cuda_runtime_api.h>

namespace dgemma::cuda_emu {

// Before a kernel runs: false (and the runtime's last error set) when the
// launch cannot start: bad grid or block, unknown stream, more dynamic shared
// memory than the kernel may take (48 KiB, or up to 227 KiB once
// cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize)
// allowed it, as on sm_90), or a context already broken by an earlier fault.
bool launch_begins(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream, size_t dynamic_shared_bytes = 0,
                   const void* func = nullptr);

// Runs `work` now, or queues it on `stream` in the deferred mode
// (DGEMMA_CUDA_EMULATED_STREAMS=deferred, fake_runtime_streams.cc), to run when the
// host waits for the stream. Work of the legacy default stream runs now.
// While `stream` is capturing (cudaStreamBeginCapture) the work becomes a node
// of the graph, named `what` (the kernel; a graph update keeps the nodes'
// names), and runs when the graph is launched.
void enqueue_work(cudaStream_t stream, std::function<void()> work, const char* what = "work");

// After it ran: a non-empty `fault` breaks the context (sticky
// cudaErrorLaunchFailure, reported by the next call, as an asynchronous
// device fault is) and is printed to stderr.
void launch_ends(const char* kernel, const std::string& fault);

// Whether [p, p + bytes) lies inside one live allocation of the current
// device.
bool device_range_ok(const void* p, size_t bytes);

// Work that would break the capture on `stream` on a GPU: invalidates it
// (cudaStreamEndCapture then fails) and prints `why`.
void refuse_in_capture(cudaStream_t stream, const std::string& why);

// The calling thread's current device (cudaSetDevice).
int current_device();

// A device-side access outside every allocation (emulated cuBLAS): breaks
// the context with cudaErrorIllegalAddress and prints `what`.
void illegal_address(const std::string& what);

}  // namespace dgemma::cuda_emu
