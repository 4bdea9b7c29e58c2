#pragma once
// The CPU dispatch levels as one table: per level (core/cpu_features.h,
// CpuIsa) the kernels every path of the CPU backend runs at that level — the
// dense fp32/bf16 building blocks, the int8-dot products and the quantized
// weights' expansion and tile products (docs/performance.md §2.1).
// cpu_level_kernels() is the only place that maps a level to its kernels;
// the backend resolves its level once (its isa cap) and hands the row to
// every kernel through its context, so a cap applies to all of them.
#include "core/cpu_features.h"

namespace dgemma::cpu {

struct IsaKernels;  // isa_kernels.h
struct Int8DotIsa;  // int8_dot.h
struct QuantIsa;    // quant_simd.h

struct CpuLevelKernels {
  CpuIsa isa = CpuIsa::kScalar;
  // Null at the scalar level: the reference kernels (cpu_kernels.h) run.
  const IsaKernels* dense = nullptr;
  const Int8DotIsa* int8_dot = nullptr;  // never null (the portable one at the scalar level)
  const QuantIsa* quant = nullptr;       // never null (the portable one at the scalar level)
};

// The row of `isa` clamped to what the running CPU executes (clamp_isa).
const CpuLevelKernels& cpu_level_kernels(CpuIsa isa);

}  // namespace dgemma::cpu
