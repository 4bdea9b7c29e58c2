// The emulated CUDA device (DGEMMA_CUDA=EMULATE, testing/cuda_emulator)
// that runs the CUDA backend's tests without a GPU: block barriers, warp
// shuffles, exited threads, the faults a GPU would hang or misbehave on
// (deadlocks, shuffles naming exited lanes), sticky errors, the runtime's
// checks of copies and frees, and the cuBLAS subset (all transpose cases
// against a plain product, leading-dimension checks, reads outside an
// allocation). A fault breaks the emulated device for the whole process, as a
// device fault breaks a CUDA context, so those cases run in a death-test child.
#include <gtest/gtest.h>

#if DGEMMA_CUDA_EMULATION
#include "cuda_emulator/device_builtins.h"
#include "cuda_emulator/fake_cublas.h"
#endif

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/test_rng.h"

namespace dgemma {
namespace {

#if !DGEMMA_CUDA_EMULATION

TEST(CudaEmulator, NotBuilt) { GTEST_SKIP() << "this build does not emulate the CUDA device (DGEMMA_CUDA=EMULATE)"; }

#else

// ---- test kernels ---------------------------------------------------------

// out[b·n + t] = the value thread t+1 (mod n) of the same block wrote.
__global__ void rotate_through_shared(int* out) {
  __shared__ int buf[256];
  const unsigned t = threadIdx.x, n = blockDim.x;
  buf[t] = int(blockIdx.x * 1000 + t);
  __syncthreads();
  out[blockIdx.x * n + t] = buf[(t + 1) % n];
}

__global__ void shuffle_xor(int lane_mask, int* out) {
  const unsigned t = threadIdx.x;
  out[t] = __shfl_xor_sync(0xffffffffu, int(t), lane_mask);
}

// Tree sum of each warp, as the backend's kernels reduce.
__global__ void warp_sums(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) out[threadIdx.x / 32] = v;
}

// Threads past `live` exit before the barrier; the others must not wait for them.
__global__ void early_exit_then_sync(unsigned live, int* out) {
  __shared__ int count;
  if (threadIdx.x >= live) return;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  if (threadIdx.x == 1) count = 7;
  __syncthreads();
  out[threadIdx.x] = count;
}

// Lanes 0-15 wait at __syncthreads, lanes 16-31 in a full-warp shuffle.
__global__ void divergent_barriers(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
  }
}

// A full-mask shuffle after half the warp exited.
__global__ void shuffle_with_exited_lanes(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

// A shuffle among the upper half-warp, then one among the whole warp: the
// lower lanes wait at the second while the upper ones are in the first.
__global__ void partial_then_full_shuffle(int* out) {
  int v = int(threadIdx.x);
  if (threadIdx.x % 32 >= 16) v = __shfl_xor_sync(0xffff0000u, v, 1);
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 16);
}

__global__ void write_at(int* p, int64_t index) { p[index] = 1; }

// One warp: c[16×16] = a[16×16] · b[16×16] in bf16 (b column major), fp32.
__global__ void wmma_tile(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> fb;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc;
  nvcuda::wmma::fill_fragment(acc, 1.0f);
  nvcuda::wmma::load_matrix_sync(fa, a, 16);
  nvcuda::wmma::load_matrix_sync(fb, b, 16);
  nvcuda::wmma::mma_sync(acc, fa, fb, acc);
  nvcuda::wmma::store_matrix_sync(c, acc, 16, nvcuda::wmma::mem_row_major);
}

// c += a · b for one tile, through memory: the accumulator loaded from c,
// multiplied into, stored back (a read-modify-write of the tile).
__global__ void wmma_accumulate_in_memory(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> fb;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc;
  nvcuda::wmma::load_matrix_sync(acc, c, 16, nvcuda::wmma::mem_row_major);
  nvcuda::wmma::load_matrix_sync(fa, a, 16);
  nvcuda::wmma::load_matrix_sync(fb, b, 16);
  nvcuda::wmma::mma_sync(acc, fa, fb, acc);
  nvcuda::wmma::store_matrix_sync(c, acc, 16, nvcuda::wmma::mem_row_major);
}

__global__ void set_value(int* p, int v) { p[threadIdx.x] = v; }

// out[b·n + t] = the value thread t+1 (mod n) wrote into dynamic shared
// memory, and flags[b] = whether a float of it read NaN before the writes (the
// buffer's undefined contents).
__global__ void rotate_through_dynamic_shared(int* out, int* flags) {
  DGEMMA_DYNAMIC_SHARED(int, buf);
  const unsigned t = threadIdx.x, n = blockDim.x;
  if (t == 0) flags[blockIdx.x] = std::isnan(__int_as_float(buf[n]));
  __syncthreads();
  buf[t] = int(blockIdx.x * 1000 + t);
  __syncthreads();
  out[blockIdx.x * n + t] = buf[(t + 1) % n];
}

