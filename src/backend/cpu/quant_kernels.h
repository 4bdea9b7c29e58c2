#pragma once
// CPU kernels for quantized weights (WeightRef::quant set; the formats and the
// value semantics are in quantize/quantized_weight.h). The CPU kernels of
// linear, moe_experts, embedding and soft_embedding hand a call over to these
// as their first statement when the weight is quantized, so every dispatch
// level (reference and fast) runs quantized checkpoints. Each takes the
// vector kernels of the caller's dispatch level (cpu_levels.h): the reference
// kernels pass the scalar level's (portable), the backend its own.
//
// The GEMM dequantizes on the fly: for a tile of kQuantNr weight rows it
// expands one K-chunk of kQuantKc columns per row into a stack buffer, then
// streams all M activation rows past it, so a quantized weight is never
// expanded beyond one chunk (no full-size copy) and the expansion cost is
// shared by all M rows. Results do not depend on the thread count.
#include <cstdint>
#include <cstring>
#include <functional>

#include "core/thread_pool.h"
#include "backend/cpu/cpu_levels.h"
#include "ops/op.h"
#include "quantize/quantized_weight.h"

namespace dgemma::cpu {

// Weight rows per tile and K-chunk length. 8 × 512 fp32 = 16 KB of expanded
// weights plus 4 activation rows (8 KB) stay in L1 while the activation rows
// stream past in blocks of 4; 512 is a multiple of every block size (16, 32,
// 64, 128, 256, 512), so chunks start on block boundaries for all formats we
// write.
inline constexpr int kQuantNr = 8;
inline constexpr int64_t kQuantKc = 512;

// How GEMMs over quantized weights multiply: kExact dequantizes the weights
// to fp32 in tiles (fp32 activations and accumulation); kInt8 quantizes the
// activations to int8 blocks and uses integer dot products (int8_dot.h;
// CpuBackendOptions::int8_dot), for the weights int8_dot_supported() accepts.
// kBf16 (the bf16 dot mode), and kInt8 for the weights it does not take,
// round the activations to bf16 for the FP8 weights the CUDA backend's tensor
// cores take (fp8_dot_weights: a scale per channel or per block of 32k
// columns); the product is then the exact one.
enum class QuantDot : uint8_t { kExact, kInt8, kBf16 };

// Op kernels with the contracts of ops/op.h.
void quant_linear(const OpCall& c, ThreadPool& pool, const CpuLevelKernels& level, QuantDot dot = QuantDot::kExact);
// out[i] = gelu_tanh(g[i])·u[i] over a row of n (IsaKernels::gelu_glu).
using GeluGluRow = void (*)(const float* g, const float* u, float* out, int64_t n);
// gelu_glu: the activation of the experts' hidden rows (null: the reference
// gelu_tanh; the fast backend passes its vector kernel, as for bf16 experts).
void quant_moe_experts(const OpCall& c, ThreadPool& pool, const CpuLevelKernels& level, QuantDot dot = QuantDot::kExact,
                       GeluGluRow gelu_glu = nullptr);
void quant_embedding(const OpCall& c, ThreadPool& pool, const CpuLevelKernels& level);
// soft_embedding multiplies with the whole table, which needs it dense (docs/model.md
// §6.3 pitfall 10): runs `dense_kernel` (the calling level's soft_embedding)
// on a copy of the call whose table is the weight's dense copy.
void quant_soft_embedding(const OpCall& c, const CpuLevelKernels& level,
                          const std::function<void(const OpCall&)>& dense_kernel);

// out[m·ld_out + j] = Σ_k x[m·K + k] · W[row0 + j, k] for m < M, j < n, with
// W viewed as [rows, K] (leading dimensions flattened). W may be quantized or
// plain (F32/BF16/F16), so a layer with one quantized expert tensor and one
// plain one still works.
void quant_gemm(const WeightRef& w, int64_t row0, int64_t n, const float* x, int64_t M, float* out, int64_t ld_out,
                ThreadPool& pool, const CpuLevelKernels& level, QuantDot dot = QuantDot::kExact);

// Element i of a quantized weight's scale (or bias) array stored as F32, BF16
// or F16 (QuantizedWeight::scale_dtype), as fp32.
inline float load_f32(const uint8_t* p, int64_t i) {
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f;
}
inline float load_scale(DType t, const uint8_t* p, int64_t i) {
  uint16_t h;
  switch (t) {
    case DType::kBF16: std::memcpy(&h, p + 2 * i, 2); return bf16_to_f32(h);
    case DType::kF16: std::memcpy(&h, p + 2 * i, 2); return f16_to_f32(h);
    default: return load_f32(p, i);
  }
}

// Logical elements [col, col + n) of row `row` as fp32 with the expansion
// kernels of `isa` (quant_simd.h): bit-identical to dequantize_reference() at
// every level.
void dequantize_row(const QuantIsa& isa, const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out);

}  // namespace dgemma::cpu
