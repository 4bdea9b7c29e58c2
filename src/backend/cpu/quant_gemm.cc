// The dequantize-in-tile GEMM (see quant_kernels.h) and the linear op on it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/int8_dot.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_simd.h"

static_assert(dgemma::cpu::kQuantNr == dgemma::cpu::kQuantTileRows, "tile rows of the driver and the vector level");

namespace dgemma::cpu {
namespace {

// Columns [k0, k0 + n) of row r of a weight as fp32.
void load_row(const QuantIsa& isa, const WeightRef& w, int64_t K, int64_t r, int64_t k0, int64_t n, float* out) {
  if (w.quant) return dequantize_row(isa, *w.quant, r, k0, n, out);
  const size_t at = size_t(r * K + k0);
  switch (w.dtype) {
    case DType::kF32: std::memcpy(out, static_cast<const float*>(w.data) + at, size_t(n) * 4); return;
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + at;
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = load_as_f32(w.dtype, w.data, at + size_t(i));
  }
}

// Fixed-order sum of a tile's 16 accumulator lanes.
inline float reduce_lanes(const float* a) {
  float h[8];
  for (int l = 0; l < 8; ++l) h[l] = a[l] + a[l + 8];
  return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

}  // namespace

void quant_gemm(const WeightRef& w, int64_t row0, int64_t n, const float* x, int64_t M, float* out, int64_t ld_out,
                ThreadPool& pool, const CpuLevelKernels& level, QuantDot dot) {
  if (dot == QuantDot::kInt8 && w.quant && int8_dot_supported(*w.quant))
    return int8_dot_gemm(*level.int8_dot, w, row0, n, x, M, out, ld_out, pool);
  const int64_t K = w.shape.back();
  std::vector<float> rounded;
  if (dot != QuantDot::kExact && w.quant && fp8_dot_weights(*w.quant)) {
    rounded.assign(x, x + M * K);
    for (float& v : rounded) v = round_bf16(v);
    x = rounded.data();
  }
  const int64_t tiles = (n + kQuantNr - 1) / kQuantNr;
  if (n <= 0 || M <= 0) return;
  const QuantIsa& isa = *level.quant;
  pool.parallel_for(tiles, 1, [&](int64_t tb, int64_t te) {
    // Per (row, weight row): 16 vector lanes over the K-chunks' multiples of
    // 16 columns, plus a scalar for the remainder columns.
    std::vector<float> acc(size_t(M * kQuantNr * kQuantLanes)), tail(size_t(M * kQuantNr));
    alignas(64) float wbuf[kQuantNr][kQuantKc];
    for (int64_t t = tb; t < te; ++t) {
      const int64_t j0 = t * kQuantNr;
      const int nr = int(std::min<int64_t>(kQuantNr, n - j0));
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(tail.begin(), tail.end(), 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += kQuantKc) {
        const int64_t kc = std::min(kQuantKc, K - k0), kv = kc / kQuantLanes * kQuantLanes;
        for (int j = 0; j < kQuantNr; ++j) {
          if (j < nr)
            load_row(isa, w, K, row0 + j0 + j, k0, kc, wbuf[j]);
          else
            std::fill(wbuf[j], wbuf[j] + kc, 0.0f);
        }
        isa.tile_dot(x + k0, K, M, &wbuf[0][0], kQuantKc, kv, acc.data());
        for (int64_t m = 0; m < M && kv < kc; ++m)
          for (int j = 0; j < kQuantNr; ++j)
            for (int64_t k = kv; k < kc; ++k) tail[size_t(m * kQuantNr + j)] += x[m * K + k0 + k] * wbuf[j][k];
      }
      for (int64_t m = 0; m < M; ++m)
        for (int j = 0; j < nr; ++j)
          out[m * ld_out + j0 + j] =
              reduce_lanes(acc.data() + (m * kQuantNr + j) * kQuantLanes) + tail[size_t(m * kQuantNr + j)];
    }
  });
}

void quant_linear(const OpCall& c, ThreadPool& pool, const CpuLevelKernels& level, QuantDot dot) {
  const Tensor& x = *c.in[0];
  const WeightRef& w = *c.w[0];
  Tensor& out = *c.out[0];
  quant_gemm(w, 0, w.shape[0], x.f.data(), x.dim(0), out.f.data(), w.shape[0], pool, level, dot);
}

}  // namespace dgemma::cpu
