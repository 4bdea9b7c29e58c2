#include "core/cpu_features.h"

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dgemma {
namespace {

// Linux asks a process to request the AMX tile data state (XFEATURE 18)
// before it uses it; true when granted.
[[maybe_unused]] bool request_amx_tiles() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  f.logical_cores = int(std::max(1u, std::thread::hardware_concurrency()));
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // __builtin_cpu_supports checks both cpuid bits and that the OS saves the
  // wide registers (xgetbv), which a bare cpuid test would miss.
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) f.f16c = (c & bit_F16C) != 0;
  // AVX512_BF16 is leaf 7 sub-leaf 1, EAX bit 5 (not every compiler's
  // __builtin_cpu_supports knows "avx512bf16").
  if (f.avx512f && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a & (1u << 5)) != 0;
  // AVX-VNNI (the VEX-encoded vpdpwssd on 256 bits): the same leaf, EAX bit 4.
  if (f.avx2 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx_vnni = (a & (1u << 4)) != 0;
  // AMX: leaf 7 sub-leaf 0 EDX bits 22 (AMX-BF16), 24 (AMX-TILE) and 25
  // (AMX-INT8); the OS
  // must enable the tile state (XCR0 bits 17 and 18) and, on Linux, grant it
  // to the process before the first tile instruction.
  if (f.avx512_bf16 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) && (d & (1u << 24))) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    f.amx_bf16 = (lo & (3u << 17)) == (3u << 17) && request_amx_tiles();
    f.amx_int8 = f.amx_bf16 && (d & (1u << 25)) != 0;
  }
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      unsigned r[4];
      __get_cpuid(0x80000002u + i, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(brand + 16 * i, r, 16);
    }
    f.brand = brand;
    while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
    while (!f.brand.empty() && f.brand.front() == ' ') f.brand.erase(f.brand.begin());
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

CpuIsa detected_isa() {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx2 && f.fma && f.f16c)) return CpuIsa::kScalar;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return CpuIsa::kAvx2;
  if (!f.avx512_bf16) return CpuIsa::kAvx512;
  return f.amx_bf16 ? CpuIsa::kAmx : CpuIsa::kAvx512Bf16;
}

CpuIsa clamp_isa(CpuIsa requested) {
  const CpuIsa d = detected_isa();
  return int(requested) < int(d) ? requested : d;
}

CpuIsa default_isa() {
  static const CpuIsa isa = [] {
    const char* env = std::getenv("DGEMMA_CPU_ISA");
    if (env && *env) {
      if (auto p = parse_isa(env)) return clamp_isa(*p);
    }
    return detected_isa();
  }();
  return isa;
}

std::string_view isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Bf16: return "avx512bf16";
    case CpuIsa::kAmx: return "amx";
  }
  return "?";
}

std::optional<CpuIsa> parse_isa(std::string_view name) {
  for (CpuIsa i : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmx})
    if (isa_name(i) == name) return i;
  return std::nullopt;
}

}  // namespace dgemma
