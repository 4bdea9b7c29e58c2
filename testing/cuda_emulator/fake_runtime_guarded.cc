// Guarded device memory (DGEMMA_CUDA_EMULATED_MEMORY=guarded, described in
// fake_runtime_internal.h): one reserved region the host cannot access but
// inside the device's windows, and the fault handler that names the
// allocation a host access hit.
#include "cuda_emulator/fake_runtime_internal.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace dgemma::cuda_emu {
namespace {

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

}  // namespace

bool guarded_memory() {
  static const bool guarded = env_switch("DGEMMA_CUDA_EMULATED_MEMORY", "plain", "guarded");
  return guarded;
}

size_t page_size() {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return page;
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

DeviceAccess::DeviceAccess() : on_(guarded_memory()) {
  if (!on_) return;
  Device& d = device();
  std::lock_guard lock(d.mu);
  if (d.open_windows++ == 0) set_access_locked(d, PROT_READ | PROT_WRITE);
}

DeviceAccess::~DeviceAccess() {
  if (!on_) return;
  Device& d = device();
  std::lock_guard lock(d.mu);
  if (--d.open_windows == 0) set_access_locked(d, PROT_NONE);
}

}  // namespace dgemma::cuda_emu
