// The GPU's ceilings at the model's real shapes (docs/cuda.md §7), measured
// in one run so that `dgemma bench step --backend cuda` can be read against
// them: HBM read and copy bandwidth, the launch cost of a kernel (plain and
// replayed from a CUDA graph), and cuBLAS matrix products at the shapes of one
// decoder step (canvas of 256 rows, hidden 2816, vocabulary 262144, experts
// 128 × top-8 as 128 products of 16 rows) in fp32 pedantic math (the backend's
// exact mode) and with bf16 inputs, fp32 accumulation on the tensor cores.
//
//   dgemma_cuda_roofline [--json FILE] [--quick]
//
// Prints a table; --json writes the same figures. Built with the CUDA backend
// (scripts/gpu-check.sh runs it); without a device it says so and exits 2.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(x)                                                                                            \
  do {                                                                                                           \
    cudaError_t e_ = (x);                                                                                        \
    if (e_ != cudaSuccess) {                                                                                     \
      std::fprintf(stderr, "roofline: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                                              \
    }                                                                                                            \
  } while (0)
#define CHECK_BLAS(x)                                                                                               \
  do {                                                                                                              \
    cublasStatus_t s_ = (x);                                                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                              \
      std::fprintf(stderr, "roofline: %s failed: %s (%s:%d)\n", #x, cublasGetStatusString(s_), __FILE__, __LINE__); \
      std::exit(1);                                                                                                 \
    }                                                                                                               \
  } while (0)

// Sums float4s grid-stride, so every byte is read once; one store per block
// keeps the compiler from dropping the loads.
__global__ void read_kernel(const float4* __restrict__ p, int64_t n, float* out) {
  float acc = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.678f) out[blockIdx.x] = acc;
}

__global__ void empty_kernel() {}

__global__ void fill_kernel(float* p, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = scale * float((i * 2654435761u) % 1000u) / 1000.0f - 0.5f * scale;
}

__global__ void to_bf16_kernel(const float* src, __nv_bfloat16* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  // Mean milliseconds of `reps` runs of fn after `warm` untimed ones.
  template <class F>
  double ms(F fn, int warm, int reps) {
    for (int i = 0; i < warm; ++i) fn();
    CHECK_CUDA(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) fn();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
    return double(t) / reps;
  }
};

struct Gemm {
  const char* name;
  int64_t m, n, k;  // out[m, n] = x[m, k] · W[n, k]ᵀ (row major), `batch` of them
  int batch;
  bool soft;  // out[m, n] = probs[m, k] · table[k, n] (the soft embedding)
  double weight_bytes_bf16() const { return double(n) * double(k) * 2.0 * batch; }
  double flop() const { return 2.0 * double(m) * double(n) * double(k) * batch; }
};

struct Result {
  std::string name;
  double ms = 0, tflops = 0, gbps = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else {
      std::fprintf(stderr, "usage: dgemma_cuda_roofline [--json FILE] [--quick]\n");
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "roofline: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, %.1f GiB, compute capability %d.%d\n", prop.name, prop.multiProcessorCount,
              double(prop.totalGlobalMem) / (1 << 30), prop.major, prop.minor);
  const int reps = quick ? 3 : 10;
  Timer timer;

  // HBM: read 4 GiB, copy 2 GiB (bytes read + written counted).
  const int64_t read_bytes = int64_t(quick ? 1 : 4) << 30;
  float4* buf = nullptr;
  float* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, size_t(read_bytes)));
  CHECK_CUDA(cudaMalloc(&sink, 1 << 20));
  CHECK_CUDA(cudaMemset(buf, 0, size_t(read_bytes)));
  const int grid = prop.multiProcessorCount * 8;
  const double read_ms = timer.ms([&] { read_kernel<<<grid, 512>>>(buf, read_bytes / 16, sink); }, 2, reps);
  const int64_t half = read_bytes / 2;
  auto* bytes = reinterpret_cast<char*>(buf);
  const double copy_ms = timer.ms(
      [&] { CHECK_CUDA(cudaMemcpyAsync(bytes + half, bytes, size_t(half), cudaMemcpyDeviceToDevice)); }, 2, reps);
  CHECK_CUDA(cudaFree(buf));
  const double read_gbps = double(read_bytes) / (read_ms * 1e6);
  const double copy_gbps = 2.0 * double(half) / (copy_ms * 1e6);
  std::printf("HBM read %.0f GB/s, device copy %.0f GB/s (read + written)\n", read_gbps, copy_gbps);

  // Launch cost: 2000 empty kernels, launched one by one and as a graph.
  constexpr int kLaunches = 2000;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  auto launches = [&] {
    for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 32, 0, stream>>>();
  };
  launches();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaEventRecord(e0, stream));
  launches();
  CHECK_CUDA(cudaEventRecord(e1, stream));
  CHECK_CUDA(cudaEventSynchronize(e1));
  float plain_ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&plain_ms, e0, e1));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launches();
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaEventRecord(e0, stream));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaEventRecord(e1, stream));
  CHECK_CUDA(cudaEventSynchronize(e1));
  float graph_ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&graph_ms, e0, e1));
  const double plain_us = 1000.0 * plain_ms / kLaunches, graph_us = 1000.0 * graph_ms / kLaunches;
  std::printf("launch: %.2f us per kernel on a stream, %.2f us in a graph\n", plain_us, graph_us);

  // Matrix products at the shapes of one decoder step.
  const std::vector<Gemm> shapes = {
      {"q_proj sliding 256x4096x2816", 256, 4096, 2816, 1, false},
      {"o_proj full 256x2816x8192", 256, 2816, 8192, 1, false},
      {"dense gate+up 256x4224x2816", 256, 4224, 2816, 1, false},
      {"dense down 256x2816x2112", 256, 2816, 2112, 1, false},
      {"lm_head 256x262144x2816", 256, 262144, 2816, 1, false},
      {"soft_embedding 256x2816x262144", 256, 2816, 262144, 1, true},
      {"experts gate_up 128x(16x1408x2816)", 16, 1408, 2816, 128, false},
      {"experts down 128x(16x2816x704)", 16, 2816, 704, 128, false},
  };
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  CHECK_BLAS(cublasSetStream(blas, stream));
  std::vector<Result> fp32, bf16;
  for (const Gemm& g : shapes) {
    const int64_t na = g.m * g.k * g.batch, nw = g.n * g.k * g.batch, nc = g.m * g.n * g.batch;
    float *a = nullptr, *w = nullptr, *c = nullptr;
    __nv_bfloat16 *ab = nullptr, *wb = nullptr;
    CHECK_CUDA(cudaMalloc(&a, size_t(na) * 4));
    CHECK_CUDA(cudaMalloc(&w, size_t(nw) * 4));
    CHECK_CUDA(cudaMalloc(&c, size_t(nc) * 4));
    CHECK_CUDA(cudaMalloc(&ab, size_t(na) * 2));
    CHECK_CUDA(cudaMalloc(&wb, size_t(nw) * 2));
    fill_kernel<<<1024, 256, 0, stream>>>(a, na, 1.0f);
    fill_kernel<<<1024, 256, 0, stream>>>(w, nw, 0.05f);
    to_bf16_kernel<<<1024, 256, 0, stream>>>(a, ab, na);
    to_bf16_kernel<<<1024, 256, 0, stream>>>(w, wb, nw);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int mode = 0; mode < 2; ++mode) {
      const bool half = mode == 1;
      CHECK_BLAS(cublasSetMathMode(blas, half ? CUBLAS_DEFAULT_MATH : CUBLAS_PEDANTIC_MATH));
      const cudaDataType in_t = half ? CUDA_R_16BF : CUDA_R_32F;
      const void* A = half ? static_cast<const void*>(ab) : a;
      const void* W = half ? static_cast<const void*>(wb) : w;
      const float one = 1.0f, zero = 0.0f;
      auto run = [&] {
        if (g.soft) {
          // Column major: outᵀ (n×m) = tableᵀ (n×k, ld n) · probsᵀ (k×m, ld k).
          CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, int(g.n), int(g.m), int(g.k), &one, W, in_t, int(g.n),
                                  A, in_t, int(g.k), &zero, c, CUDA_R_32F, int(g.n), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
        } else {
          // outᵀ (n×m) = W (k×n read transposed) · xᵀ (k×m).
          CHECK_BLAS(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(g.n), int(g.m), int(g.k), &one, W,
                                                in_t, int(g.k), g.n * g.k, A, in_t, int(g.k), g.m * g.k, &zero, c,
                                                CUDA_R_32F, int(g.n), g.m * g.n, g.batch, CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT));
        }
      };
      run();
      CHECK_CUDA(cudaStreamSynchronize(stream));
      CHECK_CUDA(cudaEventRecord(e0, stream));
      for (int r = 0; r < reps; ++r) run();
      CHECK_CUDA(cudaEventRecord(e1, stream));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
      Result r;
      r.name = g.name;
      r.ms = double(t) / reps;
      r.tflops = g.flop() / (r.ms * 1e9);
      r.gbps = g.weight_bytes_bf16() * (half ? 1.0 : 2.0) / (r.ms * 1e6);
      (half ? bf16 : fp32).push_back(r);
    }
    CHECK_CUDA(cudaFree(a));
    CHECK_CUDA(cudaFree(w));
    CHECK_CUDA(cudaFree(c));
    CHECK_CUDA(cudaFree(ab));
    CHECK_CUDA(cudaFree(wb));
  }
  std::printf("%-36s %10s %9s %10s | %10s %9s %10s | %6s\n", "cuBLAS product", "fp32 ms", "TFLOP/s", "weight GB/s",
              "bf16 ms", "TFLOP/s", "weight GB/s", "speedup");
  for (size_t i = 0; i < shapes.size(); ++i)
    std::printf("%-36s %10.4f %9.1f %10.0f | %10.4f %9.1f %10.0f | %5.1fx\n", shapes[i].name, fp32[i].ms,
                fp32[i].tflops, fp32[i].gbps, bf16[i].ms, bf16[i].tflops, bf16[i].gbps, fp32[i].ms / bf16[i].ms);
  if (json_path) {
    FILE* f = std::fopen(json_path, "w");
    if (!f) {
      std::fprintf(stderr, "roofline: cannot write %s\n", json_path);
      return 1;
    }
    std::fprintf(f, "{\"device\": \"%s\", \"sms\": %d, \"hbm_read_gbps\": %.1f, \"hbm_copy_gbps\": %.1f,\n", prop.name,
                 prop.multiProcessorCount, read_gbps, copy_gbps);
    std::fprintf(f, " \"launch_us\": %.3f, \"graph_launch_us\": %.3f, \"gemms\": [\n", plain_us, graph_us);
    for (size_t i = 0; i < shapes.size(); ++i)
      std::fprintf(f,
                   "  {\"shape\": \"%s\", \"fp32_ms\": %.5f, \"fp32_tflops\": %.2f, \"bf16_ms\": %.5f, "
                   "\"bf16_tflops\": %.2f, \"bf16_weight_gbps\": %.1f}%s\n",
                   shapes[i].name, fp32[i].ms, fp32[i].tflops, bf16[i].ms, bf16[i].tflops, bf16[i].gbps,
                   i + 1 < shapes.size() ? "," : "");
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  cublasDestroy(blas);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return 0;
}
