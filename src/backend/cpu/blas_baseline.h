#pragma once
// OpenBLAS as a speed baseline for `dgemma bench kernels`, opened at run time
// (dlopen) so that neither the library nor the CLI links a BLAS: when
// libopenblas is installed the GEMM figures are reported against its
// cblas_sgemm, otherwise against the scalar reference kernel.
#include <cstdint>
#include <memory>
#include <string>

namespace dgemma::cpu {

class BlasBaseline {
 public:
  // nullptr when no OpenBLAS library can be opened (or lacks cblas_sgemm).
  static std::unique_ptr<BlasBaseline> open();
  ~BlasBaseline();
  BlasBaseline(const BlasBaseline&) = delete;
  BlasBaseline& operator=(const BlasBaseline&) = delete;

  // C[m,n] = A[m,k] · B[n,k]ᵀ, all fp32 row-major (our linear's layout).
  void sgemm_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) const;
  void set_threads(int threads) const;
  // The file that was opened and OpenBLAS's own configuration string
  // (kernel core, threading), for the report.
  const std::string& library() const { return library_; }
  std::string config() const;

 private:
  BlasBaseline() = default;
  void* handle_ = nullptr;
  std::string library_;
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
  Sgemm sgemm_ = nullptr;
  void (*set_threads_)(int) = nullptr;
  char* (*get_config_)() = nullptr;
};

}  // namespace dgemma::cpu
