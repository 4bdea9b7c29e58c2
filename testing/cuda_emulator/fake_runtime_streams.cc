// Emulated streams and events (fake_runtime_internal.h): work runs at once,
// or is queued per stream and runs when the host waits for it
// (DGEMMA_CUDA_EMULATED_STREAMS=deferred); events record the host's clock.
#include "cuda_emulator/fake_runtime_internal.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_emulator/launch_status.h"

namespace dgemma::cuda_emu {

bool stream_ok(cudaStream_t s) {
  if (!s) return true;  // the legacy default stream
  Device& d = device();
  std::lock_guard lock(d.mu);
  return d.streams.count(s) > 0;
}

// Work goes to a stream of the current device (else the runtime reports an
// invalid handle: a backend that forgot cudaSetDevice).
bool stream_on_current_device(cudaStream_t s) { return stream_ok(s) && (!s || s->device == t_device); }

// DGEMMA_CUDA_EMULATED_STREAMS: "immediate" (default) or "deferred".
bool deferred_streams() {
  static const bool deferred = env_switch("DGEMMA_CUDA_EMULATED_STREAMS", "immediate", "deferred");
  return deferred;
}

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

}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

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
