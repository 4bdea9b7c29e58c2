// The sample op on the CPU (ops/op.h kSample): ops/row_sampling.h
// process_row on each row, so results are bit-identical to the host-side
// per-row pass of generate() (docs/model.md §3.2, §3.3). Rows are spread over the
// pool; a row that cannot be sampled throws BadLogitsRow naming it (the
// lowest such row when several fail).
#include <bit>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

#include "ops/row_sampling.h"
#include "backend/cpu/cpu_kernels.h"

namespace dgemma::cpu::reference {

void sample(const OpCall& c, ThreadPool& pool) {
  const Tensor& logits = *c.in[0];
  const Tensor& uniforms = *c.in[1];
  Tensor &z = *c.out[0], &argmax = *c.out[1], &entropy = *c.out[2], &sampled = *c.out[3];
  const int64_t M = logits.dim(0), V = logits.dim(1);
  const bool draw = uniforms.dim(0) > 0;
  const float temperature = c.attrs.temperature;
  std::mutex mu;
  int64_t bad_row = M;
  std::exception_ptr bad;
  pool.parallel_for(M, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(V));
    for (int64_t r = begin; r < end; ++r) {
      float* row = z.f.data() + r * V;
      std::memcpy(row, logits.f.data() + r * V, size_t(V) * sizeof(float));
      double u = 0.0;
      if (draw) {  // the double's bit pattern, low word first
        const uint64_t lo = uint32_t(uniforms.i[size_t(2 * r)]), hi = uint32_t(uniforms.i[size_t(2 * r + 1)]);
        u = std::bit_cast<double>(lo | (hi << 32));
      }
      try {
        const RowPass p = process_row(row, size_t(V), temperature, draw ? &u : nullptr, scratch.data(), "");
        argmax.i[size_t(r)] = p.argmax;
        entropy.f[size_t(r)] = p.entropy;
        sampled.i[size_t(r)] = draw ? p.sample : -1;
      } catch (const BadLogitsRow& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (r < bad_row) {
          bad_row = r;
          bad = std::make_exception_ptr(BadLogitsRow(sample_op_where(c.site, c.step), r, e.logit(), e.value()));
        }
        return;  // the op fails; the rest of this chunk is moot
      }
    }
  });
  if (bad) std::rethrow_exception(bad);
}

}  // namespace dgemma::cpu::reference
