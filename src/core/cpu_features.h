#pragma once
// What the CPU can execute, detected once at run time (cpuid + xgetbv via the
// compiler's __builtin_cpu_supports), and the dispatch levels the CPU kernels
// are written for. The library is compiled for baseline x86-64; kernels for a
// level are compiled with per-region target attributes and only called when
// the running CPU supports that level.
#include <optional>
#include <string>
#include <string_view>

namespace dgemma {

// Ordered: each level includes the ones below it.
enum class CpuIsa : int {
  kScalar = 0,      // portable C++ (the reference kernels)
  kAvx2 = 1,        // AVX2 + FMA + F16C
  kAvx512 = 2,      // AVX-512 F/BW/VL/DQ (+ AVX2 level)
  kAvx512Bf16 = 3,  // AVX-512 level + AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16)
  kAmx = 4,         // AVX512_BF16 level + AMX-BF16 tiles (TDPBF16PS), enabled by the OS for this process
};

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false;
  bool avx_vnni = false;  // the VEX (256-bit) VNNI of CPUs without AVX-512 (and some with)
  // AMX tiles with bf16 products, and the kernel let this process use them
  // (Linux: arch_prctl ARCH_REQ_XCOMP_PERM for the tile data, asked once here).
  bool amx_bf16 = false;
  bool amx_int8 = false;  // and int8 products on them (TDPBSSD, TDPBSUD: int8-dot)
  std::string brand;      // e.g. "AMD EPYC 9xx5 ..." (empty when unknown)
  int logical_cores = 1;
};

// Detected once (thread-safe static).
const CpuFeatures& cpu_features();
// The highest level the running CPU supports.
CpuIsa detected_isa();
// The level kernels use by default: detected_isa(), capped by the environment
// variable DGEMMA_CPU_ISA (scalar | avx2 | avx512 | avx512bf16 | amx) when set, so
// that a slower path can be exercised on a fast machine. A cap above what the
// CPU supports is clamped to detected_isa().
CpuIsa default_isa();
// min(requested, detected_isa()).
CpuIsa clamp_isa(CpuIsa requested);

std::string_view isa_name(CpuIsa isa);
std::optional<CpuIsa> parse_isa(std::string_view name);

}  // namespace dgemma