// counts[v % bins] += 1 for every v, and the largest v, from every thread of
// every block at once.
__global__ void histogram(const int* values, int n, int bins, int* counts, int* largest, float* sum) {
  for (int k = int(blockIdx.x * blockDim.x + threadIdx.x); k < n; k += int(gridDim.x * blockDim.x)) {
    atomicAdd(&counts[values[k] % bins], 1);
    atomicMax(largest, values[k]);
    atomicAdd(sum, 0.5f);
  }
}

// One thread of the grid claims `owner` (compare-and-swap from -1); every
// thread counts whether it won, lowers `least` to its index and leaves its
// index in `last`.
__global__ void claim(int* owner, int* winners, int* least, int* last) {
  const int me = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (atomicCAS(owner, -1, me) == -1) atomicAdd(winners, 1);
  atomicMin(least, me);
  atomicExch(last, me);
}

// ---- helpers ----------------------------------------------------------------

template <class T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> to_host(const T* dev, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Runs the current test alone in a child process with `var`=`value` set,
// for settings the emulator reads once per process; true when it passed.
bool rerun_with(const char* var, const char* value) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  const std::string cmd = std::string(var) + "=" + value + " '" + exe + "' --gtest_filter=" + info->test_suite_name() +
                          "." + info->name() + " > /dev/null";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

// Whether this process runs deferred streams; else runs the current test again
// in a child that does (its result counts as this test's) and returns false.
bool deferred_streams_or_rerun() {
  const char* mode = std::getenv("DGEMMA_CUDA_EMULATED_STREAMS");
  if (mode && std::string(mode) == "deferred") return true;
  EXPECT_TRUE(rerun_with("DGEMMA_CUDA_EMULATED_STREAMS", "deferred")) << "the deferred-mode child failed";
  return false;
}

// ---- kernels ---------------------------------------------------------------

TEST(CudaEmulator, SyncthreadsPublishesSharedMemoryPerBlock) {
  constexpr unsigned kThreads = 256, kBlocks = 3;
  int* out = device_alloc<int>(kThreads * kBlocks);
  DGEMMA_LAUNCH(rotate_through_shared, kBlocks, kThreads, nullptr)(out);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> h = to_host(out, kThreads * kBlocks);
  for (unsigned b = 0; b < kBlocks; ++b)
    for (unsigned t = 0; t < kThreads; ++t)
      ASSERT_EQ(h[b * kThreads + t], int(b * 1000 + (t + 1) % kThreads)) << "block " << b << " thread " << t;
  cudaFree(out);
}

TEST(CudaEmulator, ShuffleXorExchangesWithinEachWarp) {
  int* out = device_alloc<int>(96);
  for (int lane_mask : {1, 5, 16, 31}) {
    DGEMMA_LAUNCH(shuffle_xor, 1, 96, nullptr)(lane_mask, out);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<int> h = to_host(out, 96);
    for (int t = 0; t < 96; ++t) ASSERT_EQ(h[size_t(t)], t ^ lane_mask) << "lane mask " << lane_mask << " thread " << t;
  }
  cudaFree(out);
}

TEST(CudaEmulator, ShufflesWithDifferentMasksDoNotMeet) {
  int* out = device_alloc<int>(64);
  DGEMMA_LAUNCH(partial_then_full_shuffle, 1, 64, nullptr)(out);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> h = to_host(out, 64);
  for (int t = 0; t < 64; ++t) {
    const int partner = t ^ 16;  // the value the partner lane held after the first shuffle
    const int want = partner % 32 >= 16 ? partner ^ 1 : partner;
    ASSERT_EQ(h[size_t(t)], want) << "thread " << t;
  }
  cudaFree(out);
}

TEST(CudaEmulator, WarpTreeSumAddsEveryLane) {
  std::vector<float> in(128);
  Rng rng(3);
  for (float& v : in) v = float(int(rng() % 1000)) / 8.0f;  // exact in fp32 in any order
  float* d_in = device_alloc<float>(128);
  float* d_out = device_alloc<float>(4);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), 128 * 4, cudaMemcpyHostToDevice), cudaSuccess);
  DGEMMA_LAUNCH(warp_sums, 1, 128, nullptr)(d_in, d_out);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> h = to_host(d_out, 4);
  for (int w = 0; w < 4; ++w) {
    float want = 0;
    for (int l = 0; l < 32; ++l) want += in[size_t(w * 32 + l)];
    EXPECT_EQ(h[size_t(w)], want) << "warp " << w;
  }
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST(CudaEmulator, ExitedThreadsCountAsArrivedAtSyncthreads) {
  int* out = device_alloc<int>(64);
  ASSERT_EQ(cudaMemset(out, 0xff, 64 * 4), cudaSuccess);
  DGEMMA_LAUNCH(early_exit_then_sync, 1, 64, nullptr)(10u, out);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> h = to_host(out, 64);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(h[size_t(t)], t < 10 ? 7 : -1) << "thread " << t;
  cudaFree(out);
}

