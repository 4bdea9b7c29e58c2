#include "backend/cpu/cpu_levels.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/int8_dot.h"
#include "backend/cpu/isa_kernels.h"
#include "backend/cpu/quant_simd.h"

namespace dgemma::cpu {
namespace {

// The highest level with kernels in this build on this CPU: the level files
// compile to nothing off x86-64.
CpuIsa top_level() {
#if defined(__x86_64__)
  return detected_isa();
#else
  return CpuIsa::kScalar;
#endif
}

CpuLevelKernels row(CpuIsa isa) {
  const CpuFeatures& f = cpu_features();
  CpuLevelKernels k;
  k.isa = isa;
  // The int8-dot products take the widest integer dot the CPU has within the
  // level: VNNI where present, AMX-INT8 tiles at the AMX level.
  Int8DotLevel int8 = Int8DotLevel::kPortable;
  if (isa >= CpuIsa::kAmx && f.amx_int8)
    int8 = Int8DotLevel::kAmxInt8;
  else if (isa >= CpuIsa::kAvx512)
    int8 = f.avx512_vnni ? Int8DotLevel::kAvx512Vnni : Int8DotLevel::kAvx512;
  else if (isa >= CpuIsa::kAvx2)
    int8 = f.avx_vnni ? Int8DotLevel::kAvxVnni : Int8DotLevel::kAvx2;
  k.int8_dot = &int8_dot_table(int8);
  k.quant = &quant_table(isa >= CpuIsa::kAvx512 ? QuantLevel::kAvx512
                         : isa >= CpuIsa::kAvx2 ? QuantLevel::kAvx2
                                                : QuantLevel::kPortable);
#if defined(__x86_64__)
  switch (isa) {
    case CpuIsa::kScalar: break;
    case CpuIsa::kAvx2: k.dense = avx2::table(); break;
    case CpuIsa::kAvx512: k.dense = avx512::table(); break;
    case CpuIsa::kAvx512Bf16: k.dense = avx512bf16::table(); break;
    case CpuIsa::kAmx: k.dense = amx::table(); break;
  }
#endif
  return k;
}

}  // namespace

const CpuLevelKernels& cpu_level_kernels(CpuIsa isa) {
  // Rows only for the levels the CPU runs: a level's tables are compiled for
  // its ISA and never touched otherwise.
  static const std::vector<CpuLevelKernels> rows = [] {
    std::vector<CpuLevelKernels> v;
    for (int l = 0; l <= int(top_level()); ++l) v.push_back(row(CpuIsa(l)));
    return v;
  }();
  return rows[size_t(std::min(int(clamp_isa(isa)), int(top_level())))];
}

}  // namespace dgemma::cpu
