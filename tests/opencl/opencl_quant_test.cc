// Quantized weights on the OpenCL device (docs/opencl.md §1, §3): the decoders
// of kernels_quant.cl give exactly the values of the CPU's
// dequantize_reference() for every scheme and layout (whole tables looked up
// through embedding, bit for bit), and a quantized weight goes to the device
// once, packed: the bytes uploaded are those of its stored layout
// (docs/formats.md §2.2-§2.3, §3.3, §8.2), not of its fp32 values. The
// products over these weights are the op catalogue's opencl rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/backend.h"
#include "ops/op.h"
#include "quantize/quantized_weight.h"
#include "quantize/quantizers.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#include "opencl/opencl_test_support.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

std::unique_ptr<OpenClBackend> device_backend(const std::vector<OpenClDeviceInfo>& devices) {
  return std::make_unique<OpenClBackend>(OpenClBackendOptions{devices.back().platform, devices.back().device, false});
}

struct Scheme {
  const char* name;
  QuantScheme scheme;
  int block, bits;
  bool double_quant;
  DType logical;  // also the dtype of affine scales
  int64_t rows, cols;
  int64_t slice_rows = 0, scale_rows = 0;  // NVFP4: several slices and global scales
};

WeightRef quantized(const Scheme& s, Rng& rng) {
  const int64_t n = s.rows * s.cols;
  std::vector<float> v = uniform_values(n, rng, -1.5f, 1.5f);
  quant::QuantizeParams p;
  p.block = s.block;
  p.bits = s.bits;
  p.double_quant = s.double_quant;
  p.slice_rows = s.slice_rows;
  p.scale_rows = s.scale_rows;
  WeightRef w;
  w.name = s.name;
  w.shape = {s.rows, s.cols};
  w.quant = quant::quantize_weight(s.scheme, {DType::kF32, v.data(), n}, w.shape, s.logical, p);
  w.dtype = w.quant->dtype;
  w.data = w.quant->slices.front().codes;
  return w;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Every row of the table looked up (ids 0..rows-1), on the device.
Tensor lookup_all(Backend& b, const WeightRef& table, float scale, bool bf16_run) {
  Tensor ids = Tensor::i32({table.shape[0]});
  for (int32_t k = 0; k < int32_t(table.shape[0]); ++k) ids.i[size_t(k)] = k;
  Tensor out;
  OpCall c;
  c.kind = OpKind::kEmbedding;
  c.in = {&ids};
  c.w = {&table};
  c.out = {&out};
  c.attrs.scale = scale;
  c.attrs.round_to_bf16 = bf16_run;
  Executor(b).run(c);
  out.ensure_host();
  return out;
}

TEST(OpenClQuant, EveryDecoderGivesTheReferenceValues) {
  REQUIRE_OPENCL_DEVICE(devices);
  std::unique_ptr<OpenClBackend> cl = device_backend(devices);
  const std::vector<Scheme> schemes = {
      // NF4 blocks of 64 over rows of 40 columns: blocks straddle rows.
      {"nf4_dq", QuantScheme::kNF4, 64, 4, true, DType::kBF16, 24, 40},
      {"nf4", QuantScheme::kNF4, 32, 4, false, DType::kF32, 24, 40},
      {"nvfp4", QuantScheme::kNVFP4, 16, 4, false, DType::kBF16, 24, 64},
      {"nvfp4_slices", QuantScheme::kNVFP4, 16, 4, false, DType::kBF16, 24, 64, 4, 8},
      {"affine4_bf16", QuantScheme::kAffine, 32, 4, false, DType::kBF16, 24, 64},
      {"affine8_f16", QuantScheme::kAffine, 64, 8, false, DType::kF16, 24, 128},
      {"affine8_f32", QuantScheme::kAffine, 32, 8, false, DType::kF32, 24, 64},
      {"int8", QuantScheme::kInt8, 32, 8, false, DType::kF32, 24, 64},
      {"fp8_channel", QuantScheme::kFP8, 0, 8, false, DType::kBF16, 24, 48},
      {"fp8_block16", QuantScheme::kFP8, 16, 8, false, DType::kF32, 24, 64},
  };
  Rng rng(11);
  // Each weight is made after the last one was freed, often at its address:
  // the cache must not take it for the freed one.
  for (const Scheme& s : schemes) {
    SCOPED_TRACE(s.name);
    const WeightRef w = quantized(s, rng);
    if (s.slice_rows) {
      ASSERT_GT(w.quant->slices.size(), 2u);
    }
    OpCall probe;
    probe.kind = OpKind::kEmbedding;
    probe.w = {&w};
    std::string why;
    ASSERT_TRUE(cl->supports(probe, &why)) << why;
    for (bool bf16_run : {false, true}) {
      const float scale = bf16_run ? 2.5f : 1.0f;
      const Tensor got = lookup_all(*cl, w, scale, bf16_run);
      ASSERT_EQ(got.f.size(), size_t(s.rows * s.cols));
      std::vector<float> want(static_cast<size_t>(s.cols));
      int64_t mismatches = 0;
      for (int64_t r = 0; r < s.rows; ++r) {
        dequantize_reference(*w.quant, r, 0, s.cols, want.data());
        if (bf16_run) round_to_dtype(DType::kBF16, want.data(), s.cols);
        for (int64_t c = 0; c < s.cols; ++c) {
          const float expect = want[size_t(c)] * scale, have = got.f[size_t(r * s.cols + c)];
          if (bits_of(expect) != bits_of(have) && mismatches++ < 3)
            ADD_FAILURE() << "bf16 run " << bf16_run << ", element [" << r << ", " << c << "]: " << have
                          << ", the reference " << expect;
        }
      }
      EXPECT_EQ(mismatches, 0) << "bf16 run " << bf16_run;
    }
  }
}

// soft_embedding over a quantized table computes, bit for bit, what it
// computes over the table's dense copy (quantize/quantized_weight.h: fp32, or
// bf16 in a bf16 run), made by the CPU's reference dequantization.
TEST(OpenClQuant, SoftEmbeddingOverAQuantizedTableIsThatOverItsDenseCopy) {
  REQUIRE_OPENCL_DEVICE(devices);
  std::unique_ptr<OpenClBackend> cl = device_backend(devices);
  Rng rng(13);
  const int64_t M = 4, V = 40, H = 64;
  // Every table (and so its dense copies) lives to the end: the cache finds
  // plain weights by their data pointer, which a freed copy's successor could
  // reuse.
  std::deque<WeightRef> tables;
  for (const Scheme& s : {Scheme{"nf4_dq", QuantScheme::kNF4, 64, 4, true, DType::kBF16, V, H},
                          Scheme{"affine4", QuantScheme::kAffine, 32, 4, false, DType::kBF16, V, H},
                          Scheme{"fp8", QuantScheme::kFP8, 16, 8, false, DType::kF32, V, H}}) {
    SCOPED_TRACE(s.name);
    const WeightRef& table = tables.emplace_back(quantized(s, rng));
    Tensor logits = uniform_tensor({M, V}, rng, -4, 4);
    for (bool bf16_run : {false, true}) {
      const WeightRef& dense = table.quant->dense(bf16_run ? DType::kBF16 : DType::kF32);
      Tensor got, want;
      for (auto [w, out] : {std::pair{&table, &got}, std::pair{&dense, &want}}) {
        OpCall c;
        c.kind = OpKind::kSoftEmbedding;
        c.in = {&logits};
        c.w = {w};
        c.out = {out};
        c.attrs.scale = 1.5f;
        c.attrs.round_to_bf16 = bf16_run;
        Executor(*cl).run(c);
        out->ensure_host();
      }
      ASSERT_EQ(got.f.size(), size_t(M * H));
      for (size_t k = 0; k < got.f.size(); ++k)
        ASSERT_EQ(bits_of(got.f[k]), bits_of(want.f[k])) << "bf16 run " << bf16_run << ", element " << k;
    }
  }
}

// One linear over `w`, x of M rows; returns the weight bytes it uploaded.
int64_t run_linear(OpenClBackend& cl, const WeightRef& w, int64_t M, Rng& rng) {
  Tensor x = uniform_tensor({M, w.shape[1]}, rng, -1, 1), out;
  OpCall c;
  c.kind = OpKind::kLinear;
  c.in = {&x};
  c.w = {&w};
  c.out = {&out};
  cl.reset_traffic();
  Executor(cl).run(c);
  out.ensure_host();
  return cl.device_traffic()->weight_h2d_bytes;
}

TEST(OpenClQuant, AQuantizedWeightIsUploadedOnceInPackedForm) {
  REQUIRE_OPENCL_DEVICE(devices);
  Rng rng(5);
  const int64_t N = 48, K = 128;
  struct Case {
    Scheme s;
    int64_t packed;  // the stored layout's bytes (docs/formats.md)
  };
  const std::vector<Case> cases = {
      // int8 (§8.2): a byte per element, an fp32 scale per block of 64.
      {{"int8", QuantScheme::kInt8, 64, 8, false, DType::kF32, N, K}, N * K + N * (K / 64) * 4},
      // FP8 per channel (§8.2): a byte per element, an fp32 scale per row.
      {{"fp8", QuantScheme::kFP8, 0, 8, false, DType::kBF16, N, K}, N * K + N * 4},
      // NF4 with double quant (§2.2-§2.3): two codes a byte, a byte per block
      // of 64, an fp32 nested absmax per 256 blocks, and the two code books
      // (16 and 256 fp32 values).
      {{"nf4_dq", QuantScheme::kNF4, 64, 4, true, DType::kBF16, N, K}, N * K / 2 + N * K / 64 + 4 + (16 + 256) * 4},
      // NVFP4 in 4 slices of 12 rows (§3.3): two codes a byte, an E4M3 scale
      // per 16, and per slice its first row and global scale (8 bytes).
      {{"nvfp4", QuantScheme::kNVFP4, 16, 4, false, DType::kBF16, N, K, 12, 24}, N * K / 2 + N * K / 16 + 4 * 8},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.s.name);
    std::unique_ptr<OpenClBackend> cl = device_backend(devices);
    const WeightRef w = quantized(k.s, rng);
    EXPECT_EQ(run_linear(*cl, w, 3, rng), k.packed);
    EXPECT_EQ(cl->cached_weight_bytes(), k.packed);
    EXPECT_LT(k.packed, N * K * 2) << "less than even a bf16 copy";
    // Found again: nothing more goes up, for another op reading it too.
    EXPECT_EQ(run_linear(*cl, w, 5, rng), 0);
    EXPECT_EQ(lookup_all(*cl, w, 1.0f, false).f.size(), size_t(N * K));
    EXPECT_EQ(cl->device_traffic()->weight_h2d_bytes, 0);
    EXPECT_EQ(cl->cached_weight_bytes(), k.packed);
    // Released, it goes up again in full.
    cl->release_weight_copies();
    EXPECT_EQ(cl->cached_weight_bytes(), 0);
    EXPECT_EQ(run_linear(*cl, w, 1, rng), k.packed);
  }
}

