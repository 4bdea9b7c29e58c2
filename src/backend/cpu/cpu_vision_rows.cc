// Row ops of the vision tower and of the merge of its soft tokens into the
// prompt (docs/model.md §7): affine, pool_cells, scatter_rows. Memory-bound,
// so every dispatch level runs these.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_kernels.h"

namespace dgemma::cpu::reference {

// (x - shift)·scale per column, in fp32 with each step rounded: the patch
// input 2·(p - 0.5) (docs/model.md §7.2) and the standardization (§7.5).
void affine(const OpCall& c, ThreadPool& pool) {
  const Tensor& x = *c.in[0];
  Tensor& out = *c.out[0];
  const int64_t M = x.dim(0), H = x.dim(1);
  std::vector<float> shift(static_cast<size_t>(H)), scale(static_cast<size_t>(H));
  if (H > 0) {
    c.w[0]->row_f32(0, H, shift.data());
    c.w[1]->row_f32(0, H, scale.data());
  }
  pool.parallel_for(M, 16, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const float* xr = x.f.data() + m * H;
      float* o = out.f.data() + m * H;
      for (int64_t h = 0; h < H; ++h) {
        const float centred = xr[h] - shift[size_t(h)];
        o[h] = centred * scale[size_t(h)];
      }
    }
  });
}

// out[c] = Σ over the rows n with cell[n] = c, in row order, of x[n]·scale:
// each row is multiplied by the float scale first, then added (docs/model.md
// §7.4). Parallel over columns, so every sum keeps the row order.
void pool_cells(const OpCall& c, ThreadPool& pool) {
  const Tensor &x = *c.in[0], &cell = *c.in[1];
  Tensor& out = *c.out[0];
  const int64_t N = x.dim(0), H = x.dim(1);
  const float s = c.attrs.scale;
  std::fill(out.f.begin(), out.f.begin() + out.numel(), 0.0f);
  pool.parallel_for(H, 64, [&](int64_t b, int64_t e) {
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x.f.data() + n * H;
      float* o = out.f.data() + int64_t(cell.i[size_t(n)]) * H;
      for (int64_t h = b; h < e; ++h) {
        const float term = xr[h] * s;
        o[h] += term;
      }
    }
  });
}

// base with row rows[i] replaced by src[i] (docs/model.md §7.6): copies, exact.
void scatter_rows(const OpCall& c, ThreadPool&) {
  const Tensor &base = *c.in[0], &src = *c.in[1], &rows = *c.in[2];
  Tensor& out = *c.out[0];
  const int64_t H = base.dim(1);
  if (base.numel() > 0) std::memcpy(out.f.data(), base.f.data(), size_t(base.numel()) * 4);
  for (int64_t i = 0; i < src.dim(0); ++i)
    if (H > 0) std::memcpy(out.f.data() + int64_t(rows.i[size_t(i)]) * H, src.f.data() + i * H, size_t(H) * 4);
}

}  // namespace dgemma::cpu::reference
