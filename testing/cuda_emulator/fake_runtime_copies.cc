// Emulated copies and memsets (fake_runtime_internal.h): checked against the
// allocation map, run at once or in stream order, staged from pageable host
// memory as the driver does.
#include "cuda_emulator/fake_runtime_internal.h"

#include <cstring>
#include <memory>

#include "cuda_emulator/launch_status.h"

namespace dgemma::cuda_emu {
namespace {

bool range_ok_locked(Device& d, uintptr_t a, size_t bytes) { return find_locked(d, a, bytes) != nullptr; }

// Device-side ranges of a copy must be allocated; host-side ones are the
// caller's memory (pageable, or pinned: see fake_runtime_internal.h).
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
}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return emu::copy(dst, src, n, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  if (!emu::stream_ok(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  return emu::copy(dst, src, n, kind, s);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) { return emu::fill(p, value, n, s); }

cudaError_t cudaMemset(void* p, int value, size_t n) { return emu::fill(p, value, n, nullptr); }
