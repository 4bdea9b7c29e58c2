// linear: out[M,N] = x[M,K] · W[N,K]ᵀ with the weight read in its stored
// dtype and fp32 accumulation. Parallel over blocks of output features so
// that each weight row is converted to fp32 once and reused for all M rows.
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu::reference {

void linear(const OpCall& c, ThreadPool& pool) {
  if (c.w[0]->quant) return quant_linear(c, pool, cpu_level_kernels(CpuIsa::kScalar));
  const Tensor& x = *c.in[0];
  const WeightRef& w = *c.w[0];
  Tensor& out = *c.out[0];
  const int64_t M = x.dim(0), K = x.dim(1), N = w.shape[0];
  const bool direct = w.dtype == DType::kF32;
  pool.parallel_for(N, 16, [&](int64_t nb, int64_t ne) {
    std::vector<float> row(direct ? 0 : size_t(K));
    for (int64_t n = nb; n < ne; ++n) {
      const float* wr;
      if (direct) {
        wr = static_cast<const float*>(w.data) + n * K;
      } else {
        w.row_f32(n, K, row.data());
        wr = row.data();
      }
      for (int64_t m = 0; m < M; ++m) out.f[size_t(m * N + n)] = dot_f32(x.f.data() + m * K, wr, K);
    }
  });
}

}  // namespace dgemma::cpu::reference