TEST(CudaEmulator, BadLaunchConfigurationIsNotSticky) {
  int* out = device_alloc<int>(4);
  DGEMMA_LAUNCH(write_at, 1, 2048, nullptr)(out, int64_t(0));  // 2048 threads per block
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // cleared, the device still works
  DGEMMA_LAUNCH(write_at, 1, 1, nullptr)(out, int64_t(2));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(to_host(out, 4)[2], 1);
  cudaFree(out);
}

// Exit status 0 when the deadlock became a sticky launch failure.
int divergent_barriers_fault() {
  int* out = device_alloc<int>(32);
  DGEMMA_LAUNCH(divergent_barriers, 1, 32, nullptr)(out);
  // Sticky, as a device fault: every later call reports it.
  const bool sticky = cudaStreamSynchronize(nullptr) == cudaErrorLaunchFailure &&
                      cudaGetLastError() == cudaErrorLaunchFailure &&
                      cudaMemcpy(out, out, 4, cudaMemcpyDeviceToDevice) == cudaErrorLaunchFailure;
  return sticky ? 0 : 1;
}

TEST(CudaEmulatorDeathTest, DivergentBarriersAreADeadlockFault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(divergent_barriers_fault()), ::testing::ExitedWithCode(0),
              "divergent_barriers .*deadlock: 16 of 32 live threads wait at __syncthreads, 16 in a warp shuffle");
}

int shuffle_with_exited_lanes_fault() {
  int* out = device_alloc<int>(32);
  DGEMMA_LAUNCH(shuffle_with_exited_lanes, 1, 32, nullptr)(out);
  return cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1;
}

TEST(CudaEmulatorDeathTest, ShuffleNamingAnExitedLaneIsAFault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(shuffle_with_exited_lanes_fault()), ::testing::ExitedWithCode(0),
              "shuffle_with_exited_lanes .*mask 0xffffffff names lane 16, which has exited");
}

// Exit status 0 when work for device 1 is refused while device 0 is current
// (a backend that forgot cudaSetDevice), and accepted once device 1 is.
int stream_of_another_device() {
  setenv("DGEMMA_CUDA_EMULATED_DEVICES", "2", 1);  // read once, at the first call of this child
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n != 2) return 1;
  cudaStream_t s1 = nullptr;
  if (cudaSetDevice(1) != cudaSuccess || cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) != cudaSuccess) return 2;
  int* p = device_alloc<int>(4);
  cudaSetDevice(0);
  DGEMMA_LAUNCH(write_at, 1, 1, s1)(p, int64_t(0));
  if (cudaGetLastError() != cudaErrorInvalidResourceHandle) return 3;
  if (cudaMemsetAsync(p, 0, 16, s1) != cudaErrorInvalidResourceHandle) return 4;
  cudaGetLastError();
  cudaSetDevice(1);
  DGEMMA_LAUNCH(write_at, 1, 1, s1)(p, int64_t(0));
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

TEST(CudaEmulatorDeathTest, WorkForAnotherDeviceIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(stream_of_another_device()), ::testing::ExitedWithCode(0),
              "write_at launched into a stream that is not of the current device 0");
}

#if defined(__SANITIZE_ADDRESS__)
void write_past_a_buffer() {
  int* out = device_alloc<int>(16);
  DGEMMA_LAUNCH(write_at, 1, 1, nullptr)(out, int64_t(16));
}

// What a device page fault cannot say: the kernel, the access and the buffer.
TEST(CudaEmulatorDeathTest, OutOfBoundsWriteOfAKernelIsReportedBySanitizer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(write_past_a_buffer(), "heap-buffer-overflow(.|\n)*write_at");
}
#endif

// Guarded device memory (DGEMMA_CUDA_EMULATED_MEMORY=guarded,
// fake_runtime_guarded.cc):
// a copy and a kernel use the buffer; host code that then reads the device
// pointer dies with the allocation named, as it would crash (or read
// garbage) on a GPU, where the plain emulated device would let it pass.
void read_device_memory_on_the_host() {
  int* d = device_alloc<int>(16);
  const std::vector<int> h(16, 7);
  if (cudaMemcpy(d, h.data(), 64, cudaMemcpyHostToDevice) != cudaSuccess) std::exit(3);
  DGEMMA_LAUNCH(write_at, 1, 1, nullptr)(d, int64_t(2));
  if (cudaGetLastError() != cudaSuccess || to_host(d, 16)[2] != 1) std::exit(4);
  volatile int v = d[3];  // the bug: a device pointer read on the host
  std::exit(v == 7 ? 5 : 6);
}

