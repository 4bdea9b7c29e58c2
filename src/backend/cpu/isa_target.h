#pragma once
// The one way a per-ISA kernel file is compiled (docs/performance.md §2.1):
// the file includes <immintrin.h>, then opens a target region with
// DGEMMA_ISA_BEGIN("avx2,fma,f16c") and closes it with DGEMMA_ISA_END();
// every function in between is compiled for those instruction sets while the
// rest of the library stays baseline x86-64 and calls in only after checking
// the CPU (cpu_levels.cc). GCC gets push_options/target; clang an attribute
// region. Under GCC the region also silences -Wuninitialized and
// -Wmaybe-uninitialized: GCC 12's AVX-512 headers build their "undefined"
// operands by self-initialization, which it reports at every inlined
// intrinsic (GCC bug 105593, fixed in GCC 13).
#define DGEMMA_ISA_PRAGMA(...) _Pragma(#__VA_ARGS__)

#if defined(__clang__)
#define DGEMMA_ISA_BEGIN(features) \
  DGEMMA_ISA_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define DGEMMA_ISA_END() DGEMMA_ISA_PRAGMA(clang attribute pop)
#else
#define DGEMMA_ISA_BEGIN(features)                                  \
  DGEMMA_ISA_PRAGMA(GCC push_options)                               \
  DGEMMA_ISA_PRAGMA(GCC diagnostic push)                            \
  DGEMMA_ISA_PRAGMA(GCC diagnostic ignored "-Wuninitialized")       \
  DGEMMA_ISA_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized") \
  DGEMMA_ISA_PRAGMA(GCC target(features))
#define DGEMMA_ISA_END()                \
  DGEMMA_ISA_PRAGMA(GCC diagnostic pop) \
  DGEMMA_ISA_PRAGMA(GCC pop_options)
#endif
