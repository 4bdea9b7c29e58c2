// The CUDA backend against the CPU reference, op by op on random shapes (in
// the plain, sync and debug modes), its fault guards (canaries, NaN-filled
// fresh buffers, host index checks, launch log, address map), and `dgemma
// doctor` on golden_a. They run on a GPU, or on the emulated device of a
// DGEMMA_CUDA=EMULATE build (the sanitizer build of scripts/build.sh: kernels
// on the CPU, cuda_emulator/grid_runner.h), which is how CI runs them. Without a
// CUDA device every device test is skipped with the reason (GTEST_SKIP,
// reported as skipped by ctest); without a CUDA build the whole file is one
// skipped test.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "doctor/doctor.h"
#include "dgemma/error.h"
#include "backend/cpu/cpu_backend.h"
#include "ops/op.h"
#include "quantize/quantized_weight.h"
#include "quantize/quantizers.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "cuda/require_device.h"
#endif

namespace dgemma {
namespace {

#if !DGEMMA_HAVE_CUDA

TEST(CudaBackend, NotBuilt) { GTEST_SKIP() << "this build has no CUDA backend (nvcc not found or DGEMMA_CUDA=OFF)"; }

#else

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

// Inputs and weights of one op call, with stable addresses.
struct Case {
  std::deque<Tensor> in;
  std::deque<std::vector<float> > f32_data;
  std::deque<std::vector<uint16_t> > u16_data;
  std::deque<WeightRef> weights;
  OpCall call;
  std::string what;  // for failure messages

  Tensor& input_f32(std::vector<int64_t> shape, Rng& r, float lo, float hi) {
    in.push_back(uniform_tensor(std::move(shape), r, lo, hi));
    call.in.push_back(&in.back());
    return in.back();
  }
  Tensor& input_i32(std::vector<int64_t> shape, std::vector<int32_t> values) {
    in.push_back(Tensor::i32(std::move(shape)));
    in.back().i = std::move(values);
    call.in.push_back(&in.back());
    return in.back();
  }
  const WeightRef* weight(const std::string& name, std::vector<int64_t> shape, DType dt, Rng& r, float lo, float hi) {
    WeightRef w;
    w.name = name;
    w.dtype = dt;
    w.shape = std::move(shape);
    const int64_t n = w.numel();
    std::vector<float> v = uniform_values(n, r, lo, hi);
    if (dt == DType::kF32) {
      f32_data.push_back(std::move(v));
      w.data = f32_data.back().data();
    } else {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      for (size_t k = 0; k < h.size(); ++k) h[k] = dt == DType::kBF16 ? f32_to_bf16(v[k]) : f32_to_f16(v[k]);
      u16_data.push_back(std::move(h));
      w.data = u16_data.back().data();
    }
    weights.push_back(std::move(w));
    call.w.push_back(&weights.back());
    return &weights.back();
  }
};

std::string dt_name(DType dt) { return std::string(dtype_name(dt)); }

// Whether `gpu` runs its bf16 products on the tensor cores (bf16-dot).
bool dot_mode(const Backend& gpu) {
  const auto* c = dynamic_cast<const CudaBackend*>(&gpu);
  return c && c->options().bf16_dot;
}

// Runs the call on the CPU reference and on `gpu`, and compares: int32
// outputs exactly, fp32 outputs within atol + rtol·max|reference| (NaN where
// the reference has NaN). A GPU in the dot mode is compared with the CPU in
// its dot mode (the same activations rounded to bf16: only the fp32 sums'
// order differs, and a rounded activation may land one bf16 step away where
// its fp32 input differed by an ulp); where this CPU has no dot mode
// (AVX512_BF16), with the exact CPU, whose unrounded activations differ by up
// to 2^-9 relative each.
void expect_matches_cpu(Backend& gpu, Case& cs, size_t nout, double rtol = 1e-4, double atol = 1e-5) {
  SCOPED_TRACE(cs.what);
  std::vector<Tensor> ref(nout), got(nout);
  OpCall rc = cs.call, gc = cs.call;
  rc.out.clear();
  gc.out.clear();
  for (size_t k = 0; k < nout; ++k) {
    rc.out.push_back(&ref[k]);
    gc.out.push_back(&got[k]);
  }
  prepare_op(rc);
  CpuBackendOptions ro;
  ro.threads = 2;
  ro.bf16_dot = dot_mode(gpu);
  const auto* cuda = dynamic_cast<const CudaBackend*>(&gpu);
  ro.int8_dot = cuda && cuda->options().int8_dot;
  CpuBackend cpu(ro);
  // The dot mode's products: bf16 weights, and FP8 ones with a scale per
  // channel or per block of 32k columns (bf16 activations on both sides when
  // the CPU has the mode).
  // Attention in the dot mode rounds Q, K, V and the probabilities alike.
  const bool dot_product =
      dot_mode(gpu) && (cs.call.kind == OpKind::kAttention ||
                        ((cs.call.kind == OpKind::kLinear || cs.call.kind == OpKind::kMoeExperts) &&
                         std::any_of(cs.call.w.begin(), cs.call.w.end(), [](const WeightRef* w) {
                           return w->quant ? fp8_dot_weights(*w->quant) : w->dtype == DType::kBF16;
                         })));
  // Attention: each probability is rounded at its block's running maximum,
  // which differs between the CPU's key blocks (128) and the device's tiles,
  // so a rounded probability may differ by one bf16 step (2^-8 relative),
  // and the output by up to 2^-8 of the largest |v|.
  if (dot_product) rtol = std::max(rtol, !cpu.bf16_dot() ? 3e-2 : cs.call.kind == OpKind::kAttention ? 5e-3 : 2e-3);
  cpu.run(rc);
  prepare_op(gc);
  ASSERT_NO_THROW(gpu.run(gc));
  for (size_t k = 0; k < nout; ++k) {
    ASSERT_EQ(ref[k].shape, got[k].shape);
    if (ref[k].dtype == DType::kI32) {
      EXPECT_EQ(ref[k].i, got[k].i) << "output " << k;
      continue;
    }
    double max_ref = 0, max_abs = 0;
    size_t worst = 0, nan_mismatch = 0;
    for (size_t e = 0; e < ref[k].f.size(); ++e) {
      const double a = ref[k].f[e], b = got[k].f[e];
      if (std::isnan(a) || std::isnan(b)) {
        nan_mismatch += std::isnan(a) != std::isnan(b);
        continue;
      }
      max_ref = std::max(max_ref, std::fabs(a));
      const double d = std::fabs(a - b);
      if (!(d <= max_abs)) {
        max_abs = d;
        worst = e;
      }
    }
    EXPECT_EQ(nan_mismatch, 0u) << "output " << k << ": NaN in one backend only";
    EXPECT_LE(max_abs, atol + rtol * max_ref) << "output " << k << ": element " << worst << " cpu " << ref[k].f[worst]
                                              << " cuda " << got[k].f[worst] << " (max |ref| " << max_ref << ")";
  }
}

// ---- ops vs the CPU reference, in each mode ----------------------------------

class CudaOps : public ::testing::TestWithParam<const char*> {
 protected:
  // A parameter "SPEC+chunked" runs SPEC with a tiny scratch bound, so that
  // every op that works in chunks (widened weights, softmax rows, attention
  // rows) takes several on these small shapes.
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    std::string spec = GetParam();
    const size_t plus = spec.find('+');
    CudaBackendOptions o = parse_cuda_spec(spec.substr(0, plus));
    if (plus != std::string::npos) o.scratch_elems = 257;
    backend_ = std::make_unique<CudaBackend>(o);
  }
  Backend& gpu() { return *backend_; }
  std::unique_ptr<CudaBackend> backend_;
};

constexpr int kCases = 4;
const DType kWeightTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

TEST_P(CudaOps, Embedding) {
  for (int s = 0; s < kCases; ++s)
    for (DType dt : kWeightTypes) {
      Rng r(uint32_t(100 + s));
      Case cs;
      const int64_t V = r.uniform_int(1, 50), H = s == 0 ? 700 : r.uniform_int(1, 300), M = r.uniform_int(1, 20);
      std::vector<int32_t> ids = uniform_ints(M, 0, V - 1, r);
      cs.call.kind = OpKind::kEmbedding;
      cs.input_i32({M}, ids);
      cs.weight("table", {V, H}, dt, r, -1, 1);
      cs.call.attrs.scale = r.uniform_real(0.5f, 8.0f);
      cs.what = "embedding V=" + std::to_string(V) + " H=" + std::to_string(H) + " M=" + std::to_string(M) + " " +
                dt_name(dt);
      expect_matches_cpu(gpu(), cs, 1);
    }
}

TEST_P(CudaOps, SoftEmbedding) {
  for (int s = 0; s < kCases; ++s)
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Rng r(uint32_t(200 + s));
      Case cs;
      const int64_t M = r.uniform_int(1, 8), V = s == 0 ? 3000 : r.uniform_int(1, 600), H = r.uniform_int(1, 200);
      cs.call.kind = OpKind::kSoftEmbedding;
      cs.input_f32({M, V}, r, -6, 6);
      cs.weight("table", {V, H}, dt, r, -1, 1);
      cs.call.attrs.scale = r.uniform_real(0.5f, 8.0f);
      // A bf16 run (round_to_bf16) over a bf16 table: bf16 probabilities,
      // the product on the tensor cores.
      cs.call.attrs.round_to_bf16 = s % 2 == 1;
      cs.what = "soft_embedding M=" + std::to_string(M) + " V=" + std::to_string(V) + " H=" + std::to_string(H) + " " +
                dt_name(dt) + (cs.call.attrs.round_to_bf16 ? " (bf16 run)" : "");
      // bf16 tables round the probabilities to bf16: an ulp of difference in
      // expf can move one probability by a bf16 step.
      expect_matches_cpu(gpu(), cs, 1, dt == DType::kBF16 ? 1e-2 : 1e-4);
    }
}