// Expert weights as ModelOpt stores them, NVFP4 per expert and projection
// (docs/formats.md §3.2): each fused weight goes up once, its slices joined,
// with a first row and global scale per slice.
TEST(OpenClQuant, ExpertWeightsAreUploadedOnceInPackedForm) {
  REQUIRE_OPENCL_DEVICE(devices);
  std::unique_ptr<OpenClBackend> cl = device_backend(devices);
  Rng rng(9);
  const int64_t M = 3, k = 2, E = 4, H = 64, I = 32;
  Scheme gu_s{"experts.gate_up_proj", QuantScheme::kNVFP4, 16, 4, false, DType::kBF16, E * 2 * I, H, I, 2 * I};
  Scheme down_s{"experts.down_proj", QuantScheme::kNVFP4, 16, 4, false, DType::kBF16, E * H, I, H, H};
  WeightRef gu = quantized(gu_s, rng), down = quantized(down_s, rng);
  gu.shape = {E, 2 * I, H};
  down.shape = {E, H, I};
  ASSERT_EQ(gu.quant->slices.size(), size_t(2 * E));
  ASSERT_EQ(down.quant->slices.size(), size_t(E));
  Tensor x = uniform_tensor({M, H}, rng, -1, 1), idx = Tensor::i32({M, k}), wts = uniform_tensor({M, k}, rng, 0, 1);
  idx.i = {0, 3, 1, 2, 3, 0};
  Tensor out;
  OpCall c;
  c.kind = OpKind::kMoeExperts;
  c.in = {&x, &idx, &wts};
  c.w = {&gu, &down};
  c.out = {&out};
  const int64_t packed =
      (E * 2 * I * H / 2 + E * 2 * I * H / 16 + 2 * E * 8) + (E * H * I / 2 + E * H * I / 16 + E * 8);
  for (int run = 0; run < 2; ++run) {
    cl->reset_traffic();
    Executor(*cl).run(c);
    out.ensure_host();
    EXPECT_EQ(cl->device_traffic()->weight_h2d_bytes, run == 0 ? packed : 0) << "run " << run;
    EXPECT_EQ(cl->cached_weight_bytes(), packed);
  }
}

