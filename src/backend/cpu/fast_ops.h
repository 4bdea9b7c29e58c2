#pragma once
// Optimized CPU kernels (drivers): threading, scratch memory, weight packing
// and the choice of GEMM path, on top of the per-ISA building blocks of
// isa_kernels.h. Each function has the semantics of the same-named kernel in
// cpu_kernels.h (the reference) and is tested against it
// (tests/ops/cpu_fast_kernels_test.cc); differences are rounding only (fp32
// summation order, vector exp/tanh within a few ulp) except where a comment
// says otherwise (bf16_dot).
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "backend/cpu/cpu_levels.h"
#include "backend/cpu/isa_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/soft_embedding_stats.h"
#include "ops/op.h"

namespace dgemma::cpu {

struct CpuContext {
  ThreadPool* pool = nullptr;
  // The backend's dispatch level: every kernel it runs comes from this row
  // (level->dense is never null inside fast::).
  const CpuLevelKernels* level = nullptr;
  bool bf16_dot = false;  // use kBF16Pairs for bf16 weights (level->dense has pack_a_pairs)
  bool int8_dot = false;  // GEMMs over quantized weights on int8 activations (int8_dot.h)
  // How GEMMs over quantized weights multiply in this context's mode.
  QuantDot quant_dot() const { return int8_dot ? QuantDot::kInt8 : bf16_dot ? QuantDot::kBf16 : QuantDot::kExact; }
  PackedWeightCache weights;
  // Per-call buffers reused across calls (the backend runs one op at a time).
  std::vector<float> a_pack, buf0, buf1, buf2;
  std::vector<uint32_t> a_pairs;
  std::vector<int32_t> ibuf0, ibuf1;
  // soft_embedding: the largest row norm of each table it has seen (keyed by
  // the table's data), and what its sparse path did (sparse_self_conditioning).
  bool sparse_self_conditioning = true;
  std::unordered_map<const void*, double> table_max_row_norm;
  SoftEmbeddingStats soft_embedding_stats;
};

// Per-thread scratch that survives across calls (no allocation in steady state).
float* thread_scratch(size_t floats);

// C[M, N] (ldc) = A · B (or C += A · B when `accumulate`) for a B operand of
// any panel type (A is packed for it into ctx buffers), on the pool.
// `a_rows`: optional row indices into x (gather), x row stride ldx.
void gemm_packed(CpuContext& ctx, const float* x, int64_t ldx, const int32_t* a_rows, int64_t m, int64_t k,
                 const GemmB& b, int64_t n, float* c, int64_t ldc, bool accumulate = false);

namespace fast {
void linear(const OpCall& c, CpuContext& ctx);
void soft_embedding(const OpCall& c, CpuContext& ctx);
void rms_norm(const OpCall& c, CpuContext& ctx);
void attention(const OpCall& c, CpuContext& ctx);
void router_topk(const OpCall& c, CpuContext& ctx);
void moe_experts(const OpCall& c, CpuContext& ctx);
void gelu_glu(const OpCall& c, CpuContext& ctx);
void softcap(const OpCall& c, CpuContext& ctx);
}  // namespace fast

}  // namespace dgemma::cpu