TEST_P(CudaOps, RmsNorm) {
  for (int s = 0; s < kCases; ++s)
    for (DType dt : kWeightTypes)
      for (bool with_weight : {true, false}) {
        Rng r(uint32_t(300 + s));
        Case cs;
        const int64_t D = s == 0 ? 1200 : r.uniform_int(1, 300);
        std::vector<int64_t> shape = {r.uniform_int(1, 5), D};
        if (s % 2) shape.insert(shape.begin(), r.uniform_int(1, 3));
        cs.call.kind = OpKind::kRmsNorm;
        cs.input_f32(shape, r, -3, 3);
        if (with_weight) cs.weight("norm", {D}, dt, r, 0.5, 1.5);
        cs.call.attrs.eps = 1e-6f;
        cs.what = "rms_norm " + shape_string(shape) + " " + (with_weight ? dt_name(dt) : std::string("no weight"));
        expect_matches_cpu(gpu(), cs, 1);
      }
}

TEST_P(CudaOps, Linear) {
  for (int s = 0; s < kCases; ++s)
    for (DType dt : kWeightTypes) {
      Rng r(uint32_t(400 + s));
      Case cs;
      const int64_t M = r.uniform_int(1, 20), K = s == 0 ? 700 : r.uniform_int(1, 300), N = r.uniform_int(1, 300);
      cs.call.kind = OpKind::kLinear;
      cs.input_f32({M, K}, r, -1, 1);
      cs.weight("W", {N, K}, dt, r, -0.5, 0.5);
      cs.what =
          "linear M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + " " + dt_name(dt);
      expect_matches_cpu(gpu(), cs, 1);
    }
}

TEST_P(CudaOps, Rope) {
  for (int s = 0; s < 2 * kCases; ++s) {
    Rng r(uint32_t(500 + s));
    Case cs;
    const int64_t M = r.uniform_int(1, 10), heads = r.uniform_int(1, 5), d = 2 * r.uniform_int(1, 64);
    std::vector<int32_t> pos = uniform_ints(M, 0, 8000, r);
    cs.call.kind = OpKind::kRope;
    cs.input_f32({M, heads, d}, r, -2, 2);
    cs.input_i32({M}, pos);
    cs.call.attrs.rope_pairs = int(s == 0 ? 0 : s == 1 ? d / 2 : r.uniform_int(0, d / 2));
    cs.call.attrs.rope_theta = s % 2 ? 1e6 : 1e4;
    cs.what = "rope M=" + std::to_string(M) + " heads=" + std::to_string(heads) + " d=" + std::to_string(d) +
              " pairs=" + std::to_string(cs.call.attrs.rope_pairs);
    expect_matches_cpu(gpu(), cs, 1);
  }
}

// Whether one of the backend's recent launches (its log of the last 64),
// those after launch number `after` only, ran `kernel`.
bool launched_kernel(const CudaBackend& gpu, const std::string& kernel, uint64_t after = 0) {
  for (const CudaLaunchRecord& r : gpu.recent_launches())
    if (r.kernel == kernel && r.seq > after) return true;
  return false;
}
uint64_t last_launch(const CudaBackend& gpu) {
  const std::vector<CudaLaunchRecord> log = gpu.recent_launches();
  return log.empty() ? 0 : log.back().seq;
}

