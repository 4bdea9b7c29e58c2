// ggml block weights (GGUF tensors, docs/formats.md §5.2) on the CUDA backend
// (docs/cuda.md §3.9), on a GPU or the emulated device:
//  * exact path: every supported type's blocks decode on the device to the
//    values of the CPU reference decoder (dequantize_reference), bit for bit,
//    through the embedding lookup and through a linear on one-hot rows (the
//    soft embedding over them agrees with the CPU to fp32 rounding);
//  * integer path (cuda:int8-dot): every type the CPU's int8-dot takes gives
//    the CPU int8-dot's outputs bit for bit (linear and routed experts), and
//    Q2_K, which the CPU keeps on the exact path, stays there on the device;
//  * a GGUF tensor of a plain type bound as blocks is refused by name.
// Without a CUDA build the file is one skipped test; without a device every
// test is skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/ggml_types.h"
#include "dgemma/error.h"
#include "ops/op.h"
#include "quantize/integer_levels.h"
#include "quantize/quantized_weight.h"
#include "support/random_ggml_blocks.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "cuda/require_device.h"
#endif

namespace dgemma {
namespace {

#if !DGEMMA_HAVE_CUDA

TEST(CudaGgml, NotBuilt) { GTEST_SKIP() << "this build has no CUDA backend (nvcc not found or DGEMMA_CUDA=OFF)"; }

#else

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,   GgmlType::kQ5_1,
                               GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K,   GgmlType::kQ4_K,
                               GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};

// A GGUF block tensor as the checkpoint binds it: shape [rows] or [E, N, K]
// flattened to rows of `cols` elements, one slice over the blocks.
std::shared_ptr<QuantizedWeight> ggml_weight(GgmlType t, std::vector<int64_t> shape, Rng& rng) {
  const int64_t cols = shape.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kGgml;
  q->ggml_type = t;
  q->dtype = DType::kF32;
  q->shape = std::move(shape);
  q->rows = rows;
  q->cols = cols;
  q->block = ggml_traits(t).block_elems;
  q->owned.push_back(random_ggml_blocks(t, rows, cols, rng));
  q->stored_bytes = q->owned.back().size();
  q->slices = {QuantSlice{0, rows, q->owned.back().data()}};
  return q;
}

struct Call {
  std::deque<Tensor> in;
  std::deque<WeightRef> weights;
  OpCall call;

  Tensor& input(Tensor t) {
    in.push_back(std::move(t));
    call.in.push_back(&in.back());
    return in.back();
  }
  void weight(const std::string& name, std::shared_ptr<const QuantizedWeight> q) {
    WeightRef w;
    w.name = name;
    w.dtype = q->dtype;
    w.shape = q->shape;
    w.data = q->slices.front().codes;
    w.quant = std::move(q);
    weights.push_back(std::move(w));
    call.w.push_back(&weights.back());
  }
};

Tensor run_one(Backend& b, const Call& cs) {
  Tensor out;
  OpCall c = cs.call;
  c.out = {&out};
  prepare_op(c);
  b.run(c);
  return out;
}

bool launched_kernel(const CudaBackend& gpu, const std::string& kernel) {
  for (const CudaLaunchRecord& r : gpu.recent_launches())
    if (r.kernel == kernel) return true;
  return false;
}

// Same bits (NaN matching NaN); `zero_sign`: +0 and −0 count as equal.
void expect_same(const std::vector<float>& ref, const std::vector<float>& got, const std::string& what,
                 bool zero_sign = false) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  size_t diff = 0, first = 0;
  for (size_t e = 0; e < ref.size(); ++e) {
    uint32_t a, b;
    std::memcpy(&a, &ref[e], 4);
    std::memcpy(&b, &got[e], 4);
    const bool same = std::isnan(ref[e]) ? std::isnan(got[e]) : a == b || (zero_sign && ref[e] == got[e]);
    if (!same && diff++ == 0) first = e;
  }
  EXPECT_EQ(diff, 0u) << what << ": " << diff << " of " << ref.size() << " values differ, first at " << first
                      << ": cpu " << ref[first] << " cuda " << got[first];
}

