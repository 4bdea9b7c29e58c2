#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma {

CpuBackend::CpuBackend(int threads)
    : CpuBackend([threads] {
        CpuBackendOptions o;
        o.threads = threads;
        return o;
      }()) {}

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : options_(options),
      pool_(std::make_unique<ThreadPool>(options.threads)),
      ctx_(std::make_unique<cpu::CpuContext>()) {
  ctx_->pool = pool_.get();
  // The level is resolved once: every kernel this backend runs (dense,
  // int8-dot, quantized) comes from its row.
  ctx_->level = &cpu::cpu_level_kernels(options.isa.value_or(default_isa()));
  isa_ = ctx_->level->isa;
  ctx_->bf16_dot = options.bf16_dot && ctx_->level->dense && ctx_->level->dense->pack_a_pairs;
  ctx_->sparse_self_conditioning = options.sparse_self_conditioning;
  ctx_->int8_dot = options.int8_dot;
}

CpuBackend::~CpuBackend() = default;

const cpu::CpuLevelKernels& CpuBackend::kernels() const { return *ctx_->level; }
bool CpuBackend::bf16_dot() const { return ctx_->bf16_dot; }
size_t CpuBackend::packed_weight_bytes() const { return ctx_->weights.bytes(); }
size_t CpuBackend::packed_weight_count() const { return ctx_->weights.size(); }
void CpuBackend::clear_packed_weights() {
  ctx_->weights.clear();
  ctx_->table_max_row_norm.clear();
}
SoftEmbeddingStats CpuBackend::soft_embedding_stats() const {
  std::lock_guard<std::mutex> lock(run_mu_);
  return ctx_->soft_embedding_stats;
}
void CpuBackend::reset_soft_embedding_stats() {
  std::lock_guard<std::mutex> lock(run_mu_);
  ctx_->soft_embedding_stats = {};
}

void CpuBackend::run(const OpCall& c) {
  std::lock_guard<std::mutex> lock(run_mu_);
  // A host backend: inputs a device produced come to the host, and outputs
  // written here are the only current copy (ops/backend.h).
  for (const Tensor* t : c.in) t->ensure_host();
  for (Tensor* t : c.out) t->host_written();
  ThreadPool& p = *pool_;
  namespace ref = cpu::reference;
  const cpu::CpuLevelKernels& level = *ctx_->level;
  if (!level.dense) {  // scalar level: the reference kernels
    const auto dot = ctx_->int8_dot ? cpu::QuantDot::kInt8 : cpu::QuantDot::kExact;
    if (dot == cpu::QuantDot::kInt8 && c.kind == OpKind::kLinear && c.w[0]->quant)
      return cpu::quant_linear(c, p, level, dot);
    if (dot == cpu::QuantDot::kInt8 && c.kind == OpKind::kMoeExperts && (c.w[0]->quant || c.w[1]->quant))
      return cpu::quant_moe_experts(c, p, level, dot);
    switch (c.kind) {
      case OpKind::kEmbedding: return ref::embedding(c, p);
      case OpKind::kSoftEmbedding: return ref::soft_embedding(c, p);
      case OpKind::kRmsNorm: return ref::rms_norm(c, p);
      case OpKind::kLinear: return ref::linear(c, p);
      case OpKind::kRope: return ref::rope(c, p);
      case OpKind::kAttention: return ref::attention(c, p);
      case OpKind::kRouterTopk: return ref::router_topk(c, p);
      case OpKind::kMoeExperts: return ref::moe_experts(c, p);
      case OpKind::kGeluGlu: return ref::gelu_glu(c, p);
      case OpKind::kAdd: return ref::add(c, p);
      case OpKind::kScale: return ref::scale(c, p);
      case OpKind::kSoftcap: return ref::softcap(c, p);
      case OpKind::kConcatRows: return ref::concat_rows(c, p);
      case OpKind::kSample: return ref::sample(c, p);
      case OpKind::kAffine: return ref::affine(c, p);
      case OpKind::kPoolCells: return ref::pool_cells(c, p);
      case OpKind::kScatterRows: return ref::scatter_rows(c, p);
    }
    return;
  }
  cpu::CpuContext& x = *ctx_;
  switch (c.kind) {
    // Row gathers and cheap elementwise ops are memory-bound: the reference is
    // enough (a quantized table is expanded with this level's kernels).
    case OpKind::kEmbedding: return c.w[0]->quant ? cpu::quant_embedding(c, p, level) : ref::embedding(c, p);
    case OpKind::kRope: return ref::rope(c, p);
    case OpKind::kAdd: return ref::add(c, p);
    case OpKind::kScale: return ref::scale(c, p);
    case OpKind::kSoftEmbedding: return cpu::fast::soft_embedding(c, x);
    case OpKind::kRmsNorm: return cpu::fast::rms_norm(c, x);
    case OpKind::kLinear: return cpu::fast::linear(c, x);
    case OpKind::kAttention: return cpu::fast::attention(c, x);
    case OpKind::kRouterTopk: return cpu::fast::router_topk(c, x);
    case OpKind::kMoeExperts: return cpu::fast::moe_experts(c, x);
    case OpKind::kGeluGlu: return cpu::fast::gelu_glu(c, x);
    case OpKind::kSoftcap: return cpu::fast::softcap(c, x);
    case OpKind::kConcatRows: return ref::concat_rows(c, p);
    case OpKind::kSample: return ref::sample(c, p);
    // The vision tower's row ops: memory-bound, the reference is enough.
    case OpKind::kAffine: return ref::affine(c, p);
    case OpKind::kPoolCells: return ref::pool_cells(c, p);
    case OpKind::kScatterRows: return ref::scatter_rows(c, p);
  }
}

}  // namespace dgemma