// Cases 0-3 small (case 1 without any key; 2 and 3 grouped queries); 4 and
// 5 several blocks of query rows and key tiles at head dims 512 and 100.
// From case 2 on the keys come in two segments: a cache (whose first rows
// skip_rows leaves out) and the new rows (ops/op.h attention_keys).
TEST_P(CudaOps, Attention) {
  // The same mode with attention as two cuBLAS products (cuda:cublas-attention).
  CudaBackendOptions po = backend_->options();
  po.cublas_attention = true;
  CudaBackend products(po);
  const AttentionMask masks[] = {AttentionMask::kNone, AttentionMask::kCausalWindow, AttentionMask::kCommittedWindow};
  for (int s = 0; s < kCases + 2; ++s)
    for (AttentionMask mask : masks) {
      Rng r(uint32_t(600 + s));
      Case cs;
      const int64_t M = s == 4 ? 20 : s == 5 ? 70 : r.uniform_int(1, 12);
      const int64_t Hk = s == 2 ? 2 : s == 3 ? 3 : s == 5 ? 1 : r.uniform_int(1, 3);
      const int64_t Hq = Hk * (s == 2 ? 3 : s == 3 || s == 4 ? 2 : s == 5 ? 1 : r.uniform_int(1, 3));
      const int64_t d = s == 0 ? 256 : s == 4 ? 512 : s == 5 ? 100 : r.uniform_int(1, 80);
      const int64_t S = s == 1 ? 0 : s == 4 ? 21 : s == 5 ? 3 : r.uniform_int(1, 40);
      const int64_t C = s < 2    ? -1
                        : s == 4 ? 37
                        : s == 5 ? 45
                                 : r.uniform_int(0, 30),
                    skip = C > 0 ? r.uniform_int(0, C) : 0;
      const int64_t kept = std::max<int64_t>(C, 0) - skip;
      std::vector<int32_t> qpos(static_cast<size_t>(M)), kpos(static_cast<size_t>(S));
      const int32_t q0 = int32_t(r.uniform_int(0, kept + S + 10));
      for (int64_t m = 0; m < M; ++m) qpos[size_t(m)] = q0 + int32_t(m);
      std::iota(kpos.begin(), kpos.end(), int32_t(kept));
      cs.call.kind = OpKind::kAttention;
      cs.input_f32({M, Hq, d}, r, -1, 1);
      cs.input_f32({S, Hk, d}, r, -1, 1);
      cs.input_f32({S, Hk, d}, r, -1, 1);
      cs.input_i32({M}, qpos);
      cs.input_i32({S}, kpos);
      if (C >= 0) {
        std::vector<int32_t> cpos(static_cast<size_t>(C));
        std::iota(cpos.begin(), cpos.end(), int32_t(-skip));
        cs.input_f32({C, Hk, d}, r, -1, 1);
        cs.input_f32({C, Hk, d}, r, -1, 1);
        cs.input_i32({C}, cpos);
        cs.call.attrs.skip_rows = skip;
      }
      cs.call.attrs.mask = mask;
      cs.call.attrs.window = int(r.uniform_int(mask == AttentionMask::kCausalWindow ? 0 : 1, 20));
      cs.call.attrs.first_canvas_pos = r.uniform_int(0, kept + S);
      cs.what = "attention M=" + std::to_string(M) + " Hq=" + std::to_string(Hq) + " Hk=" + std::to_string(Hk) +
                " d=" + std::to_string(d) + " S=" + std::to_string(S) + " cache=" + std::to_string(C) +
                " skip=" + std::to_string(skip) + " mask=" + std::to_string(int(mask)) +
                " window=" + std::to_string(cs.call.attrs.window);
      {
        SCOPED_TRACE("the attention kernel");
        expect_matches_cpu(gpu(), cs, 1);
      }
      SCOPED_TRACE("cuda:cublas-attention");
      expect_matches_cpu(products, cs, 1);
    }
  // The dot mode takes the tensor cores where the head dim is a multiple of
  // 8 (d = 256 and 512 above; one of 8 zero-padded to 16 in the tile), the
  // fp32 kernel (rounding alike) elsewhere (d = 100).
  EXPECT_TRUE(launched_kernel(*backend_, "attention.flash"));
  EXPECT_EQ(launched_kernel(*backend_, "attention.tensor_cores"), dot_mode(gpu()));
  EXPECT_TRUE(launched_kernel(products, "attention.softmax"));
}

TEST_P(CudaOps, RouterTopk) {
  for (int s = 0; s < kCases; ++s)
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Rng r(uint32_t(700 + s));
      Case cs;
      const int64_t M = r.uniform_int(1, 10), H = s == 0 ? 700 : r.uniform_int(1, 300),
                    E = s == 0 ? 128 : r.uniform_int(1, 40);
      cs.call.kind = OpKind::kRouterTopk;
      cs.input_f32({M, H}, r, -2, 2);
      cs.weight("router.scale", {H}, dt, r, 0.5, 1.5);
      cs.weight("router.proj", {E, H}, dt, r, -1, 1);
      cs.weight("router.per_expert_scale", {E}, dt, r, 0.5, 2.0);
      cs.call.attrs.eps = 1e-6f;
      cs.call.attrs.top_k = int(r.uniform_int(1, std::min<int64_t>(E, 8)));
      cs.what = "router_topk M=" + std::to_string(M) + " H=" + std::to_string(H) + " E=" + std::to_string(E) +
                " k=" + std::to_string(cs.call.attrs.top_k) + " " + dt_name(dt);
      expect_matches_cpu(gpu(), cs, 2);
    }
}

TEST_P(CudaOps, MoeExperts) {
  for (int s = 0; s < kCases; ++s)
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Rng r(uint32_t(800 + s));
      Case cs;
      const int64_t M = r.uniform_int(1, 6), H = r.uniform_int(1, 100), I = r.uniform_int(1, 70),
                    E = r.uniform_int(1, 10), K = r.uniform_int(1, std::min<int64_t>(E, 4));
      std::vector<int32_t> idx = distinct_expert_ids(M, E, K, r);
      cs.call.kind = OpKind::kMoeExperts;
      cs.input_f32({M, H}, r, -1, 1);
      cs.input_i32({M, K}, idx);
      cs.input_f32({M, K}, r, 0, 1);
      cs.weight("experts.gate_up_proj", {E, 2 * I, H}, dt, r, -0.5, 0.5);
      cs.weight("experts.down_proj", {E, H, I}, dt, r, -0.5, 0.5);
      cs.what = "moe_experts M=" + std::to_string(M) + " H=" + std::to_string(H) + " I=" + std::to_string(I) +
                " E=" + std::to_string(E) + " K=" + std::to_string(K) + " " + dt_name(dt);
      expect_matches_cpu(gpu(), cs, 1);
    }
}

