// AVX-512 (F/BW/VL/DQ) level of the CPU kernels: fp32 FMA GEMM on fp32 or
// bf16 weight panels (8 × 32 register tile), vector math, attention tile.
// Compiled under a target region; the rest of the library stays baseline
// x86-64 and only calls in after checking the CPU (isa_kernels.cc).
#include "backend/cpu/isa_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
// GCC 12's AVX-512 headers build their "undefined" operands by self-
// initialization, which -Wuninitialized reports at every inlined intrinsic
// (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

namespace dgemma::cpu::avx512 {
namespace {
#define DGEMMA_SIMD_AVX512 1
#include "backend/cpu/simd-inl.h"
#include "backend/cpu/gemm-inl.h"
#include "backend/cpu/ops-inl.h"
#undef DGEMMA_SIMD_AVX512
}  // namespace

const IsaKernels* table() {
  static const IsaKernels t = level_table(CpuIsa::kAvx512);
  return &t;
}

}  // namespace dgemma::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

#else  // not x86-64

namespace dgemma::cpu::avx512 {
const IsaKernels* table() { return nullptr; }
}  // namespace dgemma::cpu::avx512

#endif