// The child re-runs this binary (threadsafe style) with the environment set
// here: guarded memory, and a sanitizer that lets the emulator's handler see
// the fault before its own report.
TEST(CudaEmulatorDeathTest, HostDereferenceOfDeviceMemoryIsCaughtInGuardedMode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string saved_asan = asan ? asan : "";
  setenv("DGEMMA_CUDA_EMULATED_MEMORY", "guarded", 1);
  setenv("ASAN_OPTIONS", (saved_asan + (saved_asan.empty() ? "" : ":") + "allow_user_segv_handler=1").c_str(), 1);
  EXPECT_DEATH(read_device_memory_on_the_host(),
               "host code read or wrote emulated device memory at 0x[0-9a-f]+, 12 bytes into a 64-byte allocation of "
               "device 0");
  unsetenv("DGEMMA_CUDA_EMULATED_MEMORY");
  if (asan)
    setenv("ASAN_OPTIONS", saved_asan.c_str(), 1);
  else
    unsetenv("ASAN_OPTIONS");
}

// ---- runtime ---------------------------------------------------------------

TEST(CudaEmulator, CopiesAndFreesAreCheckedAgainstAllocations) {
  char* d = device_alloc<char>(64);
  std::vector<char> h(128);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(h.data(), d + 32, 33, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(h.data(), h.data() + 64, 8, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d + 32, h.data(), 32, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaFree(d + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);  // double free
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  cudaGetLastError();
}

// ---- cuBLAS ------------------------------------------------------------------

// Column-major reference: C = alpha·op(A)·op(B) + beta·C.
std::vector<float> reference_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& A,
                                  int lda, const std::vector<float>& B, int ldb, float beta, std::vector<float> C,
                                  int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int p = 0; p < k; ++p)
        s += double(ta ? A[size_t(i * lda + p)] : A[size_t(p * lda + i)]) *
             double(tb ? B[size_t(p * ldb + j)] : B[size_t(j * ldb + p)]);
      float& c = C[size_t(j * ldc + i)];
      c = float(alpha * s + (beta == 0.0f ? 0.0 : double(beta) * c));
    }
  return C;
}

TEST(CudaEmulator, GemmMatchesAPlainProductForEveryTransposeCase) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cuda_emu::cublas_create(&h), CUBLAS_STATUS_SUCCESS);
  Rng rng(11);
  const int m = 7, n = 5, k = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
      std::vector<float> A(size_t(lda * (ta ? m : k))), B(size_t(ldb * (tb ? k : n))), C(size_t(ldc * n));
      for (float& v : A) v = rng.uniform_real(-1.0f, 1.0f);
      for (float& v : B) v = rng.uniform_real(-1.0f, 1.0f);
      for (float& v : C) v = rng.uniform_real(-1.0f, 1.0f);
      for (float beta : {0.0f, 0.5f}) {
        float* dA = device_alloc<float>(A.size());
        float* dB = device_alloc<float>(B.size());
        float* dC = device_alloc<float>(C.size());
        cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice);
        std::vector<float> C0 = C;
        if (beta == 0.0f) std::fill(C0.begin(), C0.end(), std::nanf(""));  // must not be read
        cudaMemcpy(dC, C0.data(), C0.size() * 4, cudaMemcpyHostToDevice);
        const float alpha = 1.5f;
        ASSERT_EQ(cuda_emu::cublas_gemm_ex(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                           &alpha, dA, CUDA_R_32F, lda, dB, CUDA_R_32F, ldb, &beta, dC, CUDA_R_32F, ldc,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  CUBLAS_STATUS_SUCCESS);
        const std::vector<float> got = to_host(dC, C.size());
        const std::vector<float> want = reference_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < m; ++i)
            ASSERT_NEAR(got[size_t(j * ldc + i)], want[size_t(j * ldc + i)], 1e-5)
                << "ta " << ta << " tb " << tb << " beta " << beta << " at (" << i << ", " << j << ")";
        cudaFree(dA);
        cudaFree(dB);
        cudaFree(dC);
      }
    }
  cuda_emu::cublas_destroy(h);
}

