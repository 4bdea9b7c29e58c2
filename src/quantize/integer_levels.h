#pragma once
// What the integer-dot paths of every backend (the CPU's int8_dot, the CUDA
// int8-dot kernels) need of a quantized format: which weights can run on
// integer products, and each format's integer values V and scale layout, so
// that all backends compute the same integers and scales. The math:
// backend/cpu/int8_dot.h's module comment, and docs/formats.md §2-§4 for the
// formats themselves.
#include <cstdint>

#include "quantize/quantized_weight.h"

namespace dgemma {

inline constexpr int kI8Block = 32;  // activation block (columns per scale d)

// Whether `w` can run on the integer path: its scale blocks tile each row's
// 32-column activation blocks (rows of K % 32 == 0 columns; NF4 blocks,
// MLX groups and int8 blocks a multiple of 32, NVFP4 blocks of 16; the ggml
// block types with integer levels except Q2_K). Other
// weights (e.g. the tiny golden shapes) take the exact path.
bool int8_dot_supported(const QuantizedWeight& w);

// The range of a weight format's integer values V (backend/cpu/int8_dot.h's
// module comment): int8, NVFP4's 2·E2M1 and MLX 4-bit fit int8; MLX 8-bit fits
// uint8; NF4's 15-bit levels need int16; ggml types fit int8 (no offset) or
// uint8 (with one: Q4_1, Q5_1, Q4_K, Q5_K). Levels with byte products (AMX)
// choose their products from it; the others ignore it.
enum class I8Values : uint8_t { kS8, kU8, kS16 };

// A weight's integer values and scale layout on the integer path (backend/cpu/int8_dot.h): the value V of each 4-bit
// code (NF4's 15-bit levels, NVFP4's 2·E2M1, MLX 4-bit's code itself), NF4's cmax / 32767, the columns per weight
// scale, and whether an MLX bias is folded. Shared with the CUDA backend's int8-dot kernels
// (backend/cuda/int8_dot_kernels.cu), so that both compute the same integers and scales.
struct Int8WeightValues {
  int16_t levels[16] = {};
  float nf4_factor = 0.0f;
  int sub = kI8Block;
  bool bias = false;
  I8Values values = I8Values::kS8;
};
Int8WeightValues int8_weight_values(const QuantizedWeight& w);

}  // namespace dgemma