// Experts with many rows each and shapes off the tensor-core tiles: several
// 32-row tiles per expert, output features past a 64-column tile, hidden
// sizes that are a multiple of 8 but not of 32 (16-byte loads, a short last k
// step) and odd ones (element loads).
TEST_P(CudaOps, MoeExpertsManyRowsPerExpert) {
  for (int s = 0; s < 3; ++s) {
    Rng r(uint32_t(850 + s));
    Case cs;
    const int64_t M = 70, E = 3, K = 2, H = s == 0 ? 136 : s == 1 ? 99 : 64, I = s == 2 ? 72 : 40;
    std::vector<int32_t> idx;
    for (int64_t m = 0; m < M; ++m) {
      idx.push_back(int32_t(m % E));
      idx.push_back(int32_t((m + 1 + m % 2) % E));
    }
    cs.call.kind = OpKind::kMoeExperts;
    cs.input_f32({M, H}, r, -1, 1);
    cs.input_i32({M, K}, idx);
    cs.input_f32({M, K}, r, 0, 1);
    cs.weight("experts.gate_up_proj", {E, 2 * I, H}, DType::kBF16, r, -0.5, 0.5);
    cs.weight("experts.down_proj", {E, H, I}, DType::kBF16, r, -0.5, 0.5);
    cs.what = "moe_experts M=70 H=" + std::to_string(H) + " I=" + std::to_string(I) + " E=3 K=2 bf16";
    expect_matches_cpu(gpu(), cs, 1);
  }
}

TEST_P(CudaOps, Elementwise) {
  for (int s = 0; s < kCases; ++s) {
    Rng r(uint32_t(900 + s));
    const std::vector<int64_t> shape =
        s == 0 ? std::vector<int64_t>{300001} : std::vector<int64_t>{r.uniform_int(1, 9), r.uniform_int(1, 700)};
    for (OpKind kind : {OpKind::kGeluGlu, OpKind::kAdd, OpKind::kScale, OpKind::kSoftcap}) {
      Case cs;
      cs.call.kind = kind;
      // Wide ranges: gelu and softcap must saturate, never produce NaN.
      cs.input_f32(shape, r, -60, 60);
      if (kind == OpKind::kGeluGlu || kind == OpKind::kAdd) cs.input_f32(shape, r, -3, 3);
      if (kind == OpKind::kScale) cs.weight("s", {1}, DType::kBF16, r, 0.5, 40);
      cs.call.attrs.cap = 30.0f;
      cs.what = std::string(op_name(kind)) + " " + shape_string(shape);
      expect_matches_cpu(gpu(), cs, 1);
    }
  }
}

// Quantized weights stay packed on the device and are dequantized per
// element by the kernels: every scheme (NF4 with and without double quant,
// NVFP4 in per-expert slices, MLX affine 4/8 bits with bf16/f16/f32 scales,
// int8, FP8) through the ops that take quantized weights, against the CPU's
// quantized kernels.
struct QuantCase {
  const char* label;
  QuantScheme scheme;
  int block, bits;
  bool double_quant;
  DType logical;  // also the dtype of affine scales and biases
};

// Every scheme and scale layout the backend reads: NF4 with and without
// double quantization, NVFP4, MLX affine 4/8-bit with bf16, f16 and f32
// scales, int8.
const QuantCase kQuantCases[] = {
    {"nf4 double quant", QuantScheme::kNF4, 64, 4, true, DType::kBF16},
    {"nf4", QuantScheme::kNF4, 32, 4, false, DType::kF32},
    {"nvfp4", QuantScheme::kNVFP4, 16, 4, false, DType::kBF16},
    {"affine4 bf16 scales", QuantScheme::kAffine, 32, 4, false, DType::kBF16},
    {"affine8 f16 scales", QuantScheme::kAffine, 64, 8, false, DType::kF16},
    {"affine4 f32 scales", QuantScheme::kAffine, 32, 4, false, DType::kF32},
    {"affine8 f32 scales", QuantScheme::kAffine, 32, 8, false, DType::kF32},
    {"int8", QuantScheme::kInt8, 64, 8, false, DType::kF32},
};
// FP8 E4M3 (quantize at load): a scale per output channel (block 0: the
// row), per 32 and per 64 columns (the dot mode's tensor cores), and per 16
// (the exact path in every mode). Not integers: the integer mode leaves them
// on the exact path, so only the exact ops test them.
const QuantCase kFp8Cases[] = {
    {"fp8 per channel", QuantScheme::kFP8, 0, 8, false, DType::kBF16},
    {"fp8 block 32", QuantScheme::kFP8, 32, 8, false, DType::kF32},
    {"fp8 block 64", QuantScheme::kFP8, 64, 8, false, DType::kF32},
    {"fp8 block 16", QuantScheme::kFP8, 16, 8, false, DType::kF32},
};

// Binds a quantized weight as the call's next weight.
const WeightRef* bind_quant_weight(Case& cs, const std::string& name, std::shared_ptr<const QuantizedWeight> qw) {
  WeightRef w;
  w.name = name;
  w.dtype = qw->dtype;
  w.shape = qw->shape;
  w.data = qw->slices.front().codes;
  w.quant = std::move(qw);
  cs.weights.push_back(std::move(w));
  cs.call.w.push_back(&cs.weights.back());
  return &cs.weights.back();
}

const WeightRef* add_quant_weight(Case& cs, const QuantCase& q, const std::string& name, std::vector<int64_t> shape,
                                  Rng& r, int64_t slice_rows = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v = uniform_values(n, r, -0.5f, 0.5f);
  quant::QuantizeParams p;
  p.block = q.block;
  p.bits = q.bits;
  p.double_quant = q.double_quant;
  p.slice_rows = p.scale_rows = q.scheme == QuantScheme::kNVFP4 ? slice_rows : 0;
  return bind_quant_weight(cs, name, quant::quantize_weight(q.scheme, {DType::kF32, v.data(), n}, shape, q.logical, p));
}

// A moe_experts case over quantized experts: x [M, H] in [-1, 1], each
// token routed to two distinct experts of E with weights in [0, 1], gate_up
// [E, 2I, H] and down [E, H, I] (NVFP4: one slice per expert projection).
void add_quantized_experts(Case& cs, const QuantCase& q, Rng& r, int64_t M, int64_t H, int64_t I, int64_t E) {
  cs.call.kind = OpKind::kMoeExperts;
  cs.input_f32({M, H}, r, -1, 1);
  std::vector<int32_t> idx;
  for (int64_t m = 0; m < M; ++m) {
    idx.push_back(int32_t((m * 3) % E));
    idx.push_back(int32_t((m * 3 + 1 + m % 2) % E));
  }
  cs.input_i32({M, 2}, idx);
  cs.input_f32({M, 2}, r, 0, 1);
  add_quant_weight(cs, q, "experts.gate_up_proj", {E, 2 * I, H}, r, I);
  add_quant_weight(cs, q, "experts.down_proj", {E, H, I}, r, H);
}

