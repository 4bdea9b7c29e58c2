#pragma once
// The CPU backend: optimized kernels (backend/cpu/fast_ops.h) selected at run time
// for the CPU's dispatch level, with the scalar reference kernels
// (backend/cpu/cpu_kernels.h) as the `scalar` level and as the fallback for
// dtypes the fast kernels do not read. Weights used by GEMMs are repacked into
// panels once, on first use, and cached for the backend's lifetime (see
// packed_weights.h for the contract: weights must stay valid and unchanged).
#include <memory>
#include <mutex>
#include <optional>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/backend.h"
#include "backend/cpu/soft_embedding_stats.h"

namespace dgemma {

namespace cpu {
struct CpuContext;
struct CpuLevelKernels;
}  // namespace cpu

struct CpuBackendOptions {
  int threads = 0;            // 0: one per hardware thread
  std::optional<CpuIsa> isa;  // cap on the dispatch level of every kernel (dense, int8-dot,
                              // quantized); default default_isa() (DGEMMA_CPU_ISA);
                              // clamped to what the CPU runs
  // Linear and expert GEMMs over bf16 weights use vdpbf16ps (AVX512_BF16):
  // about twice the fp32 FMA rate, but the activations are rounded to bf16
  // (round to nearest even) before each such product, as a bf16 model run
  // does. Off: activations stay fp32 and bf16 weights are widened exactly,
  // so bf16 weights give the same result as those values stored as fp32.
  // Attention then rounds Q, K, V and its probabilities to bf16 before their
  // products (fp32 scores, softmax and sums), as the CUDA backend's
  // tensor-core attention does (AttnArgs::round_bf16).
  // Has no effect without AVX512_BF16 (and, on products, for fp32 weights).
  bool bf16_dot = false;
  // Linear and expert GEMMs over quantized weights (NF4, NVFP4, MLX affine,
  // int8) quantize their activations to int8 in blocks of 32 and use integer
  // dot products (backend/cpu/int8_dot.h); the weights stay the stored codes. Off:
  // the weights are dequantized to fp32 in tiles and the activations stay
  // fp32. Plain weights are not affected. Runs at every dispatch level.
  bool int8_dot = false;
  // soft_embedding sums, per canvas row, only the vocabulary entries that
  // carry the probability mass when a bound proves the rest changes the row by
  // less than 1e-6 relative (backend/cpu/fast_soft_embedding.cc); off: always the
  // dense product. Has no effect at the scalar level (the reference kernels).
  bool sparse_self_conditioning = true;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads = 0);
  explicit CpuBackend(const CpuBackendOptions& options);
  ~CpuBackend() override;
  std::string name() const override { return "cpu"; }
  void run(const OpCall& call) override;
  ThreadPool& pool() { return *pool_; }
  ThreadPool* host_pool() override { return pool_.get(); }
  void release_weight_copies() override { clear_packed_weights(); }

  // The dispatch level in use (after clamping), and its kernels: the dense,
  // int8-dot and quantized paths alike (backend/cpu/cpu_levels.h).
  CpuIsa isa() const { return isa_; }
  const cpu::CpuLevelKernels& kernels() const;
  bool bf16_dot() const;
  bool int8_dot() const { return options_.int8_dot; }
  const CpuBackendOptions& options() const { return options_; }
  // Packed weight panels held (bytes, count); clear_packed_weights() forgets
  // them (needed if a weight buffer is reused for different values).
  size_t packed_weight_bytes() const;
  size_t packed_weight_count() const;
  void clear_packed_weights();
  // What soft_embedding's sparse path did since construction (or the last reset).
  SoftEmbeddingStats soft_embedding_stats() const;
  void reset_soft_embedding_stats();

 private:
  CpuBackendOptions options_;
  CpuIsa isa_ = CpuIsa::kScalar;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<cpu::CpuContext> ctx_;
  mutable std::mutex run_mu_;  // one op at a time (shared scratch, one pool job slot)
};

}  // namespace dgemma