TEST(CudaEmulator, GemmChecksLeadingDimensionsAndTypes) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cuda_emu::cublas_create(&h), CUBLAS_STATUS_SUCCESS);
  float* d = device_alloc<float>(256);
  const float one = 1, zero = 0;
  auto gemm = [&](cublasOperation_t ta, int lda, cudaDataType t) {
    return cuda_emu::cublas_gemm_ex(h, ta, CUBLAS_OP_N, 4, 4, 8, &one, d, t, lda, d, CUDA_R_32F, 8, &zero, d + 128,
                                    CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(gemm(CUBLAS_OP_N, 4, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(CUBLAS_OP_N, 3, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  EXPECT_EQ(gemm(CUBLAS_OP_T, 4, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE);  // lda < k when transposed
  EXPECT_EQ(gemm(CUBLAS_OP_T, 8, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(CUBLAS_OP_N, 4, CUDA_R_16BF), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaFree(d);
  cuda_emu::cublas_destroy(h);
}

// bf16 operands are widened exactly, single and strided-batched.
TEST(CudaEmulator, Bf16AndBatchedGemmsMatchAPlainProduct) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cuda_emu::cublas_create(&h), CUBLAS_STATUS_SUCCESS);
  const int m = 5, n = 3, k = 7, batch = 3;
  std::vector<uint16_t> ha(size_t(m * k * batch)), hb(size_t(k * n * batch));
  Rng rng(3);
  for (auto& v : ha) v = uint16_t(0x3f00 + rng() % 256);  // bf16 values in [0.5, 1)
  for (auto& v : hb) v = uint16_t(0xbf00 + rng() % 256);  // in (-1, -0.5]
  auto widen = [](uint16_t b) {
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  auto* a = device_alloc<uint16_t>(ha.size());
  auto* b = device_alloc<uint16_t>(hb.size());
  float* c = device_alloc<float>(size_t(m * n * batch));
  ASSERT_EQ(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  const float one = 1, zero = 0;
  ASSERT_EQ(cuda_emu::cublas_gemm_strided_batched_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_16BF, m,
                                                     m * k, b, CUDA_R_16BF, k, k * n, &zero, c, CUDA_R_32F, m, m * n,
                                                     batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = to_host(c, size_t(m * n * batch));
  for (int q = 0; q < batch; ++q)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float want = 0;
        for (int p = 0; p < k; ++p)
          want += widen(ha[size_t(q * m * k + p * m + i)]) * widen(hb[size_t(q * k * n + j * k + p)]);
        EXPECT_EQ(got[size_t(q * m * n + j * m + i)], want) << q << " " << i << " " << j;
      }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cuda_emu::cublas_destroy(h);
}

TEST(CudaEmulator, WmmaMultipliesTiles) {
  std::vector<__nv_bfloat16> ha(256), hb(256);
  for (int i = 0; i < 256; ++i) {
    ha[size_t(i)] = __float2bfloat16(float(i % 7) - 3.0f);
    hb[size_t(i)] = __float2bfloat16(float(i % 5) * 0.5f);
  }
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 512), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 512), cudaSuccess);
  float* c = device_alloc<float>(256);
  ASSERT_EQ(cudaMemcpy(a, ha.data(), 512, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, hb.data(), 512, cudaMemcpyHostToDevice), cudaSuccess);
  DGEMMA_LAUNCH(wmma_tile, 1, 32, nullptr)
  (static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(b), c);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> got = to_host(c, 256);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 1.0f;  // the filled accumulator
      for (int k = 0; k < 16; ++k)
        want += __bfloat162float(ha[size_t(i * 16 + k)]) * __bfloat162float(hb[size_t(j * 16 + k)]);
      EXPECT_EQ(got[size_t(i * 16 + j)], want) << i << " " << j;
    }
  // Through memory: the tile gains the product once (every lane of the warp
  // loads before any stores), not once per lane.
  DGEMMA_LAUNCH(wmma_accumulate_in_memory, 1, 32, nullptr)
  (static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(b), c);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> twice = to_host(c, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(twice[size_t(i)], 2.0f * got[size_t(i)] - 1.0f) << i;
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

int wmma_on_a_misaligned_pointer() {
  void* a = nullptr;
  cudaMalloc(&a, 1024);
  float* c = device_alloc<float>(256);
  const auto* p = reinterpret_cast<const __nv_bfloat16*>(static_cast<char*>(a) + 16);  // 128-bit aligned only
  DGEMMA_LAUNCH(wmma_tile, 1, 32, nullptr)(p, p, c);
  return cudaStreamSynchronize(nullptr) == cudaErrorLaunchFailure ? 0 : 1;
}

TEST(CudaEmulatorDeathTest, WmmaNeedsAlignedPointers) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(wmma_on_a_misaligned_pointer()), ::testing::ExitedWithCode(0), "not 256-bit aligned");
}

TEST(CudaEmulator, EventsTimeTheWorkBetweenThem) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);  // never recorded
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // "work" of 20 ms between the records
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 15.0f);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
}

