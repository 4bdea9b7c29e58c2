#include "backend/cpu/isa_kernels.h"

namespace dgemma::cpu {

const IsaKernels* isa_kernels(CpuIsa isa) {
  // Never touch a level's table (compiled for that ISA) unless the CPU runs it.
  if (int(isa) > int(detected_isa())) return nullptr;
#if defined(__x86_64__)  // the level files compile to nothing elsewhere
  switch (isa) {
    case CpuIsa::kScalar: return nullptr;
    case CpuIsa::kAvx2: return avx2::table();
    case CpuIsa::kAvx512: return avx512::table();
    case CpuIsa::kAvx512Bf16: return avx512bf16::table();
    case CpuIsa::kAmx: return amx::table();
  }
#endif
  return nullptr;
}

}  // namespace dgemma::cpu