TEST_P(CudaOps, QuantizedWeights) {
  std::vector<QuantCase> cases(std::begin(kQuantCases), std::end(kQuantCases));
  cases.insert(cases.end(), std::begin(kFp8Cases), std::end(kFp8Cases));
  for (const QuantCase& q : cases) {
    SCOPED_TRACE(q.label);
    const uint64_t before = last_launch(*backend_);
    Rng r(1000 + uint32_t(q.scheme) * 10 + uint32_t(q.bits));
    const int64_t M = 5, K = 128, N = 48, V = 40, E = 4, I = 64, H = 64;
    {  // linear (the LM head and every projection), NVFP4 in 3 slices
      Case cs;
      cs.call.kind = OpKind::kLinear;
      cs.input_f32({M, K}, r, -1, 1);
      add_quant_weight(cs, q, "W", {N, K}, r, 16);
      cs.what = std::string("linear ") + q.label;
      expect_matches_cpu(gpu(), cs, 1);
    }
    {  // embedding rows rounded to the logical dtype, then scaled: exact
      Case cs;
      cs.call.kind = OpKind::kEmbedding;
      cs.input_i32({6}, {0, 39, 7, 7, 12, 3});
      add_quant_weight(cs, q, "embed_tokens", {V, H}, r, 8);
      cs.call.attrs.scale = 8.0f;
      cs.what = std::string("embedding ") + q.label;
      expect_matches_cpu(gpu(), cs, 1, 0.0, 0.0);
    }
    {  // soft embedding over the table in its logical dtype
      Case cs;
      cs.call.kind = OpKind::kSoftEmbedding;
      cs.input_f32({3, V}, r, -4, 4);
      add_quant_weight(cs, q, "embed_tokens", {V, H}, r, 8);
      cs.call.attrs.scale = 8.0f;
      cs.what = std::string("soft_embedding ") + q.label;
      expect_matches_cpu(gpu(), cs, 1, q.logical == DType::kBF16 ? 1e-2 : 1e-4);
    }
    {  // routed experts: gate_up and down quantized (NVFP4: one slice per expert projection)
      Case cs;
      add_quantized_experts(cs, q, r, M, H, I, E);
      cs.what = std::string("moe_experts ") + q.label;
      expect_matches_cpu(gpu(), cs, 1);
    }
    // The dot mode multiplies FP8 weights with a scale per channel or per
    // block of 32k columns on the tensor cores (the codes widened to bf16 in
    // the tile); blocks of 16 and the other modes keep the exact path.
    const bool fp8_tc = dot_mode(gpu()) && q.scheme == QuantScheme::kFP8 && q.block % 32 == 0;
    EXPECT_EQ(launched_kernel(*backend_, "linear.fp8_gemm", before), fp8_tc) << "linear over " << q.label;
    EXPECT_EQ(launched_kernel(*backend_, "moe_experts.down_fp8", before), fp8_tc) << "experts over " << q.label;
  }
}

// The integer mode (cuda:int8-dot): products over quantized weights on int8
// activation blocks on the integer tensor cores, bit-identical to the CPU's
// int8-dot (the same integers, the same fp32 chain). Shapes with row and
// column tails (37 rows, 80 output features: not multiples of the 32 × 64
// tile) and several blocks per row; one activation row holds a NaN, whose
// blocks give NaN outputs in both. Experts are compared with the CPU's scalar
// level, whose gated activation is the same scalar expression as the
// device's (the vector levels use their own GELU); linears with every level.
void expect_bitwise(const Tensor& ref, const Tensor& got, const std::string& what) {
  ASSERT_EQ(ref.shape, got.shape) << what;
  size_t diff = 0, first = 0;
  for (size_t e = 0; e < ref.f.size(); ++e) {
    const bool same = std::isnan(ref.f[e]) ? std::isnan(got.f[e]) : ref.f[e] == got.f[e];
    if (!same && diff++ == 0) first = e;
  }
  EXPECT_EQ(diff, 0u) << what << ": " << diff << " of " << ref.f.size() << " outputs differ, first at " << first
                      << ": cpu " << ref.f[first] << " cuda " << got.f[first];
}

Tensor run_one(Backend& b, const Case& cs) {
  Tensor out;
  OpCall c = cs.call;
  c.out = {&out};
  prepare_op(c);
  b.run(c);
  return out;
}

TEST(CudaInt8Dot, BitIdenticalToTheCpuInt8Dot) {
  REQUIRE_CUDA_DEVICE();
  for (const char* spec : {"cuda:int8-dot", "cuda:sync,int8-dot"}) {
    CudaBackend gpu(parse_cuda_spec(spec));
    ASSERT_TRUE(gpu.options().int8_dot && gpu.options().bf16_dot) << spec;
    CpuBackendOptions so;
    so.threads = 2;
    so.int8_dot = true;
    so.isa = CpuIsa::kScalar;
    CpuBackend scalar(so);
    CpuBackendOptions fo = so;
    fo.isa.reset();
    CpuBackend fast(fo);
    for (const QuantCase& q : kQuantCases) {
      const std::string what = std::string(spec) + " " + q.label;
      SCOPED_TRACE(what);
      Rng r(3000 + uint32_t(q.scheme) * 10 + uint32_t(q.bits));
      const int64_t M = 37, K = 192, N = 80, E = 4, H = 128, I = 128;
      {
        Case cs;
        cs.call.kind = OpKind::kLinear;
        Tensor& x = cs.input_f32({M, K}, r, -2, 2);
        x.f[size_t(5 * K + 40)] = NAN;  // row 5, block 1
        x.f[size_t(9 * K + 3)] = 0.0f;  // a tiny block: row 9, columns 0..31 all zero
        for (int64_t k = 0; k < 32; ++k) x.f[size_t(9 * K + k)] = 0.0f;
        add_quant_weight(cs, q, "W", {N, K}, r, 16);
        const Tensor ref = run_one(scalar, cs), ref_fast = run_one(fast, cs), got = run_one(gpu, cs);
        expect_bitwise(ref, ref_fast, what + " linear, cpu levels");
        expect_bitwise(ref, got, what + " linear");
        EXPECT_TRUE(launched_kernel(gpu, "linear.i8_gemm")) << "the linear did not take the integer path";
        EXPECT_TRUE(std::isnan(got.f[size_t(5 * N)])) << "a NaN activation block must reach the outputs";
      }
      {
        Case cs;
        add_quantized_experts(cs, q, r, M, H, I, E);
        const Tensor ref = run_one(scalar, cs), got = run_one(gpu, cs);
        expect_bitwise(ref, got, what + " moe_experts");
        EXPECT_TRUE(launched_kernel(gpu, "moe_experts.down_i8")) << "the experts did not take the integer path";
      }
    }
  }
}

