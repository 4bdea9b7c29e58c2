// cuBLAS on the emulated device (fake_cublas.h): a plain fp32 GEMM (bf16
// operands widened exactly, single or strided-batched) with the
// argument checks of the real library (and the device a handle belongs to),
// so that the backend's column-major mapping of its row-major products
// (transposes, leading dimensions, chunk offsets) is exercised without a GPU.
#include "cuda_emulator/fake_cublas.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_emulator/launch_status.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  int device = 0;  // current when it was created
  void* workspace = nullptr;
};

namespace dgemma::cuda_emu {
namespace {

// Elements spanned by a column-major rows×cols matrix with leading dimension ld.
int64_t span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 || cols == 0 ? 0 : (cols - 1) * ld + rows; }

}  // namespace

cublasStatus_t cublas_create(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext;
  (*handle)->device = current_device();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublas_destroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublas_set_stream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  handle->workspace = nullptr;  // back to the default workspace
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublas_set_workspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace && (bytes == 0 || !device_range_ok(workspace, bytes))) return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublas_set_math_mode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

// Element i of a matrix of fp32 or bf16 values, as fp32 (bf16 widens exactly).
float element(const void* p, bool bf16, int64_t i) {
  if (!bf16) return static_cast<const float*>(p)[i];
  const uint32_t bits = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The checks and the product of one call: `batch` products at the strides.
cublasStatus_t gemm(const char* name, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                    int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda, long long stride_a,
                    const void* B, cudaDataType Btype, int ldb, long long stride_b, const void* beta, void* C,
                    cudaDataType Ctype, int ldc, long long stride_c, int batch, cublasComputeType_t compute) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool bf16 = Atype == CUDA_R_16BF;
  if ((Atype != CUDA_R_32F && Atype != CUDA_R_16BF) || Btype != Atype || Ctype != CUDA_R_32F ||
      (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const int64_t esize = bf16 ? 2 : 4;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  // Stored shapes: A is m×k (k×m when transposed), B is k×n (n×k).
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max<int64_t>(1, a_rows) ||
      ldb < std::max<int64_t>(1, b_rows) || ldc < std::max(1, m) || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  if (handle->device != current_device()) {  // its work would go to another device's memory
    illegal_address(std::string(name) + ": handle of device " + std::to_string(handle->device) + " used while device " +
                    std::to_string(current_device()) + " is current");
    return CUBLAS_STATUS_SUCCESS;
  }
  if (!launch_begins(name, dim3(1), dim3(1), handle->stream)) return CUBLAS_STATUS_EXECUTION_FAILED;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (handle->stream && cudaStreamIsCapturing(handle->stream, &capture) == cudaSuccess &&
      capture == cudaStreamCaptureStatusActive && !handle->workspace) {
    refuse_in_capture(handle->stream, std::string(name) +
                                          " captured without a workspace of its own (cuBLAS allocates "
                                          "its default one in the graph: cublasSetWorkspace)");
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  // alpha and beta are read at the call (host pointers, as cuBLAS's default
  // pointer mode); the product runs in stream order (deferred streams).
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  enqueue_work(
      handle->stream,
      [=] {
        const bool reads_ab = k > 0 && al != 0.0f;
        std::vector<float> acc(static_cast<size_t>(m));
        for (int64_t q = 0; q < batch; ++q) {
          const char* a = static_cast<const char*>(A) + q * stride_a * esize;
          const char* b = static_cast<const char*>(B) + q * stride_b * esize;
          float* c = static_cast<float*>(C) + q * stride_c;
          auto inside = [](const void* p, int64_t elems, int64_t size) {
            return elems == 0 || device_range_ok(p, size_t(elems * size));
          };
          const char* outside = nullptr;
          if (reads_ab && !inside(a, span(a_rows, a_cols, lda), esize))
            outside = "A";
          else if (reads_ab && !inside(b, span(b_rows, b_cols, ldb), esize))
            outside = "B";
          else if (!inside(c, span(m, n, ldc), 4))
            outside = "C";
          if (outside) {
            illegal_address(std::string(name) + ": matrix " + outside + " of product " + std::to_string(q) +
                            " (m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                            " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                            " ldc=" + std::to_string(ldc) + ") reaches outside its device allocation");
            return;  // the fault shows at the next synchronization
          }
          for (int64_t j = 0; j < n; ++j) {
            std::fill(acc.begin(), acc.end(), 0.0f);
            if (reads_ab) {
              for (int64_t p = 0; p < k; ++p) {
                const float bv = element(b, bf16, tb ? p * ldb + j : j * ldb + p);
                for (int64_t i = 0; i < m; ++i) acc[size_t(i)] += element(a, bf16, ta ? i * lda + p : p * lda + i) * bv;
              }
            }
            float* cj = c + j * ldc;
            for (int64_t i = 0; i < m; ++i) cj[i] = be == 0.0f ? al * acc[size_t(i)] : al * acc[size_t(i)] + be * cj[i];
          }
        }
      },
      name);
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublas_gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                              cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                              cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
              Ctype, ldc, 0, 1, compute);
}

cublasStatus_t cublas_gemm_strided_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                              int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                              int lda, long long stride_a, const void* B, cudaDataType Btype, int ldb,
                                              long long stride_b, const void* beta, void* C, cudaDataType Ctype,
                                              int ldc, long long stride_c, int batch, cublasComputeType_t compute,
                                              cublasGemmAlgo_t) {
  return gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, stride_a, B, Btype,
              ldb, stride_b, beta, C, Ctype, ldc, stride_c, batch, compute);
}

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char* cublas_status_string(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "unknown error";
  }
}

}  // namespace dgemma::cuda_emu
