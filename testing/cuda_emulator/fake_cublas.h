#pragma once
// The cuBLAS functions the CUDA backend uses, for the emulated device
// (fake_cublas.cc). Same signatures as cublas_api.h, so that the backend's
// function table takes them in place of the dlopen'ed library.
#include <cublas_api.h>

namespace dgemma::cuda_emu {

cublasStatus_t cublas_create(cublasHandle_t* handle);
cublasStatus_t cublas_destroy(cublasHandle_t handle);
cublasStatus_t cublas_set_stream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublas_set_math_mode(cublasHandle_t handle, cublasMath_t mode);
// The handle's workspace: a device range of its own (cublasSetWorkspace;
// cublas_set_stream resets it, as cuBLAS does). A product captured into a
// graph without one invalidates the capture: cuBLAS would allocate its
// default workspace with cudaMallocAsync there (CUDA 12.2 and later), a
// memory node of the graph.
cublasStatus_t cublas_set_workspace(cublasHandle_t handle, void* workspace, size_t bytes);
// Column-major C = alpha·op(A)·op(B) + beta·C with fp32 matrices, or bf16 A
// and B, and fp32 compute only (CUBLAS_STATUS_NOT_SUPPORTED otherwise). Checks the leading
// dimensions as cuBLAS documents them (CUBLAS_STATUS_INVALID_VALUE), and
// that every matrix it reads or writes lies inside a device allocation (else
// a sticky cudaErrorIllegalAddress, as a faulting kernel would give). With
// beta == 0, C is not read (as in cuBLAS: NaN in C does not propagate).
cublasStatus_t cublas_gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                              cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                              cublasComputeType_t compute, cublasGemmAlgo_t algo);
// The same for `batch` products at element strides stride_a, stride_b,
// stride_c (cublasGemmStridedBatchedEx), each checked as one product.
// Both take fp32 matrices, or bf16 A and B (CUDA_R_16BF) with an fp32 C.
cublasStatus_t cublas_gemm_strided_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                              int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                              int lda, long long stride_a, const void* B, cudaDataType Btype, int ldb,
                                              long long stride_b, const void* beta, void* C, cudaDataType Ctype,
                                              int ldc, long long stride_c, int batch, cublasComputeType_t compute,
                                              cublasGemmAlgo_t algo);
const char* cublas_status_name(cublasStatus_t status);
const char* cublas_status_string(cublasStatus_t status);

}  // namespace dgemma::cuda_emu