std::string type_name(GgmlType t) { return std::string(ggml_type_name(t)); }

// The embedding lookup returns whole rows (scale 1, an F32 table: no
// rounding), so its output is the device decode of those rows; the soft
// embedding reads the same blocks.
TEST(CudaGgml, EmbeddingRowsDecodeAsTheReference) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(type_name(t));
    Rng rng(500 + uint32_t(t));
    const int64_t V = 7, H = 512;
    auto q = ggml_weight(t, {V, H}, rng);
    Call cs;
    cs.call.kind = OpKind::kEmbedding;
    const std::vector<int32_t> ids = {3, 0, 6, 3, 5};
    Tensor& id = cs.input(Tensor::i32({int64_t(ids.size())}));
    id.i = ids;
    cs.weight("token_embd", q);
    cs.call.attrs.scale = 1.0f;
    const Tensor got = run_one(gpu, cs);
    std::vector<float> ref(ids.size() * size_t(H));
    for (size_t m = 0; m < ids.size(); ++m) dequantize_reference(*q, ids[m], 0, H, ref.data() + m * size_t(H));
    expect_same(ref, got.f, "embedding " + type_name(t));
    // The soft embedding over the same table (softmax(logits) · table): the
    // CPU's sums in another order, so within fp32 rounding.
    Call soft;
    soft.call.kind = OpKind::kSoftEmbedding;
    soft.input(uniform_tensor({3, V}, rng, -4, 4));
    soft.weight("token_embd", q);
    soft.call.attrs.scale = 1.0f;
    CpuBackendOptions co;
    co.threads = 1;
    CpuBackend cpu(co);
    const Tensor sref = run_one(cpu, soft), sgot = run_one(gpu, soft);
    ASSERT_EQ(sref.f.size(), sgot.f.size());
    double max_ref = 0, max_diff = 0;
    for (size_t e = 0; e < sref.f.size(); ++e) {
      max_ref = std::max(max_ref, double(std::fabs(sref.f[e])));
      max_diff = std::max(max_diff, double(std::fabs(sref.f[e] - sgot.f[e])));
    }
    EXPECT_GT(max_ref, 0.0);
    EXPECT_LE(max_diff, 1e-5 * max_ref) << "soft_embedding " << type_name(t);
  }
}

// A linear on the rows of the identity: output (m, n) is W[n, m] · 1 plus
// products with zero, so the device's decode of every element of W, up to
// the sign of a zero (−0 + 0 = +0).
TEST(CudaGgml, LinearOnOneHotRowsDecodesAsTheReference) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(type_name(t));
    Rng rng(700 + uint32_t(t));
    const int64_t N = 5, K = 256;
    auto q = ggml_weight(t, {N, K}, rng);
    Call cs;
    cs.call.kind = OpKind::kLinear;
    Tensor& x = cs.input(Tensor::f32({K, K}));
    for (int64_t k = 0; k < K; ++k) x.f[size_t(k * K + k)] = 1.0f;
    cs.weight("W", q);
    const Tensor got = run_one(gpu, cs);
    EXPECT_FALSE(launched_kernel(gpu, "linear.i8_gemm"));
    std::vector<float> w(size_t(N * K)), ref(size_t(K * N));
    for (int64_t n = 0; n < N; ++n) dequantize_reference(*q, n, 0, K, w.data() + n * K);
    for (int64_t m = 0; m < K; ++m)
      for (int64_t n = 0; n < N; ++n) ref[size_t(m * N + n)] = w[size_t(n * K + m)];
    expect_same(ref, got.f, "linear " + type_name(t), true);
  }
}

