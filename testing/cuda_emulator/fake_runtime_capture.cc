// Emulated stream capture and graphs (fake_runtime_internal.h): a capturing
// stream's work becomes the nodes of a graph, replayed in stream order by
// cudaGraphLaunch; what breaks a capture on a GPU invalidates it.
#include "cuda_emulator/fake_runtime_internal.h"

#include <cstdio>

#include "cuda_emulator/launch_status.h"

namespace dgemma::cuda_emu {
namespace {

void invalidate_capture(cudaStream_t s, const std::string& why) {
  if (!s->capture_invalidated)
    std::fprintf(stderr, "dgemma CUDA emulator: device %d: stream capture invalidated: %s\n", s->device, why.c_str());
  s->capture_invalidated = true;
}

}  // namespace

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
// the capture (see fake_runtime_internal.h); cudaSuccess otherwise.
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

void refuse_in_capture(cudaStream_t stream, const std::string& why) {
  if (!(stream && stream_ok(stream) && capture_refuses(stream, why))) fail(cudaErrorStreamCaptureUnsupported);
}

}  // namespace dgemma::cuda_emu

namespace emu = dgemma::cuda_emu;

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  (void)mode;  // every mode is checked as strictly (see fake_runtime_internal.h)
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
