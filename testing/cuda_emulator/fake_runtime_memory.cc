// Emulated device memory (fake_runtime_internal.h): allocations and their
// map, memory pools, stream-ordered frees and pinned host memory.
#include "cuda_emulator/fake_runtime_internal.h"

#include <cstdlib>
#include <cstring>

#include "cuda_emulator/launch_status.h"

namespace dgemma::cuda_emu {
namespace {

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

}  // namespace

// The allocation holding [a, a + bytes), or null.
const Allocation* find_locked(Device& d, uintptr_t a, size_t bytes) {
  auto it = d.allocations.upper_bound(a);
  if (it == d.allocations.begin()) return nullptr;
  --it;
  const size_t size = it->second.bytes;
  const bool inside = a >= it->first && a - it->first <= size && bytes <= size - (a - it->first);
  return inside ? &it->second : nullptr;
}

bool device_range_ok(const void* p, size_t bytes) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  const Allocation* a = find_locked(d, reinterpret_cast<uintptr_t>(p), bytes);
  return a && a->device == t_device;
}

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

}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

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
