// AVX2 + FMA level of the CPU kernels (the fallback for CPUs without AVX-512):
// fp32 FMA GEMM on fp32 or bf16 weight panels (6 × 16 register tile, two per
// 32-wide panel; bf16 panels in the kBF16Split column order), vector
// math, attention tile.
// Compiled under a target region; the rest of the library stays baseline
// x86-64 and only calls in after checking the CPU (cpu_levels.cc).
#include "backend/cpu/isa_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/isa_target.h"

DGEMMA_ISA_BEGIN("avx2,fma,f16c")

namespace dgemma::cpu::avx2 {
namespace {
#define DGEMMA_SIMD_AVX2 1
#include "backend/cpu/simd-inl.h"
#include "backend/cpu/gemm-inl.h"
#include "backend/cpu/ops-inl.h"
#undef DGEMMA_SIMD_AVX2
}  // namespace

const IsaKernels* table() {
  static const IsaKernels t = level_table(CpuIsa::kAvx2);
  return &t;
}

}  // namespace dgemma::cpu::avx2

DGEMMA_ISA_END()

#endif  // __x86_64__ (cpu_levels.cc calls the level only there)
