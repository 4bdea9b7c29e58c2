// Embedding lookups from a quantized table: each requested row is
// dequantized (and rounded to bf16 in a bf16 run, the value a reference
// runtime's dequantize returns in that dtype), then scaled. soft_embedding needs the whole
// table and uses its dense copy (quantize/quantized_weight.h).
#include "dgemma/error.h"
#include "backend/cpu/quant_kernels.h"

namespace dgemma::cpu {

void quant_embedding(const OpCall& c, ThreadPool& pool, const CpuLevelKernels& level) {
  const Tensor& ids = *c.in[0];
  const QuantizedWeight& table = *c.w[0]->quant;
  Tensor& out = *c.out[0];
  const int64_t V = table.rows, H = table.cols;
  for (int32_t id : ids.i)
    if (id < 0 || id >= V)
      throw Error("embedding: token id " + std::to_string(id) + " is out of range [0, " + std::to_string(V) + ")");
  const float s = c.attrs.scale;
  pool.parallel_for(ids.numel(), 8, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      float* o = out.f.data() + m * H;
      dequantize_row(*level.quant, table, ids.i[size_t(m)], 0, H, o);
      if (c.attrs.round_to_bf16) round_to_dtype(DType::kBF16, o, H);
      for (int64_t h = 0; h < H; ++h) o[h] *= s;
    }
  });
}

void quant_soft_embedding(const OpCall& c, const CpuLevelKernels& level,
                          const std::function<void(const OpCall&)>& dense_kernel) {
  OpCall dense = c;
  const QuantIsa& isa = *level.quant;
  dense.w = {&c.w[0]->quant->dense(c.attrs.round_to_bf16 ? DType::kBF16 : DType::kF32,
                                   [&isa](const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out) {
                                     dequantize_row(isa, w, row, col, n, out);
                                   })};
  dense_kernel(dense);
}

}  // namespace dgemma::cpu