// The integer path against the CPU's int8-dot at its scalar level (every CPU
// level gives the same bits: tests/quantize/int8_dot_ggml_test.cc): a linear
// with a row and column tail (37 × 80, not multiples of the 32 × 64 tile), a
// NaN activation and an all-zero activation block, and routed experts over
// [E, N, K] blocks.
TEST(CudaGgml, IntegerPathBitIdenticalToTheCpuInt8Dot) {
  REQUIRE_CUDA_DEVICE();
  CpuBackendOptions so;
  so.threads = 2;
  so.int8_dot = true;
  so.isa = CpuIsa::kScalar;
  CpuBackend cpu(so);
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(type_name(t));
    CudaBackend gpu(parse_cuda_spec("cuda:int8-dot"));
    Rng rng(900 + uint32_t(t));
    const int64_t M = 37, K = 512, N = 80, E = 4, H = 256, I = 256;
    auto w = ggml_weight(t, {N, K}, rng);
    const bool integer = int8_dot_supported(*w);
    EXPECT_EQ(integer, t != GgmlType::kQ2_K) << "the CPU's choice";
    {
      Call cs;
      cs.call.kind = OpKind::kLinear;
      Tensor& x = cs.input(uniform_tensor({M, K}, rng, -2, 2));
      x.f[size_t(5 * K + 40)] = NAN;                                   // row 5, block 1
      for (int64_t k = 0; k < 32; ++k) x.f[size_t(9 * K + k)] = 0.0f;  // row 9, block 0: all zero
      cs.weight("W", w);
      const Tensor ref = run_one(cpu, cs), got = run_one(gpu, cs);
      EXPECT_EQ(launched_kernel(gpu, "linear.i8_gemm"), integer);
      if (integer) {
        expect_same(ref.f, got.f, "linear " + type_name(t));
        EXPECT_TRUE(std::isnan(got.f[size_t(5 * N)])) << "a NaN activation block must reach the outputs";
      } else {  // the exact path on both: the same values, summed in another order
        double max_ref = 0, max_diff = 0;
        for (size_t e = 0; e < ref.f.size(); ++e) {
          if (std::isnan(ref.f[e])) continue;
          max_ref = std::max(max_ref, double(std::fabs(ref.f[e])));
          max_diff = std::max(max_diff, double(std::fabs(ref.f[e] - got.f[e])));
        }
        EXPECT_LE(max_diff, 1e-5 * max_ref + 1e-6);
      }
    }
    if (!integer) continue;
    {
      Call cs;
      cs.call.kind = OpKind::kMoeExperts;
      cs.input(uniform_tensor({M, H}, rng, -1, 1));
      Tensor& idx = cs.input(Tensor::i32({M, 2}));
      for (int64_t m = 0; m < M; ++m) {
        idx.i[size_t(2 * m)] = int32_t((m * 3) % E);
        idx.i[size_t(2 * m + 1)] = int32_t((m * 3 + 1 + m % 2) % E);
      }
      cs.input(uniform_tensor({M, 2}, rng, 0, 1));
      cs.weight("experts.gate_up_proj", ggml_weight(t, {E, 2 * I, H}, rng));
      cs.weight("experts.down_proj", ggml_weight(t, {E, H, I}, rng));
      const Tensor ref = run_one(cpu, cs), got = run_one(gpu, cs);
      expect_same(ref.f, got.f, "moe_experts " + type_name(t));
      EXPECT_TRUE(launched_kernel(gpu, "moe_experts.down_i8")) << "the experts did not take the integer path";
    }
  }
}

// Plain GGUF tensors bind as plain weights; one bound as blocks is refused
// with its name and type.
TEST(CudaGgml, PlainTypeAsBlocksIsRefusedByName) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kGgml;
  q->ggml_type = GgmlType::kF16;
  q->dtype = DType::kF32;
  q->shape = {2, 32};
  q->rows = 2;
  q->cols = 32;
  q->block = 1;
  q->owned.push_back(std::vector<uint8_t>(128, 0));
  q->slices = {QuantSlice{0, 2, q->owned.back().data()}};
  Call cs;
  cs.call.kind = OpKind::kLinear;
  cs.input(Tensor::f32({1, 32}));
  cs.weight("blk.0.attn_q.weight", q);
  try {
    run_one(gpu, cs);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f16"), std::string::npos) << msg;
  }
}

#endif

}  // namespace
}  // namespace dgemma