// Weights the integer path cannot tile (rows of K % 32 != 0 columns, like the
// golden models' shapes) keep the exact products, as on the CPU.
// The tensor-core FP8 path widens every E4M3 code to bf16 exactly (zeros,
// subnormals, both signs, the largest values, NaN): a linear over a weight
// holding each of the 256 codes once, with one scale per row, against the
// CPU on one-hot activations, where every output is one weight value times
// 1 (plus zeros), so the two must agree bit for bit. The two NaN codes sit
// alone in the last row (a NaN weight makes its whole output column NaN).
TEST(CudaFp8, EveryCodeWidensExactlyOnTheTensorCores) {
  REQUIRE_CUDA_DEVICE();
  const int64_t N = 17, K = 16;
  auto qw = std::make_shared<QuantizedWeight>();
  qw->scheme = QuantScheme::kFP8;
  qw->shape = {N, K};
  qw->dtype = DType::kBF16;
  qw->rows = N;
  qw->cols = K;
  qw->block = int(K);
  qw->bits = 8;
  qw->scale_dtype = DType::kF32;
  std::vector<uint8_t> codes(size_t(N * K)), scales(size_t(N) * 4);
  for (size_t i = 0; i < 256; ++i) codes[i] = (i & 0x7f) == 0x7f ? 0 : uint8_t(i);
  codes[256] = 0x7f;
  codes[257] = 0xff;
  for (int64_t n = 0; n < N; ++n) {
    const float sc = 0.5f + 0.37f * float(n);
    std::memcpy(scales.data() + n * 4, &sc, 4);
  }
  qw->owned.push_back(codes);
  qw->owned.push_back(scales);
  QuantSlice slice;
  slice.rows = N;
  slice.codes = qw->owned[0].data();
  slice.scales = qw->owned[1].data();
  qw->slices.push_back(slice);
  ASSERT_TRUE(fp8_per_channel(*qw));
  Case cs;
  cs.call.kind = OpKind::kLinear;
  std::vector<float> eye(size_t(K * K), 0.0f);
  for (int64_t k = 0; k < K; ++k) eye[size_t(k * K + k)] = 1.0f;
  cs.in.push_back(Tensor::f32({K, K}));
  cs.in.back().f = eye;
  cs.call.in.push_back(&cs.in.back());
  bind_quant_weight(cs, "W", qw);
  CpuBackendOptions so;
  so.threads = 1;
  so.isa = CpuIsa::kScalar;
  CpuBackend cpu(so);
  CudaBackend gpu(parse_cuda_spec("cuda:bf16-dot"));
  const Tensor ref = run_one(cpu, cs), got = run_one(gpu, cs);
  EXPECT_TRUE(launched_kernel(gpu, "linear.fp8_gemm"));
  expect_bitwise(ref, got, "fp8 codes 0..255");
  for (int64_t m = 0; m < K; ++m)
    for (int64_t n = 0; n < N; ++n)
      EXPECT_EQ(std::isnan(got.f[size_t(m * N + n)]), n == N - 1) << "output " << m << ", " << n;
}

TEST(CudaInt8Dot, UntiledWeightsKeepTheExactPath) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(parse_cuda_spec("cuda:int8-dot"));
  Rng r(31);
  Case cs;
  cs.call.kind = OpKind::kLinear;
  cs.input_f32({4, 48}, r, -1, 1);
  const QuantCase nf4{"nf4", QuantScheme::kNF4, 16, 4, false, DType::kF32};
  add_quant_weight(cs, nf4, "W", {24, 48}, r);
  expect_matches_cpu(gpu, cs, 1);
  EXPECT_FALSE(launched_kernel(gpu, "linear.i8_gemm"));
  EXPECT_EQ(gpu.name(), "cuda:int8-dot");
}

// What "stays packed" means: the device holds the NF4 codes and scales, not a
// widened copy (the fault reports name the buffers).
TEST(CudaGuards, QuantizedWeightsStayPackedOnTheDevice) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  Rng r(8);
  Case cs;
  cs.call.kind = OpKind::kLinear;
  cs.input_f32({2, 512}, r, -1, 1);
  const QuantCase nf4{"nf4", QuantScheme::kNF4, 64, 4, true, DType::kBF16};
  add_quant_weight(cs, nf4, "W", {512, 512}, r);
  expect_matches_cpu(gpu, cs, 1);
  const int64_t bf16_bytes = 512 * 512 * 2;
  EXPECT_GT(gpu.cached_weight_bytes(), 512 * 512 / 2);  // the codes are there
  EXPECT_LT(gpu.cached_weight_bytes(), bf16_bytes * 3 / 10) << "a quantized weight was widened on the device";
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaOps,
                         ::testing::Values("cuda", "cuda:sync", "cuda:debug", "cuda:debug+chunked", "cuda:bf16-dot",
                                           "cuda:debug,bf16-dot+chunked"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// ---- fault guards ----------------------------------------------------------------

Case add_case(Rng& r, int64_t n) {
  Case cs;
  cs.call.kind = OpKind::kAdd;
  cs.call.site = "residual";
  cs.call.layer = 2;
  cs.call.pass = Pass::kDecoder;
  cs.call.step = 3;
  cs.input_f32({n}, r, -1, 1);
  cs.input_f32({n}, r, -1, 1);
  return cs;
}

TEST(CudaGuards, CanaryCatchesAWritePastTheOutput) {
  REQUIRE_CUDA_DEVICE();
  CudaBackendOptions o;
  o.debug = true;
  o.test_fault = CudaBackendOptions::TestFault::kWritePastOutput;
  CudaBackend gpu(o);
  Rng r(1);
  Case cs = add_case(r, 1000);
  Tensor out;
  cs.call.out = {&out};
  prepare_op(cs.call);
  try {
    gpu.run(cs.call);
    FAIL() << "the canary did not catch the out-of-bounds write";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("op add (residual) in layer 2, decoder pass, step 3"), std::string::npos) << m;
    EXPECT_NE(m.find("wrote past output 0"), std::string::npos) << m;
    EXPECT_NE(m.find("test.write_past_output"), std::string::npos) << m;  // the launch log names the kernel
    EXPECT_NE(m.find("live device allocations"), std::string::npos) << m;
  }
}

TEST(CudaGuards, FreshBuffersAreNaNInDebugMode) {
  REQUIRE_CUDA_DEVICE();
  CudaBackendOptions o;
  o.debug = true;
  o.test_fault = CudaBackendOptions::TestFault::kSkipKernels;
  CudaBackend gpu(o);
  Rng r(2);
  Case cs = add_case(r, 77);
  Tensor out;
  cs.call.out = {&out};
  prepare_op(cs.call);
  // No kernel ran: the output is the NaN fill, which the sentinel reports.
  try {
    gpu.run(cs.call);
    FAIL() << "an unwritten output was not reported";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("output 0 [77] holds 77 non-finite values (first NaN at element 0)"), std::string::npos) << m;
  }
  for (float v : out.f) ASSERT_TRUE(std::isnan(v)) << "an unwritten output must read as NaN";
}

