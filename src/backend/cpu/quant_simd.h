#pragma once
// The vector building blocks of the quantized kernels, one table per
// dispatch level (portable C++, AVX2 and AVX-512). The drivers in quant_gemm.cc and
// quant_dequant.cc own the loops over blocks, rows and threads; these
// functions only touch raw pointers, so nothing else is compiled for a wider
// ISA than the baseline (the reason the other CPU kernels keep their SIMD in
// separate target regions, isa_kernels.h).
//
// Every expansion function computes exactly the formula of
// dequantize_reference() with the same operations in the same order, so all
// levels give bit-identical weights (the affine formula is a fused
// multiply-add everywhere for that reason).
#include <cstdint>

namespace dgemma::cpu {

// 16 accumulator lanes per (row, weight row): a tile's partial sums are
// acc[(m·8 + j)·16 + l] (8 weight rows per tile, kQuantNr), reduced in a
// fixed order at the end.
inline constexpr int kQuantLanes = 16;
inline constexpr int kQuantTileRows = 8;

struct QuantIsa {
  const char* name;
  // acc[(m·8 + j)·16 + l] += Σ_{k < kc, k ≡ l (mod 16)} x[m·ldx + k] · w[j·ldw + k]
  // for m < M, j < 8; kc a multiple of 16.
  void (*tile_dot)(const float* x, int64_t ldx, int64_t M, const float* w, int64_t ldw, int64_t kc, float* acc);
  // n values (a multiple of 16) from n/2 bytes of 4-bit codes: out = lut[code]
  // · scale; element 2k is the high nibble of byte k when high_first (NF4),
  // else the low nibble.
  void (*nibbles_scaled)(const uint8_t* codes, int64_t n, bool high_first, const float* lut, float scale, float* out);
  // NVFP4: `blocks` blocks of 16 columns (8 bytes each, low nibble first):
  // out = (e2m1[code] · e4m3[scales[b]]) · g.
  void (*nvfp4_blocks)(const uint8_t* codes, const uint8_t* scales, int64_t blocks, float g, const float* e2m1,
                       const float* e4m3, float* out);
  // Affine group of n values (a multiple of 16): out = fma(s, q, b) with q the
  // 4-bit (low nibble first) or 8-bit code.
  void (*affine4)(const uint8_t* codes, int64_t n, float s, float b, float* out);
  void (*affine8)(const uint8_t* codes, int64_t n, float s, float b, float* out);
  // int8: out = s · q.
  void (*int8)(const int8_t* codes, int64_t n, float s, float* out);
  // FP8 E4M3: out = s · lut[code] (lut: the 256 E4M3 values), n a multiple
  // of 16.
  void (*fp8)(const uint8_t* codes, int64_t n, const float* lut, float s, float* out);
};

// Every level's table (quant_simd.cc). Which one a CPU dispatch level uses
// is decided in one place, cpu_level_kernels() (cpu_levels.h).
enum class QuantLevel { kPortable, kAvx2, kAvx512 };
const QuantIsa& quant_table(QuantLevel level);

}  // namespace dgemma::cpu
