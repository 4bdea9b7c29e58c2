#include "ops/cpu/cpu_backend.h"

#include "ops/cpu/cpu_kernels.h"

namespace dgemma {

void CpuBackend::run(const OpCall& c) {
  ThreadPool& p = *pool_;
  switch (c.kind) {
    case OpKind::kEmbedding: return cpu::embedding(c, p);
    case OpKind::kSoftEmbedding: return cpu::soft_embedding(c, p);
    case OpKind::kRmsNorm: return cpu::rms_norm(c, p);
    case OpKind::kLinear: return cpu::linear(c, p);
    case OpKind::kRope: return cpu::rope(c, p);
    case OpKind::kAttention: return cpu::attention(c, p);
    case OpKind::kRouterTopk: return cpu::router_topk(c, p);
    case OpKind::kMoeExperts: return cpu::moe_experts(c, p);
    case OpKind::kGeluGlu: return cpu::gelu_glu(c, p);
    case OpKind::kAdd: return cpu::add(c, p);
    case OpKind::kScale: return cpu::scale(c, p);
    case OpKind::kSoftcap: return cpu::softcap(c, p);
  }
}

}  // namespace dgemma