TEST(CudaGuards, NonFiniteOutputsNameTheOpThatMadeThemInDebugMode) {
  REQUIRE_CUDA_DEVICE();
  CudaBackendOptions o;
  o.debug = true;
  CudaBackend gpu(o);
  Rng r(4);
  Case cs = add_case(r, 64);
  cs.in[0].f[5] = 3e38f;  // finite, but the sum overflows
  cs.in[1].f[5] = 3e38f;
  Tensor out;
  cs.call.out = {&out};
  prepare_op(cs.call);
  try {
    gpu.run(cs.call);
    FAIL() << "an overflow to Inf was not reported";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("op add (residual) in layer 2, decoder pass, step 3"), std::string::npos) << m;
    EXPECT_NE(m.find("holds 1 non-finite values (first +Inf at element 5); its inputs are finite"), std::string::npos)
        << m;
  }
  cs.in[0].f[5] = std::nanf("");  // now it comes in with an input
  prepare_op(cs.call);
  try {
    gpu.run(cs.call);
    FAIL() << "a NaN from an input was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 already holds 1 non-finite values"), std::string::npos) << e.what();
  }
  // The plain mode does not scan (it is the fast path).
  CudaBackend plain;
  prepare_op(cs.call);
  EXPECT_NO_THROW(plain.run(cs.call));
  EXPECT_TRUE(std::isnan(out.f[5]));
}

TEST(CudaGuards, IndexInputsAreCheckedOnTheHost) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  Rng r(3);
  Case cs;
  cs.call.kind = OpKind::kEmbedding;
  cs.call.pass = Pass::kDecoder;
  cs.call.step = 1;
  cs.input_i32({3}, {0, 5, 1});
  cs.weight("embed_tokens", {4, 8}, DType::kF32, r, -1, 1);
  Tensor out;
  cs.call.out = {&out};
  prepare_op(cs.call);
  try {
    gpu.run(cs.call);
    FAIL() << "an out-of-range token id was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("op embedding (model level), decoder pass, step 1"), std::string::npos) << m;
    EXPECT_NE(m.find("token id 5 at row 1 is out of range [0, 4)"), std::string::npos) << m;
  }
  // The backend stays usable after a host-side rejection.
  cs.in[0].i[1] = 3;
  EXPECT_NO_THROW(gpu.run(cs.call));

  // Expert indices must be distinct per token (each expert's scatter-add
  // writes a token's row from one block).
  Case moe;
  moe.call.kind = OpKind::kMoeExperts;
  moe.input_f32({2, 8}, r, -1, 1);
  moe.input_i32({2, 2}, {0, 1, 2, 2});
  moe.input_f32({2, 2}, r, 0, 1);
  moe.weight("experts.gate_up_proj", {3, 8, 8}, DType::kF32, r, -1, 1);
  moe.weight("experts.down_proj", {3, 8, 4}, DType::kF32, r, -1, 1);
  Tensor moe_out;
  moe.call.out = {&moe_out};
  prepare_op(moe.call);
  try {
    gpu.run(moe.call);
    FAIL() << "a token routed twice to one expert was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 1 routes to expert 2 twice (top-k 0 and 1)"), std::string::npos)
        << e.what();
  }
  // (Out-of-range expert ids are rejected by prepare_op, before any backend.)
  moe.in[1].i = {0, 1, 2, 0};
  prepare_op(moe.call);
  EXPECT_NO_THROW(gpu.run(moe.call));
}

TEST(CudaGuards, LaunchLogAndAddressMap) {
  REQUIRE_CUDA_DEVICE();
  CudaBackendOptions o;
  o.debug = true;
  CudaBackend gpu(o);
  Rng r(4);
  Case cs;
  cs.call.kind = OpKind::kLinear;
  cs.call.site = "self_attn.q_proj";
  cs.call.layer = 1;
  cs.input_f32({3, 40}, r, -1, 1);
  cs.weight("layers.1.q_proj.weight", {24, 40}, DType::kF32, r, -1, 1);
  Tensor out;
  cs.call.out = {&out};
  prepare_op(cs.call);
  gpu.run(cs.call);
  std::vector<CudaLaunchRecord> log = gpu.recent_launches();
  ASSERT_FALSE(log.empty());
  const CudaLaunchRecord& gemm = log.back();
  EXPECT_EQ(gemm.kernel, "cublasGemmEx");
  ASSERT_EQ(gemm.args.size(), 3u);  // weight, x, out
  EXPECT_NE(gpu.describe_address(static_cast<const char*>(gemm.args[0]) + 8).find("weight layers.1.q_proj.weight"),
            std::string::npos);
  const std::string freed = gpu.describe_address(gemm.args[2]);
  EXPECT_NE(freed.find("freed memory"), std::string::npos) << freed;
  EXPECT_NE(freed.find("output 0 of op linear (self_attn.q_proj) in layer 1"), std::string::npos) << freed;
  int local = 0;
  EXPECT_NE(gpu.describe_address(&local).find("not a known allocation"), std::string::npos);
  // The log keeps the last 64 launches.
  Case add = add_case(r, 10);
  Tensor sum;
  add.call.out = {&sum};
  prepare_op(add.call);
  for (int k = 0; k < 100; ++k) gpu.run(add.call);
  log = gpu.recent_launches();
  ASSERT_EQ(log.size(), 64u);
  for (size_t k = 1; k < log.size(); ++k) EXPECT_EQ(log[k].seq, log[k - 1].seq + 1);
  EXPECT_EQ(log.back().kernel, "add");
}

TEST(CudaGuards, WeightsAreCachedAndChangedDataIsNoticed) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  Rng r(5);
  Case cs;
  cs.call.kind = OpKind::kLinear;
  cs.input_f32({4, 3000}, r, -1, 1);
  const WeightRef* w = cs.weight("W", {50, 3000}, DType::kF32, r, -1, 1);
  cs.what = "linear with a cached weight";
  expect_matches_cpu(gpu, cs, 1);
  EXPECT_EQ(gpu.cached_weight_bytes(), 50 * 3000 * 4);
  expect_matches_cpu(gpu, cs, 1);
  EXPECT_EQ(gpu.cached_weight_bytes(), 50 * 3000 * 4);
  // Same host pointer, new contents (a reused buffer): the stale device copy
  // must not be used.
  auto* data = const_cast<float*>(static_cast<const float*>(w->data));
  for (int64_t k = 0; k < w->numel(); ++k) data[k] = r.uniform_real(-1.0f, 1.0f);
  cs.what = "linear after the weight changed";
  expect_matches_cpu(gpu, cs, 1);
  EXPECT_EQ(gpu.cached_weight_bytes(), 50 * 3000 * 4);
}

