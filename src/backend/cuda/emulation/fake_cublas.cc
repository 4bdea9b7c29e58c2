// cuBLAS on the emulated device (fake_cublas.h): a plain fp32 GEMM with the
// argument checks of the real library (and the device a handle belongs to),
// so that the backend's column-major mapping of its row-major products
// (transposes, leading dimensions, chunk offsets) is exercised without a GPU.
#include "backend/cuda/emulation/fake_cublas.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/emulation/launch_status.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  int device = 0;  // current when it was created
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
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublas_set_math_mode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublas_gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                              cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                              cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  (void)algo;
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F ||
      (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  // Stored shapes: A is m×k (k×m when transposed), B is k×n (n×k).
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < std::max<int64_t>(1, a_rows) || ldb < std::max<int64_t>(1, b_rows) ||
      ldc < std::max(1, m) || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (handle->device != current_device()) {  // its work would go to another device's memory
    illegal_address("cublasGemmEx: handle of device " + std::to_string(handle->device) + " used while device " +
                    std::to_string(current_device()) + " is current");
    return CUBLAS_STATUS_SUCCESS;
  }
  if (!launch_begins("cublasGemmEx", dim3(1), dim3(1), handle->stream)) return CUBLAS_STATUS_EXECUTION_FAILED;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const bool reads_ab = k > 0 && al != 0.0f;
  auto inside = [](const void* p, int64_t elems) { return elems == 0 || device_range_ok(p, size_t(elems) * 4); };
  const char* outside = nullptr;
  if (reads_ab && !inside(A, span(a_rows, a_cols, lda))) outside = "A";
  else if (reads_ab && !inside(B, span(b_rows, b_cols, ldb))) outside = "B";
  else if (!inside(C, span(m, n, ldc))) outside = "C";
  if (outside) {
    illegal_address(std::string("cublasGemmEx: matrix ") + outside + " (m=" + std::to_string(m) + " n=" +
                    std::to_string(n) + " k=" + std::to_string(k) + " lda=" + std::to_string(lda) + " ldb=" +
                    std::to_string(ldb) + " ldc=" + std::to_string(ldc) + ") reaches outside its device allocation");
    return CUBLAS_STATUS_SUCCESS;  // the fault shows at the next synchronization
  }
  const auto* a = static_cast<const float*>(A);
  const auto* b = static_cast<const float*>(B);
  auto* c = static_cast<float*>(C);
  std::vector<float> acc(static_cast<size_t>(m));
  for (int64_t j = 0; j < n; ++j) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    if (reads_ab) {
      for (int64_t p = 0; p < k; ++p) {
        const float bv = tb ? b[p * ldb + j] : b[j * ldb + p];
        for (int64_t i = 0; i < m; ++i) acc[size_t(i)] += (ta ? a[i * lda + p] : a[p * lda + i]) * bv;
      }
    }
    float* cj = c + j * ldc;
    for (int64_t i = 0; i < m; ++i) cj[i] = be == 0.0f ? al * acc[size_t(i)] : al * acc[size_t(i)] + be * cj[i];
  }
  return CUBLAS_STATUS_SUCCESS;
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
