#include "backend/cuda/stream_graphs.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace dgemma::cuda {

// ---- StreamGraphs ---------------------------------------------------------------

StreamGraphs::~StreamGraphs() {
  for (const Cached& c : cache_) cudaGraphExecDestroy(c.exec);
}

cudaError_t StreamGraphs::begin(cudaStream_t stream) {
  if (capturing_) return cudaSuccess;
  const cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) return e;
  capturing_ = true;
  key_ = 0xcbf29ce484222325ull;  // FNV-1a
  nodes_ = 0;
  return cudaSuccess;
}

void StreamGraphs::note(const char* what, const unsigned grid[3], unsigned block, uint64_t bytes) {
  if (!capturing_) return;
  auto mix = [this](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      key_ ^= (v >> (8 * i)) & 0xff;
      key_ *= 0x100000001b3ull;
    }
  };
  for (const char* c = what; *c; ++c) mix(uint8_t(*c));
  mix(grid ? (uint64_t(grid[0]) << 32) ^ (uint64_t(grid[1]) << 16) ^ grid[2] : 0);
  mix(block);
  mix(bytes);
  ++nodes_;
}

cudaError_t StreamGraphs::end_and_launch(cudaStream_t stream) {
  if (!capturing_) return cudaSuccess;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(stream, &graph);
  if (e != cudaSuccess) return e;
  if (nodes_ == 0) return cudaGraphDestroy(graph);
  auto it = std::find_if(cache_.begin(), cache_.end(), [&](const Cached& c) { return c.key == key_; });
  if (it != cache_.end()) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(it->exec, graph, &info) == cudaSuccess) {
      ++updates_;
    } else {
      cudaGetLastError();  // a refused update is not an error: instantiate anew
      cudaGraphExecDestroy(it->exec);
      cache_.erase(it);
      it = cache_.end();
    }
  }
  if (it == cache_.end()) {
    if (cache_.size() >= max_graphs_) {
      auto lru = std::min_element(cache_.begin(), cache_.end(),
                                  [](const Cached& a, const Cached& b) { return a.used < b.used; });
      cudaGraphExecDestroy(lru->exec);
      cache_.erase(lru);
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess) {
      cudaGraphDestroy(graph);
      return e;
    }
    ++instantiations_;
    cache_.push_back({key_, exec, 0});
    it = cache_.end() - 1;
  }
  it->used = ++clock_;
  cudaGraphDestroy(graph);
  e = cudaGraphLaunch(it->exec, stream);
  if (e == cudaSuccess) ++launches_;
  return e;
}

void StreamGraphs::abandon(cudaStream_t stream) {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

// ---- DeviceBlockCache -------------------------------------------------------------

// Size classes: multiples of 512 bytes up to 4 KiB, then eight per power of
// two (at most 12.5 % of a block unused), so that buffers of nearby sizes
// (prompts of other lengths) share blocks.
size_t DeviceBlockCache::rounded(size_t bytes) {
  if (bytes <= 4096) return std::max<size_t>(512, (bytes + 511) / 512 * 512);
  const size_t step = std::bit_floor(bytes - 1) / 8;
  return (bytes + step - 1) / step * step;
}

void* DeviceBlockCache::take(size_t bytes) {
  auto it = kept_.find(rounded(bytes));
  if (it == kept_.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  kept_bytes_ -= int64_t(it->first);
  return p;
}

bool DeviceBlockCache::give(void* p) {
  auto it = size_of_.find(p);
  if (it == size_of_.end()) return false;
  kept_[it->second].push_back(p);
  kept_bytes_ += int64_t(it->second);
  return true;
}

void DeviceBlockCache::release_kept() {
  for (auto& [size, blocks] : kept_)
    for (void* p : blocks) {
      size_of_.erase(p);
      cudaFree(p);
    }
  kept_.clear();
  kept_bytes_ = 0;
}

DeviceBlockCache::~DeviceBlockCache() { release_kept(); }

// ---- PinnedStaging ----------------------------------------------------------------

PinnedStaging::~PinnedStaging() {
  for (const Block& b : blocks_) cudaFreeHost(b.p);
}

void* PinnedStaging::reserve(size_t bytes) {
  const size_t need = (bytes + 255) / 256 * 256;
  for (Block& b : blocks_) {
    if (b.bytes - b.used < need) continue;
    unsigned char* at = b.p + b.used;
    b.used += need;
    return at;
  }
  return nullptr;
}

const void* PinnedStaging::stage(const void* host, size_t bytes) {
  void* at = reserve(bytes);
  if (at) std::memcpy(at, host, bytes);
  return at;
}

cudaError_t PinnedStaging::grow(size_t bytes) {
  Block b;
  b.bytes = std::max<size_t>(size_t(1) << 20, (bytes + 255) / 256 * 256);
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, b.bytes, cudaHostAllocDefault);
  if (e != cudaSuccess) return e;
  b.p = static_cast<unsigned char*>(p);
  blocks_.push_back(b);
  return cudaSuccess;
}

void PinnedStaging::recycle() {
  for (Block& b : blocks_) b.used = 0;
}

}  // namespace dgemma::cuda