TEST(CudaGuards, MissingDeviceOrdinalIsAClearError) {
  REQUIRE_CUDA_DEVICE();
  CudaBackendOptions o;
  o.device = 99;
  CudaBackend gpu(o);
  Rng r(6);
  Case cs = add_case(r, 4);
  Tensor out;
  cs.call.out = {&out};
  prepare_op(cs.call);
  try {
    gpu.run(cs.call);
    FAIL() << "device 99 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device 99 does not exist"), std::string::npos) << e.what();
  }
}

// Runs with or without a device: checks the names the factory accepts and
// that without a device "cuda" is a clear error. Constructing the backend
// must not initialize CUDA in this process (the doctor forks afterwards).
TEST(CudaFactory, NamesAndDeviceAbsence) {
  EXPECT_FALSE(parse_cuda_spec("cuda").sync);
  EXPECT_TRUE(parse_cuda_spec("cuda:sync").sync);
  EXPECT_TRUE(parse_cuda_spec("cuda:debug").debug);
  EXPECT_TRUE(parse_cuda_spec("cuda:debug").sync);
  EXPECT_TRUE(parse_cuda_spec("cuda:debug").checker);  // debug checks every op on host copies
  EXPECT_TRUE(parse_cuda_spec("cuda:checker").checker);
  EXPECT_FALSE(parse_cuda_spec("cuda:checker").sync);
  EXPECT_FALSE(parse_cuda_spec("cuda:sync").checker);
  EXPECT_EQ(parse_cuda_spec("cuda:1,sync").device, 1);
  EXPECT_THROW(parse_cuda_spec("cuda:fast"), Error);
  EXPECT_THROW(make_backend("cuda:fast"), Error);
  const bool initialized_before = cuda_initialized_in_this_process();
  if (!cuda_device_available()) {
    try {
      make_backend("cuda");
      FAIL() << "make_backend(\"cuda\") succeeded without a device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device found"), std::string::npos) << e.what();
    }
  } else {
    EXPECT_EQ(make_backend("cuda")->name(), "cuda");
    EXPECT_EQ(make_backend("cuda:sync")->name(), "cuda:sync");
    EXPECT_EQ(make_backend("cuda:debug")->name(), "cuda:debug");
    EXPECT_EQ(make_backend("cuda:checker")->name(), "cuda:checker");
    EXPECT_EQ(make_backend("cuda:checker,sync")->name(), "cuda:checker,sync");
  }
  EXPECT_EQ(cuda_initialized_in_this_process(), initialized_before);
}

// set_profiling: one device time per op, in order, and nothing once off.
TEST(CudaProfile, TimesEachOpOnTheDevice) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu;
  Rng r(9);
  Case cs = add_case(r, 4096);
  Tensor sum, scaled;
  cs.call.out = {&sum};
  prepare_op(cs.call);
  OpCall scale;
  scale.kind = OpKind::kScale;
  scale.layer = -1;
  scale.in = {&sum};
  WeightRef s;
  s.name = "s";
  s.dtype = DType::kF32;
  s.shape = {1};
  const float two = 2.0f;
  s.data = &two;
  scale.w = {&s};
  scale.out = {&scaled};
  gpu.set_profiling(true);
  gpu.run(cs.call);
  prepare_op(scale);
  gpu.run(scale);
  const std::vector<CudaOpTime> t = gpu.take_profile();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kind, OpKind::kAdd);
  EXPECT_EQ(t[0].layer, 2);
  EXPECT_EQ(t[1].kind, OpKind::kScale);
  EXPECT_EQ(t[1].layer, -1);
  for (const CudaOpTime& e : t) EXPECT_GE(e.seconds, 0.0);
  EXPECT_TRUE(gpu.take_profile().empty());  // taken
  gpu.set_profiling(false);
  gpu.run(scale);
  EXPECT_TRUE(gpu.take_profile().empty());
  for (size_t i = 0; i < scaled.f.size(); ++i) ASSERT_EQ(scaled.f[i], 2.0f * sum.f[i]);
}

// ---- the doctor on golden_a ------------------------------------------------------

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

void doctor_on_golden(const std::string& backend, bool bf16, bool dot = false) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (cuda_initialized_in_this_process()) {
    // The doctor forks its checked run, and a child cannot use CUDA once its
    // parent initialized it (an earlier test in this process did): run this
    // test alone in a fresh process. (ctest runs each test alone anyway.)
    const std::string cmd = "'" + self_exe() + "' --gtest_filter=" + info->test_suite_name() + "." + info->name();
    const int rc = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd << " failed";
    return;
  }
  DoctorOptions o;
  o.model_dir = kGolden;
  o.backend = backend;
  o.precision_bf16 = bf16;
  o.bf16_dot = dot;
  o.threads = 2;
  CpuBackendOptions dot_cpu;
  dot_cpu.threads = 1;
  dot_cpu.bf16_dot = true;
  if (dot && !CpuBackend(dot_cpu).bf16_dot()) {
    // This CPU has no dot mode (AVX512_BF16): the reference keeps its
    // activations in fp32, 2^-9 relative from the rounded ones per product.
    o.tolerance.rtol = 3e-2;
    o.tolerance.min_cosine = 0.999;
  }
  o.steps = 2;
  DoctorReport r = run_doctor(o);
  std::printf("%s", doctor_report_text(r).c_str());
  EXPECT_GT(r.ops_compared, 0);
  EXPECT_FALSE(r.first_failure.has_value()) << doctor_report_text(r);
  EXPECT_EQ(r.child_status, "exited 0");
}

TEST(CudaDoctor, GoldenAFp32) {
  REQUIRE_CUDA_DEVICE();
  doctor_on_golden("cuda", false);
}

TEST(CudaDoctor, GoldenABf16) {
  REQUIRE_CUDA_DEVICE();
  doctor_on_golden("cuda", true);
}

// The dot mode: linears, the LM head and the experts on the tensor cores
// (cuBLAS bf16, the grouped wmma product), against the CPU's dot mode.
TEST(CudaDoctor, GoldenABf16Dot) {
  REQUIRE_CUDA_DEVICE();
  doctor_on_golden("cuda", true, true);
}

TEST(CudaDoctor, GoldenADebugMode) {
  REQUIRE_CUDA_DEVICE();
  doctor_on_golden("cuda:debug", false);
}

#endif  // DGEMMA_HAVE_CUDA

}  // namespace
}  // namespace dgemma