// DGEMMA_CUDA_EMULATED_STREAMS=deferred: a stream's work waits for the host
// to wait for it, so reads that skip the wait see stale data.
TEST(CudaEmulator, DeferredStreamsRunWorkWhenTheHostWaits) {
  if (!deferred_streams_or_rerun()) return;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d = device_alloc<int>(32);
  ASSERT_EQ(cudaMemset(d, 0, 32 * sizeof(int)), cudaSuccess);  // legacy stream: at once
  int host[32];
  for (int& v : host) v = 5;
  ASSERT_EQ(cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s), cudaSuccess);
  for (int& v : host) v = 6;                 // after the call: a pageable source was taken at the call
  DGEMMA_LAUNCH(set_value, 1, 16, s)(d, 7);  // the first 16 become 7
  EXPECT_EQ(d[0], 0) << "the kernel ran before the host waited";  // the emulator's device memory is host memory
  EXPECT_EQ(to_host(d, 1)[0], 0) << "a legacy-stream copy waited for a non-blocking stream";
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, e, e), cudaErrorNotReady);
  cudaGetLastError();
  int back[32] = {};
  ASSERT_EQ(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s),
            cudaSuccess);  // waits, as to pageable memory
  EXPECT_EQ(back[0], 7);
  EXPECT_EQ(back[20], 5);
  EXPECT_EQ(cudaEventElapsedTime(&ms, e, e), cudaSuccess);
  // A fault of queued work surfaces at the wait, and later work does not run.
  DGEMMA_LAUNCH(divergent_barriers, 1, 32, s)(d);  // a deadlock fault, once it runs
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the launch itself is valid";
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorLaunchFailure);
  std::exit(::testing::Test::HasFailure() ? 1 : 0);  // the context is broken: no teardown
}

// Exit status 0 when the read past the allocation became a sticky illegal address.
TEST(CudaEmulator, DynamicSharedMemoryIsPerBlockAndItsLimitNeedsTheOptIn) {
  const unsigned n = 64;
  int* out = device_alloc<int>(3 * n);
  int* flags = device_alloc<int>(3);
  // 2 × n ints of room: the kernel reads buf[n] before any write.
  DGEMMA_LAUNCH_SMEM(rotate_through_dynamic_shared, 3, n, 2 * n * sizeof(int), nullptr)(out, flags);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> got = to_host(out, 3 * n);
  for (unsigned b = 0; b < 3; ++b)
    for (unsigned t = 0; t < n; ++t) ASSERT_EQ(got[b * n + t], int(b * 1000 + (t + 1) % n)) << b << " " << t;
  EXPECT_EQ(to_host(flags, 3), std::vector<int>(3, 1)) << "each block starts with undefined (NaN) contents";

  // Over 48 KiB only after the opt-in, and never over 227 KiB.
  const size_t big = 100 << 10;
  DGEMMA_LAUNCH_SMEM(rotate_through_dynamic_shared, 1, n, big, nullptr)(out, flags);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  const void* fn = reinterpret_cast<const void*>(&rotate_through_dynamic_shared);
  ASSERT_EQ(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(big)), cudaSuccess);
  DGEMMA_LAUNCH_SMEM(rotate_through_dynamic_shared, 1, n, big, nullptr)(out, flags);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(to_host(out, 1)[0], 1);
  EXPECT_EQ(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 << 10), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFree(out);
  cudaFree(flags);
}