// Layouts the decoders do not read are refused before any device work,
// naming the weight and what is wrong; so are quantized weights in ops
// without a quantized kernel.
TEST(OpenClQuant, RefusesLayoutsTheDecodersDoNotRead) {
  Rng rng(3);
  Scheme affine{"experts", QuantScheme::kAffine, 32, 4, false, DType::kBF16, 8, 64};
  WeightRef w = quantized(affine, rng);
  Tensor x = Tensor::f32({2, 64}), out;
  OpCall lin;
  lin.kind = OpKind::kLinear;
  lin.in = {&x};
  lin.w = {&w};
  lin.out = {&out};
  std::string why;
  EXPECT_TRUE(opencl_supports(lin, &why)) << why;
  auto& q = const_cast<QuantizedWeight&>(*w.quant);
  q.scale_dtype = DType::kF64;
  EXPECT_FALSE(opencl_supports(lin, &why));
  EXPECT_EQ(why, "weight 'experts': affine weight with F64 scales: the OpenCL decoders read F32, BF16 and F16 scales");
  q.scale_dtype = DType::kBF16;
  q.block = 48;
  EXPECT_FALSE(opencl_supports(lin, &why));
  EXPECT_EQ(why,
            "weight 'experts': affine weight of 64 columns in blocks of 48: the OpenCL decoders need whole blocks per "
            "row");
  q.block = 32;
  OpCall scale = lin;
  scale.kind = OpKind::kScale;
  EXPECT_FALSE(opencl_supports(scale, &why));
  EXPECT_EQ(why,
            "weight 'experts' is quantized: scale does not take quantized weights on OpenCL (linear, embedding, "
            "soft_embedding and moe_experts do)");
  // Bound with its dense fp32 copy (router.proj of MLX conversions,
  // quantize/quantized_weight.h), an op that does not decode reads the copy.
  q.bound_dense = true;
  WeightRef bound = w;
  const WeightRef& dense = w.quant->dense(DType::kF32);
  bound.data = dense.data;
  bound.dtype = DType::kF32;
  OpCall router;
  router.kind = OpKind::kRouterTopk;
  router.w = {&bound};
  EXPECT_TRUE(opencl_supports(router, &why)) << why;
  lin.w = {&bound};
  EXPECT_TRUE(opencl_supports(lin, &why)) << why;  // decoded from the codes
}

#else

TEST(OpenClQuant, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend (DGEMMA_OPENCL)"; }

#endif

}  // namespace
}  // namespace dgemma
