#pragma once
// Runs a CUDA kernel's grid on the host, for the emulated CUDA device
// (DGEMMA_CUDA=EMULATE; see device_builtins.h). Blocks run one after the
// other on the calling thread; the threads of a block are fibers (each with
// its own stack) that the runner switches between at barriers, so that
// __syncthreads and warp shuffles behave as on a GPU:
//  - __syncthreads waits until every thread of the block that has not exited
//    arrived (exited threads count as arrived, as on sm_70+);
//  - a warp shuffle waits for every lane named in its mask; a lane named in
//    the mask that has exited, or a mask without the caller's own lane, is a
//    fault (undefined behaviour on a GPU);
//  - a block in which no thread can move on (threads at __syncthreads while
//    others wait in a shuffle, or a barrier some threads never reach) is a
//    fault ("deadlock"), where a GPU would hang or misbehave.
// A fault makes the launch fail with cudaErrorLaunchFailure (sticky, as a
// device fault is); its description is kept for the error message.
//
// Memory accesses are plain host accesses: in a sanitizer build an
// out-of-bounds read or write of a kernel is reported by AddressSanitizer with
// the kernel's stack, which is what a device page fault cannot give.
#include <cstdint>
#include <functional>
#include <string>

#include <vector_types.h>

namespace dgemma::cuda_emu {

// What the kernel code sees as threadIdx, blockIdx, blockDim and gridDim.
struct ThreadContext {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim{1, 1, 1};
  dim3 grid_dim{1, 1, 1};
};

// The running emulated thread's context (null outside a kernel).
const ThreadContext* current_context();

// Runs `body` once per thread of every block of the grid, each block with
// `dynamic_shared_bytes` of dynamic shared memory (dynamic_shared()). Returns
// "" on success, else the description of the fault (also recorded for
// last_fault()). Grid, block and shared memory limits are checked by the
// caller.
std::string run_grid(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body,
                     size_t dynamic_shared_bytes = 0);

// The running block's dynamic shared memory (`extern __shared__` on a GPU;
// DGEMMA_DYNAMIC_SHARED): 256-byte aligned, filled with 0xFF bytes when each
// block starts (its contents are undefined on a GPU: a read before a write
// gives NaN), null when the launch asked for none.
void* dynamic_shared();

// Barriers and the warp exchange, called by the device builtins.
void sync_block();
// Publishes `bits` for the lanes of `mask`, waits for all of them and
// returns the bits published by `src_lane`.
uint64_t warp_exchange(unsigned mask, uint64_t bits, unsigned src_lane);
// Ends the running thread with a fault (never returns to the kernel).
[[noreturn]] void thread_fault(const std::string& what);

// The description of the last fault of a kernel on this thread ("" if none).
std::string last_fault();

}  // namespace dgemma::cuda_emu
