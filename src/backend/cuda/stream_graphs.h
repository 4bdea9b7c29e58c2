#pragma once
// What lets the CUDA backend run a step as CUDA graphs (docs/cuda.md §2):
//  - StreamGraphs captures a run of stream work (the ops between two host
//    waits) into a graph and launches it; the next run with the same launches
//    in the same order (the same step shape) updates the instantiated graph
//    with the new arguments (cudaGraphExecUpdate) instead of instantiating
//    one, so a step costs the GPU one graph launch instead of one launch per
//    kernel, and the host a capture;
//  - DeviceBlockCache hands out device memory without a CUDA call (a capture
//    may not allocate or free): freed blocks are kept by size and reused in
//    stream order, as the stream-ordered pool did;
//  - PinnedStaging holds host inputs in pinned memory while their copies wait
//    in the stream, and outputs on their way to the host until the wait
//    (a graph's copy cannot read or write pageable memory), recycled after
//    each full wait.
// None of them allocates while a capture is on: where they would, they say so
// (null, false) and the backend ends the capture first.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace dgemma::cuda {

class StreamGraphs {
 public:
  explicit StreamGraphs(size_t max_graphs = 8) : max_graphs_(max_graphs) {}
  ~StreamGraphs();
  StreamGraphs(const StreamGraphs&) = delete;
  StreamGraphs& operator=(const StreamGraphs&) = delete;

  bool capturing() const { return capturing_; }
  // Starts capturing the work of `stream` (relaxed mode: other threads'
  // CUDA calls are not restricted).
  cudaError_t begin(cudaStream_t stream);
  // Adds one launch (kernel, cuBLAS call, copy) to the key of the captured
  // run: runs with the same key are updated in place of a new instantiation.
  void note(const char* what, const unsigned grid[3], unsigned block, uint64_t bytes);
  // Ends the capture, if any, and launches it on `stream`: an instantiated
  // graph of the same key is updated (instantiated anew if the update is
  // refused), else one is instantiated, the least recently used dropped
  // beyond max_graphs. A run without work launches nothing.
  cudaError_t end_and_launch(cudaStream_t stream);
  // Ends a capture, if any, dropping its work (the context broke or the
  // backend goes away).
  void abandon(cudaStream_t stream);

  int64_t launches() const { return launches_; }
  int64_t instantiations() const { return instantiations_; }
  int64_t updates() const { return updates_; }

 private:
  struct Cached {
    uint64_t key = 0;
    cudaGraphExec_t exec = nullptr;
    uint64_t used = 0;
  };
  size_t max_graphs_;
  bool capturing_ = false;
  uint64_t key_ = 0, clock_ = 0;
  int64_t nodes_ = 0;
  std::vector<Cached> cache_;
  int64_t launches_ = 0, instantiations_ = 0, updates_ = 0;
};

class DeviceBlockCache {
 public:
  // A kept block of `bytes` rounded up to the size class, or null (allocate
  // one with cudaMalloc of rounded(bytes) and adopt it).
  void* take(size_t bytes);
  static size_t rounded(size_t bytes);
  void adopt(void* p, size_t bytes) { size_of_[p] = rounded(bytes); }
  // Keeps a block of this cache for reuse; false if it is not one of them.
  bool give(void* p);
  // cudaFree of every kept block (not during a capture); the device must be
  // idle or the blocks unused by queued work (after a wait).
  void release_kept();
  ~DeviceBlockCache();
  int64_t kept_bytes() const { return kept_bytes_; }

 private:
  std::unordered_map<void*, size_t> size_of_;  // every block, by address
  std::unordered_map<size_t, std::vector<void*>> kept_;
  int64_t kept_bytes_ = 0;
};

class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  // A copy of host[0, bytes) in pinned memory that stays untouched until
  // recycle(); null when no block has room (grow, outside a capture).
  const void* stage(const void* host, size_t bytes);
  // Room for `bytes` (an output copied to the host), or null as stage().
  void* reserve(size_t bytes);
  cudaError_t grow(size_t bytes);
  // Every staged copy was read (after a full wait): the blocks are free.
  void recycle();

 private:
  struct Block {
    unsigned char* p = nullptr;
    size_t bytes = 0, used = 0;
  };
  std::vector<Block> blocks_;
};

}  // namespace dgemma::cuda
