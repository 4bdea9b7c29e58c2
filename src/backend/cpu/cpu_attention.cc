// Attention with scale 1.0 and an fp32 softmax (docs/model.md §1.3, §2.1). GQA: query
// head h reads key head h / (Hq / Hk) (torch repeat_kv semantics). The mask
// is derived from absolute positions (docs/model.md §2.2, §2.4), and for the
// blocks masks from the image block of each new row (docs/model.md §7.7).
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_kernels.h"

namespace dgemma::cpu::reference {

void attention(const OpCall& c, ThreadPool& pool) {
  const Tensor &q = *c.in[0], &qpos = *c.in[3];
  const AttentionKeys keys = attention_keys(c);
  Tensor& out = *c.out[0];
  const int64_t M = q.dim(0), Hq = q.dim(1), d = q.dim(2), S = keys.total(), Hk = c.in[1]->dim(1);
  const int64_t group = Hq / Hk;
  const Tensor* blocks = attention_blocks(c);  // new row r's block (query r, and key r of part 1)
  // Key s: its part (cache rows first, then the new rows) and row there.
  const AttentionKeyPart& p0 = keys.parts[0];
  auto part_row = [&](int64_t s) -> std::pair<const AttentionKeyPart*, int64_t> {
    return s < p0.rows ? std::pair{&p0, p0.first + s} : std::pair{&keys.parts[1], s - p0.rows};
  };
  pool.parallel_for(M * Hq, 4, [&](int64_t b, int64_t e) {
    std::vector<float> score(static_cast<size_t>(S));
    for (int64_t mh = b; mh < e; ++mh) {
      const int64_t m = mh / Hq, h = mh % Hq, kh = h / group;
      const float* qv = q.f.data() + (m * Hq + h) * d;
      float mx = -INFINITY;
      for (int64_t s = 0; s < S; ++s) {
        const auto [part, row] = part_row(s);
        const int32_t qblock = blocks ? blocks->i[size_t(m)] : -1;
        const int32_t kblock = blocks && part == &keys.parts[1] ? blocks->i[size_t(row)] : -1;
        if (!attention_visible(c.attrs, qpos.i[size_t(m)], part->pos->i[size_t(row)], qblock, kblock)) {
          score[size_t(s)] = -INFINITY;
          continue;
        }
        score[size_t(s)] = dot_f32(qv, part->k->f.data() + (row * Hk + kh) * d, d);
        mx = std::max(mx, score[size_t(s)]);
      }
      float* o = out.f.data() + m * Hq * d + h * d;
      for (int64_t j = 0; j < d; ++j) o[j] = 0.0f;
      if (mx == -INFINITY) continue;  // no visible key: zero output, never NaN
      float sum = 0;
      for (int64_t s = 0; s < S; ++s) sum += (score[size_t(s)] = std::exp(score[size_t(s)] - mx));
      const float inv = 1.0f / sum;
      for (int64_t s = 0; s < S; ++s) {
        const float p = score[size_t(s)] * inv;
        if (p == 0.0f) continue;
        const auto [part, row] = part_row(s);
        const float* vv = part->v->f.data() + (row * Hk + kh) * d;
        for (int64_t j = 0; j < d; ++j) o[j] += p * vv[j];
      }
    }
  });
}

}  // namespace dgemma::cpu::reference
