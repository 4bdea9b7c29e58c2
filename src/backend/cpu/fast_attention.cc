// Attention driver (docs/model.md §1.3, §2.1-§2.4): K and V of each KV head are packed
// once per call into GEMM panels (Kᵀ: [S/32][d][32], V: [d/32][S][32]), then
// tiles of kAttnRows query rows of one KV head (all query heads of its GQA
// group, consecutive queries) run the online-softmax kernel of ops-inl.h.
// Tiles are scheduled dynamically: under a causal mask their cost varies.
#include <algorithm>
#include <atomic>
#include <utility>

#include "core/dtype.h"
#include "backend/cpu/fast_ops.h"

namespace dgemma::cpu::fast {

void attention(const OpCall& c, CpuContext& ctx) {
  const Tensor &q = *c.in[0], &qpos = *c.in[3];
  const AttentionKeys keys = attention_keys(c);
  Tensor& out = *c.out[0];
  const int64_t M = q.dim(0), Hq = q.dim(1), d = q.dim(2), S = keys.total(), Hk = c.in[1]->dim(1);
  const int64_t G = Hq / Hk;
  if (M == 0) return;
  if (S == 0) {
    std::fill(out.f.begin(), out.f.begin() + out.numel(),
              0.0f);  // not past numel: the checker pads outputs with canaries
    return;
  }
  // Key s's K and V rows (cache rows first, then the new ones) and positions.
  const AttentionKeyPart &p0 = keys.parts[0], &p1 = keys.parts[1];
  auto key_offset = [&](int64_t s, int64_t kh) -> std::pair<const AttentionKeyPart*, int64_t> {
    return s < p0.rows ? std::pair{&p0, ((p0.first + s) * Hk + kh) * d} : std::pair{&p1, ((s - p0.rows) * Hk + kh) * d};
  };
  std::vector<int32_t>& kpos = ctx.ibuf0;
  kpos.resize(size_t(S));
  if (p0.rows > 0) std::copy_n(p0.pos->i.begin() + p0.first, p0.rows, kpos.begin());  // (no cache: no tensor)
  std::copy_n(p1.pos->i.begin(), p1.rows, kpos.begin() + p0.rows);
  // The blocks masks: the keys' blocks, none for the cache's (docs/model.md §7.7).
  const Tensor* blocks = attention_blocks(c);
  std::vector<int32_t>& kblock = ctx.ibuf1;
  if (blocks) {
    kblock.assign(size_t(S), -1);
    std::copy_n(blocks->i.begin(), p1.rows, kblock.begin() + p0.rows);
  }
  const int64_t sp = (S + kNr - 1) / kNr * kNr, dp = (d + kNr - 1) / kNr * kNr;
  const int64_t ktp = sp / kNr, vpp = dp / kNr;
  std::vector<float>& kt = ctx.buf0;
  std::vector<float>& vp = ctx.buf1;
  kt.resize(size_t(Hk * sp * d));
  vp.resize(size_t(Hk * dp * sp));
  ThreadPool& pool = *ctx.pool;
  const bool rb = ctx.bf16_dot;  // the dot mode's roundings (AttnArgs::round_bf16)
  pool.parallel_for(Hk * ktp, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t kh = i / ktp, p = i % ktp;
      float* kd = kt.data() + kh * sp * d + p * d * kNr;
      for (int64_t cc = 0; cc < kNr; ++cc) {
        const int64_t s = p * kNr + cc;
        if (s < S) {
          const auto [part, at] = key_offset(s, kh);
          const float* kr = part->k->f.data() + at;
          for (int64_t j = 0; j < d; ++j) kd[j * kNr + cc] = rb ? round_bf16(kr[j]) : kr[j];
        } else {
          for (int64_t j = 0; j < d; ++j) kd[j * kNr + cc] = 0.0f;
        }
      }
      // V rows of the same 32 keys, into each of the d/32 V panels.
      for (int64_t pd = 0; pd < vpp; ++pd) {
        float* vd = vp.data() + kh * dp * sp + (pd * sp + p * kNr) * kNr;
        const int64_t c0 = pd * kNr, cols = std::min<int64_t>(kNr, d - c0);
        for (int64_t cc = 0; cc < kNr; ++cc) {
          const int64_t s = p * kNr + cc;
          float* dst = vd + cc * kNr;
          int64_t j = 0;
          if (s < S) {
            const auto [part, at] = key_offset(s, kh);
            const float* vr = part->v->f.data() + at + c0;
            for (; j < cols; ++j) dst[j] = rb ? round_bf16(vr[j]) : vr[j];
          }
          for (; j < kNr; ++j) dst[j] = 0.0f;
        }
      }
    }
  });

  AttnArgs a;
  a.q = q.f.data();
  a.qpos = qpos.i.data();
  a.kt = kt.data();
  a.vp = vp.data();
  a.kt_head_stride = sp * d;
  a.vp_head_stride = dp * sp;
  a.kpos = kpos.data();
  a.out = out.f.data();
  a.m = M;
  a.hq = Hq;
  a.hk = Hk;
  a.d = d;
  a.s = S;
  a.group = G;
  a.mask = int(c.attrs.mask);
  a.window = c.attrs.window;
  a.first_canvas_pos = c.attrs.first_canvas_pos;
  a.qblock = blocks ? blocks->i.data() : nullptr;
  a.kblock = blocks ? kblock.data() : nullptr;
  a.round_bf16 = rb;
  const int64_t rows = M * G, tiles = (rows + kAttnRows - 1) / kAttnRows, count = Hk * tiles;
  const IsaKernels& isa = *ctx.level->dense;
  std::atomic<int64_t> next{0};
  pool.parallel_for(pool.size(), 1, [&](int64_t, int64_t) {
    float* scratch = thread_scratch(size_t(attn_scratch_floats(d)));
    for (int64_t t = next.fetch_add(1); t < count; t = next.fetch_add(1)) {
      const int64_t kh = t / tiles, t0 = t % tiles * kAttnRows;
      isa.attention_tile(a, kh, t0, std::min(rows, t0 + kAttnRows), scratch);
    }
  });
}

}  // namespace dgemma::cpu::fast