TEST(CudaEmulator, AtomicsFromEveryThreadOfEveryBlockAddUp) {
  const int n = 1000, bins = 7;
  std::vector<int> values(n);
  for (int k = 0; k < n; ++k) values[size_t(k)] = (k * 37) % 501;
  int* d_values = device_alloc<int>(n);
  int* counts = device_alloc<int>(bins + 1);  // the bins, then the largest value
  float* sum = device_alloc<float>(1);
  ASSERT_EQ(cudaMemcpy(d_values, values.data(), n * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(counts, 0, (bins + 1) * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(sum, 0, sizeof(float)), cudaSuccess);
  DGEMMA_LAUNCH(histogram, 3, 128, nullptr)(d_values, n, bins, counts, counts + bins, sum);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> want(bins + 1, 0);
  for (int v : values) {
    ++want[size_t(v % bins)];
    want[bins] = std::max(want[bins], v);
  }
  EXPECT_EQ(to_host(counts, bins + 1), want);
  EXPECT_EQ(to_host(sum, 1)[0], 0.5f * n);

  int* cells = device_alloc<int>(4);  // owner, winners, least, last
  const int init[4] = {-1, 0, 1 << 30, -1};
  ASSERT_EQ(cudaMemcpy(cells, init, sizeof init, cudaMemcpyHostToDevice), cudaSuccess);
  DGEMMA_LAUNCH(claim, 2, 64, nullptr)(cells, cells + 1, cells + 2, cells + 3);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> c = to_host(cells, 4);
  EXPECT_GE(c[0], 0);
  EXPECT_LT(c[0], 128);
  EXPECT_EQ(c[1], 1) << "more than one thread won the compare-and-swap";
  EXPECT_EQ(c[2], 0);
  EXPECT_GE(c[3], 0);
  cudaFree(d_values);
  cudaFree(counts);
  cudaFree(sum);
  cudaFree(cells);
}

// ---- stream capture, graphs and pinned memory (docs/cuda.md §6) ------------

cudaGraph_t capture_one(cudaStream_t s, int* d, int v) {
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  DGEMMA_LAUNCH(set_value, 1, 16, s)(d, v);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  return g;
}

TEST(CudaEmulator, CapturedWorkRunsWhenItsGraphIsLaunchedAndUpdatesTakeNewArguments) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d = device_alloc<int>(16);
  int* d2 = device_alloc<int>(16);
  ASSERT_EQ(cudaMemset(d, 0, 16 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d2, 0, 16 * sizeof(int)), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaErrorIllegalState);
  cudaGetLastError();
  DGEMMA_LAUNCH(set_value, 1, 16, s)(d, 7);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(to_host(d, 16)[0], 0) << "captured work ran during the capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  EXPECT_EQ(to_host(d, 16)[0], 0) << "instantiating ran the graph";
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(to_host(d, 16), std::vector<int>(16, 7));
  ASSERT_EQ(cudaMemset(d, 0, 16 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);  // replayed
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(to_host(d, 16)[15], 7);

  // The same kernel on other arguments: the update takes them.
  cudaGraph_t g2 = capture_one(s, d2, 9);
  cudaGraphExecUpdateResultInfo info{};
  ASSERT_EQ(cudaGraphExecUpdate(exec, g2, &info), cudaSuccess);
  EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 16 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(to_host(d2, 16)[3], 9);
  EXPECT_EQ(to_host(d, 16)[3], 0) << "the update kept the old arguments";

  // Another node count, or another kernel: refused, the exec unchanged.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  DGEMMA_LAUNCH(set_value, 1, 16, s)(d, 1);
  DGEMMA_LAUNCH(set_value, 1, 16, s)(d, 2);
  cudaGraph_t two = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &two), cudaSuccess);
  EXPECT_EQ(cudaGraphExecUpdate(exec, two, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  DGEMMA_LAUNCH(write_at, 1, 1, s)(d, int64_t(0));
  cudaGraph_t other = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &other), cudaSuccess);
  EXPECT_EQ(cudaGraphExecUpdate(exec, other, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorNodeTypeChanged);
  cudaGetLastError();
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(to_host(d, 16)[0], 0);

  for (cudaGraph_t x : {g, g2, two, other}) EXPECT_EQ(cudaGraphDestroy(x), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  cudaFree(d);
  cudaFree(d2);
  cudaStreamDestroy(s);
}

// Each call that breaks a capture on a GPU is refused and invalidates it;
// other streams go on (the relaxed mode), and a copy from pinned memory is
// read when the graph runs, not at the capture.
TEST(CudaEmulator, WhatBreaksACaptureIsRefusedAndInvalidatesIt) {
  cudaStream_t s = nullptr, other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  int* d = device_alloc<int>(16);
  int* spare = device_alloc<int>(16);
  int pageable[16] = {};
  int* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 16 * sizeof(int), cudaHostAllocDefault), cudaSuccess);
  cudaEvent_t ev = nullptr;
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  // A 2x2 product of d's first 4 floats' bits (the values do not matter).
  cublasHandle_t blas = nullptr;
  ASSERT_EQ(cuda_emu::cublas_create(&blas), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cuda_emu::cublas_set_stream(blas, s), CUBLAS_STATUS_SUCCESS);
  float* mat = device_alloc<float>(4);
  float* workspace = device_alloc<float>(64);
  auto product = [&] {
    const float one = 1.0f, zero = 0.0f;
    return cuda_emu::cublas_gemm_ex(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, mat, CUDA_R_32F, 2, mat, CUDA_R_32F,
                                    2, &zero, mat, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  const std::vector<std::pair<const char*, std::function<cudaError_t()> > > breakers = {
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(s); }},
      {"copy from pageable memory",
       [&] { return cudaMemcpyAsync(d, pageable, sizeof pageable, cudaMemcpyHostToDevice, s); }},
      {"copy to pageable memory",
       [&] { return cudaMemcpyAsync(pageable, d, sizeof pageable, cudaMemcpyDeviceToHost, s); }},
      {"cudaFree", [&] { return cudaFree(spare); }},
      {"cudaDeviceSynchronize", [&] { return cudaDeviceSynchronize(); }},
      {"cudaMemcpy", [&] { return cudaMemcpy(pageable, d, sizeof pageable, cudaMemcpyDeviceToHost); }},
      {"cudaEventRecord", [&] { return cudaEventRecord(ev, s); }},
      {"cuBLAS without a workspace",
       [&] { return product() == CUBLAS_STATUS_EXECUTION_FAILED ? cudaGetLastError() : cudaErrorUnknown; }},
  };
  for (const auto& [what, call] : breakers) {
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess) << what;
    DGEMMA_LAUNCH(set_value, 1, 16, s)(d, 3);
    EXPECT_EQ(call(), cudaErrorStreamCaptureUnsupported) << what;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated) << what;
    cudaGraph_t g = reinterpret_cast<cudaGraph_t>(1);
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated) << what;
    EXPECT_EQ(g, nullptr) << what;
    cudaGetLastError();
  }
  int probe = 0;  // a copy from a freed block fails
  EXPECT_EQ(cudaMemcpy(&probe, spare, sizeof probe, cudaMemcpyDeviceToHost), cudaSuccess)
      << "the refused cudaFree freed the block";

  // Allowed: other streams' waits and allocation; pinned copies; cuBLAS with
  // a workspace of its own.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  int* fresh = device_alloc<int>(16);
  ASSERT_EQ(cuda_emu::cublas_set_workspace(blas, workspace, 64 * sizeof(float)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(product(), CUBLAS_STATUS_SUCCESS);
  for (int k = 0; k < 16; ++k) pinned[k] = 1;
  ASSERT_EQ(cudaMemcpyAsync(d, pinned, 16 * sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  for (int k = 0; k < 16; ++k) pinned[k] = 2;  // before the launch: the graph's copy reads this
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(to_host(d, 16), std::vector<int>(16, 2));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  cudaEventDestroy(ev);
  for (int* p : {d, spare, fresh}) cudaFree(p);
  for (float* p : {mat, workspace}) cudaFree(p);
  cuda_emu::cublas_destroy(blas);
  cudaStreamDestroy(s);
  cudaStreamDestroy(other);
}

// Deferred streams: a copy from pinned memory reads it when the stream gets
// there, and a copy to pinned memory lands then, without waiting (as on a
// GPU; from and to pageable memory the copy is taken at the call and waited
// for: DeferredStreamsRunWorkWhenTheHostWaits).
TEST(CudaEmulator, PinnedCopiesRunInStreamOrder) {
  if (!deferred_streams_or_rerun()) return;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d = device_alloc<int>(16);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 16 * sizeof(int)), cudaSuccess);
  for (int k = 0; k < 16; ++k) pinned[k] = 4;
  ASSERT_EQ(cudaMemcpyAsync(d, pinned, 16 * sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  for (int k = 0; k < 16; ++k) pinned[k] = 5;  // too early on a GPU: the copy reads this
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(to_host(d, 16), std::vector<int>(16, 5));
  DGEMMA_LAUNCH(set_value, 1, 16, s)(d, 6);
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, 16 * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(pinned[0], 5) << "a copy to pinned memory waited for the stream";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(pinned[0], 6);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaErrorInvalidValue) << "a double free of pinned memory";
  cudaGetLastError();
  cudaFree(d);
  cudaStreamDestroy(s);
}

int gemm_reading_past_an_allocation() {
  cublasHandle_t h = nullptr;
  cuda_emu::cublas_create(&h);
  float* a = device_alloc<float>(31);  // 4×8 needs 32
  float* c = device_alloc<float>(16);
  const float one = 1, zero = 0;
  const cublasStatus_t s =
      cuda_emu::cublas_gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 8, &one, a, CUDA_R_32F, 4, a, CUDA_R_32F, 8, &zero, c,
                               CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(nullptr) == cudaErrorIllegalAddress ? 0 : 1;
}

TEST(CudaEmulatorDeathTest, GemmReadingPastAnAllocationIsAnIllegalAddress) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(gemm_reading_past_an_allocation()), ::testing::ExitedWithCode(0),
              "cudaErrorIllegalAddress: cublasGemmEx: matrix A .* reaches outside");
}

#endif  // DGEMMA_CUDA_EMULATION

}  // namespace
}  // namespace dgemma
