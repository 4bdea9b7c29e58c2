#pragma once
// Scalar reference kernels of the CPU backend, one function per op (see
// ops/op.h for shapes). Rows are distributed over the thread pool; each output
// element is produced by one thread in a fixed order (deterministic for any
// thread count). They are the `scalar` dispatch level of CpuBackend and the
// oracle the optimized kernels (backend/cpu/fast_ops.h) are tested against.
// On quantized weights they hand over to quant_kernels.h with the scalar
// level's vector kernels (the portable ones, cpu_levels.h).
#include "core/thread_pool.h"
#include "ops/op.h"

namespace dgemma::cpu::reference {

float dot_f32(const float* a, const float* b, int64_t n);
float gelu_tanh(float x);

void embedding(const OpCall& c, ThreadPool& pool);
void soft_embedding(const OpCall& c, ThreadPool& pool);
void rms_norm(const OpCall& c, ThreadPool& pool);
void linear(const OpCall& c, ThreadPool& pool);
void rope(const OpCall& c, ThreadPool& pool);
void attention(const OpCall& c, ThreadPool& pool);
void router_topk(const OpCall& c, ThreadPool& pool);
void moe_experts(const OpCall& c, ThreadPool& pool);
void gelu_glu(const OpCall& c, ThreadPool& pool);
void add(const OpCall& c, ThreadPool& pool);
void scale(const OpCall& c, ThreadPool& pool);
void softcap(const OpCall& c, ThreadPool& pool);
void concat_rows(const OpCall& c, ThreadPool& pool);
// The vision tower's row ops (cpu_vision_rows.cc), run at every dispatch level.
void affine(const OpCall& c, ThreadPool& pool);
void pool_cells(const OpCall& c, ThreadPool& pool);
void scatter_rows(const OpCall& c, ThreadPool& pool);
// Both dispatch levels use it (cpu_sample.cc); throws BadLogitsRow (ops/row_sampling.h).
void sample(const OpCall& c, ThreadPool& pool);

}  // namespace dgemma::cpu::reference
