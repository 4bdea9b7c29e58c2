// The op catalogue (ggml's test-backend-ops idea): one table of op calls
// that covers every OpKind of the vocabulary (ops/op.h) at the shapes that
// matter, run on every target backend and compared with the scalar
// reference (the CPU backend at the scalar level, no dot modes).
//
// A new op or a new backend gets coverage by adding a row (or a backend
// parameter) here: a row is a name and a builder that makes the call's
// inputs, weights and attributes from a small seeded RNG; a backend
// parameter is a name and how to make it. A target that refuses a call
// (Backend::supports) skips it with its reason, a level or a device this
// machine lacks skips every row with the reason. The OpenCL target runs on
// the first PoCL device (CI's), made once per process and only for rows it
// does not refuse (docs/opencl.md §5).
//
// Tolerances, per row and per mode, are those of the existing tests:
//  * integer outputs (indices, argmax, draws) exactly, and rows whose ops
//    are gathers or IEEE divisions (embedding, the sample op's z) bit for bit;
//  * fp32 outputs within atol + rtol · max|reference| (tests/cuda's
//    expect_matches_cpu: 1e-5 + 1e-4, soft embedding in a bf16 run 1e-2,
//    the sample op's entropy 1e-6);
//  * the bf16 dot modes (CPU bf16_dot, cuda:bf16-dot, cuda:int8-dot) round
//    activations to bf16 in products over bf16 and FP8-dot weights and in
//    attention: rtol 3e-2 against the exact reference (tests/cuda, a device
//    dot mode against a CPU without one);
//  * the int8 dot modes on the quantized weights they tile: rtol 2e-2
//    (tests/quantize/int8_dot_test.cc, the integer path against the exact one).
// Shapes are small, so the catalogue runs in seconds (and under ASan).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "dgemma/error.h"
#include "ops/backend.h"
#include "ops/op.h"
#include "ops/sample_op_support.h"
#include "quantize/integer_levels.h"
#include "quantize/quantized_weight.h"
#include "quantize/quantizers.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#endif

namespace dgemma {
namespace {

// ---- building calls -------------------------------------------------------------

// A stable seed per row: its name (FNV-1a), so that adding rows changes no
// other row's data.
uint32_t seed_of(const std::string& name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return h;
}

// A quantization scheme as the project's quantizers take it (quantize/quantizers.h).
struct Quant {
  QuantScheme scheme;
  int block, bits;
  bool double_quant;
  DType logical;  // the weight's logical dtype, also that of MLX affine scales and biases
};

const Quant kNf4Dq{QuantScheme::kNF4, 64, 4, true, DType::kBF16};
const Quant kNf4B32{QuantScheme::kNF4, 32, 4, false, DType::kF32};
const Quant kNvfp4{QuantScheme::kNVFP4, 16, 4, false, DType::kBF16};
const Quant kAffine4{QuantScheme::kAffine, 32, 4, false, DType::kBF16};
const Quant kAffine8{QuantScheme::kAffine, 64, 8, false, DType::kF16};
const Quant kAffine8F32{QuantScheme::kAffine, 32, 8, false, DType::kF32};
const Quant kInt8{QuantScheme::kInt8, 64, 8, false, DType::kF32};
const Quant kFp8Channel{QuantScheme::kFP8, 0, 8, false, DType::kBF16};  // block 0: the row
const Quant kFp8Block32{QuantScheme::kFP8, 32, 8, false, DType::kF32};
const Quant kFp8Block16{QuantScheme::kFP8, 16, 8, false, DType::kF32};

// What a weight is stored as: a plain dtype, or quantized.
struct Wt {
  DType dt = DType::kF32;
  const Quant* q = nullptr;
};
Wt plain(DType dt) { return {dt, nullptr}; }
Wt quant(const Quant& q) { return {q.logical, &q}; }

// One call with its inputs and weights (stable addresses: the call points
// into the deques; a Built is never copied or moved).
struct Built {
  OpCall call;
  std::deque<Tensor> tensors;
  std::deque<std::vector<float>> f32s;
  std::deque<std::vector<uint8_t>> bytes;
  std::deque<WeightRef> weights;

  Built() = default;
  Built(const Built&) = delete;
  Built& operator=(const Built&) = delete;

  Tensor& input(Tensor t) {
    tensors.push_back(std::move(t));
    call.in.push_back(&tensors.back());
    return tensors.back();
  }
  Tensor& f32(std::vector<int64_t> shape, Rng& r, float lo, float hi) {
    return input(uniform_tensor(std::move(shape), r, lo, hi));
  }
  Tensor& i32(std::vector<int64_t> shape, std::vector<int32_t> values) {
    Tensor t = Tensor::i32(std::move(shape));
    t.i = std::move(values);
    return input(std::move(t));
  }
  const WeightRef& add_weight(WeightRef w) {
    weights.push_back(std::move(w));
    call.w.push_back(&weights.back());
    return weights.back();
  }
  // Values uniform in [lo, hi), stored as `w` says.
  const WeightRef& weight(const char* name, std::vector<int64_t> shape, Wt w, Rng& r, float lo, float hi,
                          int64_t slice_rows = 0, int64_t scale_rows = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v = uniform_values(n, r, lo, hi);
    WeightRef ref;
    ref.name = name;
    ref.shape = shape;
    ref.dtype = w.dt;
    if (w.q) {
      quant::QuantizeParams p;
      p.block = w.q->block;
      p.bits = w.q->bits;
      p.double_quant = w.q->double_quant;
      if (w.q->scheme == QuantScheme::kNVFP4) {
        p.slice_rows = slice_rows;
        p.scale_rows = scale_rows > 0 ? scale_rows : slice_rows;
      }
      std::shared_ptr<QuantizedWeight> q =
          quant::quantize_weight(w.q->scheme, {DType::kF32, v.data(), n}, shape, w.q->logical, p);
      ref.dtype = q->dtype;
      ref.data = q->slices.front().codes;
      ref.quant = std::move(q);
      return add_weight(std::move(ref));
    }
    switch (w.dt) {
      case DType::kF32:
        f32s.push_back(std::move(v));
        ref.data = f32s.back().data();
        break;
      case DType::kBF16:
      case DType::kF16: {
        std::vector<uint8_t> b(static_cast<size_t>(n) * 2);
        for (size_t k = 0; k < v.size(); ++k) {
          const uint16_t h = w.dt == DType::kBF16 ? f32_to_bf16(v[k]) : f32_to_f16(v[k]);
          std::memcpy(b.data() + 2 * k, &h, 2);
        }
        bytes.push_back(std::move(b));
        ref.data = bytes.back().data();
        break;
      }
      case DType::kF8_E4M3: {
        // Codes of magnitude below 0x58 (|value| < 16, no NaN code), both signs.
        std::vector<uint8_t> b(static_cast<size_t>(n));
        for (uint8_t& c : b) c = uint8_t(r.uniform_int(0, 0x57) | (r.uniform_int(0, 1) << 7));
        bytes.push_back(std::move(b));
        ref.data = bytes.back().data();
        break;
      }
      default: ADD_FAILURE() << "the catalogue builds no " << dtype_name(w.dt) << " weights";
    }
    return add_weight(std::move(ref));
  }
};

using Build = std::function<void(Built&, Rng&)>;

// ---- the rows' builders -------------------------------------------------------------

Build embedding(int64_t M, int64_t V, int64_t H, Wt w, bool bf16_run) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kEmbedding;
    std::vector<int32_t> ids = uniform_ints(M, 0, V - 1, r);
    if (M > 1) ids[1] = int32_t(V - 1);  // the last row of the table
    b.i32({M}, ids);
    b.weight("embed_tokens", {V, H}, w, r, -1, 1, 8);
    b.call.attrs.scale = 3.5f;
    b.call.attrs.round_to_bf16 = bf16_run;
  };
}

// peaked: rows 0 and 2 carry their probability on a few tokens (the CPU's
// sparse self-conditioning path), the others are flat.
Build soft_embedding(int64_t M, int64_t V, int64_t H, Wt w, bool bf16_run, bool peaked = false) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kSoftEmbedding;
    Tensor& logits = b.f32({M, V}, r, -4, 4);
    if (peaked)
      for (int64_t m = 0; m < M; m += 2)
        for (int64_t k = 0; k < 3; ++k) logits.f[size_t(m * V + (k * 97 + m * 31) % V)] = 60.0f + float(k);
    b.weight("embed_tokens", {V, H}, w, r, -1, 1, 8);
    b.call.attrs.scale = 2.0f;
    b.call.attrs.round_to_bf16 = bf16_run;
  };
}

Build rms_norm(std::vector<int64_t> shape, bool with_weight, DType dt) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kRmsNorm;
    b.f32(shape, r, -3, 3);
    if (with_weight) b.weight("norm", {shape.back()}, plain(dt), r, 0.5f, 1.5f);
    b.call.attrs.eps = 1e-6f;
  };
}

Build linear(int64_t M, int64_t K, int64_t N, Wt w) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kLinear;
    b.f32({M, K}, r, -1, 1);
    b.weight("W", {N, K}, w, r, -0.5f, 0.5f, 16);  // NVFP4: slices of 16 rows
  };
}

Build rope(int64_t M, int64_t heads, int64_t d, int pairs, double theta) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kRope;
    b.f32({M, heads, d}, r, -2, 2);
    b.i32({M}, uniform_ints(M, 0, 8000, r));
    b.call.attrs.rope_pairs = pairs;
    b.call.attrs.rope_theta = theta;
  };
}

// 2-D positions (column, row) of a grid `cols` wide: the vision tower's
// RoPE (docs/model.md §7.3), halves of width d/2 with `pairs` pairs each.
Build rope_2d(int64_t M, int64_t heads, int64_t d, int pairs, int64_t cols) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kRope;
    b.f32({M, heads, d}, r, -2, 2);
    std::vector<int32_t> pos;
    for (int64_t m = 0; m < M; ++m) {
      pos.push_back(int32_t(m % cols));
      pos.push_back(int32_t(m / cols));
    }
    b.i32({M, 2}, pos);
    b.call.attrs.rope_pairs = pairs;
    b.call.attrs.rope_theta = 100.0;
  };
}

struct Attn {
  int64_t M, S, Hq, Hk, d;
  AttentionMask mask = AttentionMask::kNone;
  int window = 0;
  int64_t cache = -1;        // rows of the cache segment (-1: no cache inputs)
  int64_t skip = 0;          // its leading rows left out (skip_rows)
  bool blind_query = false;  // query 0 before every key: sees none under a causal mask
};

// Keys at positions 0.. (the cache's kept rows, then the new rows); the
// cache's skipped rows at negative positions, so that a leak shows under
// every mask. The queries are the last M positions (the canvas: the
// committed keys are those before it).
Build attention(Attn a) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kAttention;
    const int64_t kept = std::max<int64_t>(a.cache, 0) - a.skip;
    const int64_t q0 = std::max<int64_t>(0, kept + a.S - a.M);
    b.f32({a.M, a.Hq, a.d}, r, -1, 1);
    b.f32({a.S, a.Hk, a.d}, r, -1, 1);
    b.f32({a.S, a.Hk, a.d}, r, -1, 1);
    std::vector<int32_t> qpos(static_cast<size_t>(a.M)), kpos(static_cast<size_t>(a.S));
    std::iota(qpos.begin(), qpos.end(), int32_t(q0));
    if (a.blind_query && a.M > 0) qpos[0] = int32_t(-a.skip - 5);
    std::iota(kpos.begin(), kpos.end(), int32_t(kept));
    b.i32({a.M}, qpos);
    b.i32({a.S}, kpos);
    if (a.cache >= 0) {
      b.f32({a.cache, a.Hk, a.d}, r, -1, 1);
      b.f32({a.cache, a.Hk, a.d}, r, -1, 1);
      std::vector<int32_t> cpos(static_cast<size_t>(a.cache));
      std::iota(cpos.begin(), cpos.end(), int32_t(-a.skip));
      b.i32({a.cache}, cpos);
      b.call.attrs.skip_rows = a.skip;
    }
    b.call.attrs.mask = a.mask;
    b.call.attrs.window = a.window;
    b.call.attrs.first_canvas_pos = q0;
  };
}

// An image-blocks mask (docs/model.md §7.7): `ids` is each new row's block
// (-1: text), appended as the last input.
Build attention_blocks(Attn a, std::vector<int32_t> ids) {
  return [=](Built& b, Rng& r) {
    attention(a)(b, r);
    b.i32({a.M}, ids);
  };
}

// Rows [0, n) text, then blocks 0 and 1 over [b0, e0) and [b1, e1).
std::vector<int32_t> two_blocks(int64_t n, int64_t b0, int64_t e0, int64_t b1, int64_t e1) {
  std::vector<int32_t> ids(static_cast<size_t>(n), -1);
  for (int64_t r = b0; r < e0; ++r) ids[size_t(r)] = 0;
  for (int64_t r = b1; r < e1; ++r) ids[size_t(r)] = 1;
  return ids;
}

Build router_topk(int64_t M, int64_t H, int64_t E, int k, DType dt) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kRouterTopk;
    b.f32({M, H}, r, -2, 2);
    b.weight("router.scale", {H}, plain(dt), r, 0.5f, 1.5f);
    b.weight("router.proj", {E, H}, plain(dt), r, -1, 1);
    b.weight("router.per_expert_scale", {E}, plain(dt), r, 0.5f, 2.0f);
    b.call.attrs.eps = 1e-6f;
    b.call.attrs.top_k = k;
  };
}

// Each token routed to k distinct experts of E (repeat: token 0 routed twice
// to one expert, which the op's contract allows and the CUDA backend refuses).
Build moe_experts(int64_t M, int64_t H, int64_t I, int64_t E, int64_t k, Wt w, bool repeat = false) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kMoeExperts;
    b.f32({M, H}, r, -1, 1);
    std::vector<int32_t> idx = distinct_expert_ids(M, E, k, r);
    if (repeat) idx[1] = idx[0];
    b.i32({M, k}, idx);
    b.f32({M, k}, r, 0, 1);
    // NVFP4: one slice per expert projection, gate and up sharing a global scale.
    b.weight("experts.gate_up_proj", {E, 2 * I, H}, w, r, -0.5f, 0.5f, I, 2 * I);
    b.weight("experts.down_proj", {E, H, I}, w, r, -0.5f, 0.5f, H);
  };
}

// gelu_glu, add: two inputs of one shape (gate/a over a wide range:
// gelu_tanh must saturate, never give NaN).
Build binary(OpKind kind, std::vector<int64_t> shape) {
  return [=](Built& b, Rng& r) {
    b.call.kind = kind;
    b.f32(shape, r, -60, 60);
    b.f32(shape, r, -3, 3);
  };
}

Build scale(std::vector<int64_t> shape, DType dt) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kScale;
    b.f32(shape, r, -5, 5);
    b.weight("s", {1}, plain(dt), r, 0.5f, 40.0f);
  };
}

Build softcap(std::vector<int64_t> shape, float cap) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kSoftcap;
    b.f32(shape, r, -300, 300);
    b.call.attrs.cap = cap;
  };
}

// Inputs of `rows` rows each and row shape `row` (F32 or I32).
Build concat_rows(std::vector<int64_t> rows, std::vector<int64_t> row, DType dt, int64_t skip, int64_t take) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kConcatRows;
    for (int64_t n : rows) {
      std::vector<int64_t> shape = row;
      shape.insert(shape.begin(), n);
      if (dt == DType::kF32) {
        b.f32(shape, r, -1, 1);
      } else {
        Tensor t = Tensor::i32(shape);
        t.i = uniform_ints(int64_t(t.i.size()), -1000, 1000, r);
        b.input(std::move(t));
      }
    }
    b.call.attrs.skip_rows = skip;
    b.call.attrs.take_rows = take;
  };
}

// Rows of wide and narrow scales, -inf entries and exact ties of the maximum
// (tests/ops/sample_op_test.cc); u = 0 and u well inside (0, 1), not u -> 1,
// whose target lies in the rounding slack of the total (tests/cuda/cuda_sample_test.cc).
Build sample(int64_t M, int64_t V, bool draw, float temperature) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kSample;
    Tensor& logits = b.f32({M, V}, r, -30, 30);
    for (int64_t m = 0; m < M; ++m) {
      float* row = logits.f.data() + m * V;
      if (m % 4 == 1)
        for (int64_t v = 0; v < V; ++v) row[v] *= 0.02f;
      if (m % 4 == 2)
        for (int64_t v = 0; v < V; ++v)
          if (r.uniform_real(0.0f, 1.0f) < 0.3f) row[v] = -std::numeric_limits<float>::infinity();
      if (m % 4 == 3 && V > 2) {
        const float mx = *std::max_element(row, row + V);
        row[V / 3] = row[2 * V / 3] = mx + 1.0f;
      }
      row[(m * 7) % V] = std::max(row[(m * 7) % V], -1.0f);  // at least one finite logit
    }
    std::vector<double> u;
    if (draw)
      for (int64_t m = 0; m < M; ++m) u.push_back(m == 1 ? 0.0 : double(r.uniform_real(0.0f, 0.999f)));
    b.input(draw ? dgemma::testing::uniforms_tensor(u) : Tensor::i32({0, 2}));
    b.call.attrs.temperature = temperature;
  };
}

// (x - shift)·scale per column: shift and scale stored as `dt`.
Build affine(int64_t M, int64_t H, DType dt) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kAffine;
    b.f32({M, H}, r, 0, 1);
    b.weight("std_bias", {H}, plain(dt), r, -1, 1);
    b.weight("std_scale", {H}, plain(dt), r, 0.5f, 3.0f);
  };
}

// N rows into C cells (the last cell left empty), scale 1/k² of a k = 3 pool.
Build pool_cells(int64_t N, int64_t H, int64_t C) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kPoolCells;
    b.f32({N, H}, r, -3, 3);
    std::vector<int32_t> cells = uniform_ints(N, 0, C - 2, r);
    b.i32({N}, cells);
    b.call.attrs.out_rows = C;
    b.call.attrs.scale = 1.0f / 9.0f;
  };
}

// n distinct rows of a T-row base replaced, in a shuffled order.
Build scatter_rows(int64_t T, int64_t n, int64_t H) {
  return [=](Built& b, Rng& r) {
    b.call.kind = OpKind::kScatterRows;
    b.f32({T, H}, r, -1, 1);
    b.f32({n, H}, r, 5, 6);
    std::vector<int32_t> rows(static_cast<size_t>(T));
    std::iota(rows.begin(), rows.end(), 0);
    std::shuffle(rows.begin(), rows.end(), r);
    rows.resize(size_t(n));
    b.i32({n}, rows);
  };
}

// ---- the table ------------------------------------------------------------------------

// atol + rtol · max|reference| per fp32 output; {0, 0}: bit for bit.
struct Tol {
  double rtol = 1e-4, atol = 1e-5;
};
constexpr Tol kExact{0, 0};

struct OpCase {
  std::string name;
  Build build;
  std::vector<Tol> tol = {Tol{}};  // per output (the last one repeats)
  int outputs = 0;                 // 0: the op's fixed count; moe_experts: 1, or 2 with its activations
};

int outputs_of(const OpCase& row, OpKind kind) {
  if (row.outputs > 0) return row.outputs;
  return kind == OpKind::kRouterTopk ? 2 : kind == OpKind::kSample ? 4 : 1;
}

const std::vector<OpCase>& catalogue() {
  using AM = AttentionMask;
  static const std::vector<OpCase> rows = {
      // embedding: a gather times the scale, bit for bit.
      {"embedding_f32_M7_V37_H19", embedding(7, 37, 19, plain(DType::kF32), false), {kExact}},
      {"embedding_bf16_M1_V50_H45_bf16run", embedding(1, 50, 45, plain(DType::kBF16), true), {kExact}},
      {"embedding_f16_M9_V33_H24", embedding(9, 33, 24, plain(DType::kF16), false), {kExact}},
      {"embedding_affine4_M6_V40_H64_bf16run", embedding(6, 40, 64, quant(kAffine4), true), {kExact}},
      {"embedding_nvfp4_M5_V40_H64", embedding(5, 40, 64, quant(kNvfp4), false), {kExact}},
      {"embedding_M0", embedding(0, 10, 8, plain(DType::kF32), false), {kExact}},
      // soft_embedding: a bf16 run rounds the probabilities to bf16 (an ulp
      // of their sum moves one by a bf16 step).
      {"soft_embedding_f32_M3_V53_H21", soft_embedding(3, 53, 21, plain(DType::kF32), false)},
      {"soft_embedding_bf16_M2_V70_H33", soft_embedding(2, 70, 33, plain(DType::kBF16), false)},
      {"soft_embedding_bf16_M4_V97_H40_bf16run", soft_embedding(4, 97, 40, plain(DType::kBF16), true), {Tol{1e-2}}},
      {"soft_embedding_peaked_M5_V600_H24", soft_embedding(5, 600, 24, plain(DType::kF32), false, true)},
      {"soft_embedding_affine8_M3_V40_H64", soft_embedding(3, 40, 64, quant(kAffine8F32), false)},
      {"soft_embedding_nf4_M3_V40_H64_bf16run", soft_embedding(3, 40, 64, quant(kNf4Dq), true), {Tol{1e-2}}},
      {"soft_embedding_M0", soft_embedding(0, 20, 8, plain(DType::kF32), false)},
      // rms_norm
      {"rms_norm_f32w_3x5x37", rms_norm({3, 5, 37}, true, DType::kF32)},
      {"rms_norm_bf16w_M1_D300", rms_norm({1, 300}, true, DType::kBF16)},
      {"rms_norm_f16w_M4_D16", rms_norm({4, 16}, true, DType::kF16)},
      {"rms_norm_noweight_M6_D33", rms_norm({6, 33}, false, DType::kF32)},
      {"rms_norm_M0", rms_norm({0, 16}, true, DType::kF32)},
      // linear over plain weights
      {"linear_f32_M7_K45_N33", linear(7, 45, 33, plain(DType::kF32))},
      {"linear_bf16_M9_K301_N70", linear(9, 301, 70, plain(DType::kBF16))},
      {"linear_bf16_M1_K64_N40", linear(1, 64, 40, plain(DType::kBF16))},
      {"linear_f16_M5_K40_N17", linear(5, 40, 17, plain(DType::kF16))},
      {"linear_f8e4m3_M4_K24_N10", linear(4, 24, 10, plain(DType::kF8_E4M3))},
      {"linear_f32_M0", linear(0, 32, 16, plain(DType::kF32))},
      // linear over every quantization scheme (K a multiple of 32: the
      // integer path tiles it; K = 80: it does not)
      {"linear_nf4_dq_M5_K128_N48", linear(5, 128, 48, quant(kNf4Dq))},
      {"linear_nf4_b32_M3_K96_N24", linear(3, 96, 24, quant(kNf4B32))},
      {"linear_nf4_K80_untiled_M4_N20", linear(4, 80, 20, quant(kNf4Dq))},
      {"linear_nvfp4_M5_K128_N48", linear(5, 128, 48, quant(kNvfp4))},
      {"linear_affine4_M5_K128_N40", linear(5, 128, 40, quant(kAffine4))},
      {"linear_affine4_M1_K64_N40", linear(1, 64, 40, quant(kAffine4))},
      {"linear_affine8_M4_K128_N33", linear(4, 128, 33, quant(kAffine8))},
      {"linear_int8_M6_K128_N40", linear(6, 128, 40, quant(kInt8))},
      {"linear_fp8_channel_M5_K96_N40", linear(5, 96, 40, quant(kFp8Channel))},
      {"linear_fp8_block32_M5_K128_N40", linear(5, 128, 40, quant(kFp8Block32))},
      {"linear_fp8_block16_M3_K64_N24", linear(3, 64, 24, quant(kFp8Block16))},
      {"linear_int8_M0", linear(0, 64, 16, quant(kInt8))},
      // rope: full and partial rotation (rope_pairs < d/2), none
      {"rope_full_M5_h3_d64", rope(5, 3, 64, 32, 1e4)},
      {"rope_partial_M4_h2_d48_pairs12", rope(4, 2, 48, 12, 1e6)},
      {"rope_pairs0_M2_h1_d8", rope(2, 1, 8, 0, 1e4)},
      {"rope_d2_M7_h5", rope(7, 5, 2, 1, 1e4)},
      {"rope_M0", rope(0, 2, 16, 8, 1e4)},
      // rope with 2-D positions (the vision tower): d = 72 (26B) and 8 (golden V), partial
      {"rope_2d_M30_h2_d72_pairs18", rope_2d(30, 2, 72, 18, 6)},
      {"rope_2d_M9_h1_d8_pairs2", rope_2d(9, 1, 8, 2, 3)},
      {"rope_2d_partial_M7_h3_d16_pairs2", rope_2d(7, 3, 16, 2, 4)},
      // attention: GQA (Hq > Hk), the masks, the two key segments (cache + skip_rows)
      {"attention_none_gqa_M5_S33_Hq4_Hk2_d24", attention({5, 33, 4, 2, 24})},
      {"attention_causal_M9_S9_Hq3_Hk1_d40", attention({9, 9, 3, 1, 40, AM::kCausalWindow})},
      {"attention_causal_window7_cache10_skip3_M12_S20_Hq4_Hk2_d16",
       attention({12, 20, 4, 2, 16, AM::kCausalWindow, 7, 10, 3, true})},
      {"attention_committed_window5_cache12_skip4_M6_S6_Hq2_Hk2_d32",
       attention({6, 6, 2, 2, 32, AM::kCommittedWindow, 5, 12, 4})},
      {"attention_committed_window3_M4_S10_Hq3_Hk1_d20", attention({4, 10, 3, 1, 20, AM::kCommittedWindow, 3})},
      {"attention_none_cache9_skip2_M4_S4_Hq6_Hk2_d20", attention({4, 4, 6, 2, 20, AM::kNone, 0, 9, 2})},
      {"attention_cache_only_cache8_skip2_M3_S0_Hq2_Hk1_d12", attention({3, 0, 2, 1, 12, AM::kNone, 0, 8, 2})},
      {"attention_causal_window100_M20_S150_Hq2_Hk1_d16", attention({20, 150, 2, 1, 16, AM::kCausalWindow, 100})},
      {"attention_causal_d256_M3_S40_Hq8_Hk2", attention({3, 40, 8, 2, 256, AM::kCausalWindow})},
      {"attention_M1_S1_Hq1_Hk1_d8", attention({1, 1, 1, 1, 8})},
      {"attention_M0", attention({0, 5, 2, 1, 8, AM::kCausalWindow})},
      // the vision tower: bidirectional, d = 72 (not a multiple of 16)
      {"attention_none_M150_S150_Hq2_Hk2_d72", attention({150, 150, 2, 2, 72})},
      // the image-blocks masks (docs/model.md §7.7): two blocks, one wider
      // than the window, a cache segment whose keys have no block
      {"attention_hf_blocks_window5_cache8_skip2_M30_S30_Hq4_Hk2_d72",
       attention_blocks({30, 30, 4, 2, 72, AM::kCausalWindowBlocks, 5, 8, 2}, two_blocks(30, 0, 4, 9, 25))},
      {"attention_jax_blocks_window5_cache8_skip2_M30_S30_Hq4_Hk2_d72",
       attention_blocks({30, 30, 4, 2, 72, AM::kJaxBlocks, 5, 8, 2}, two_blocks(30, 0, 4, 9, 25))},
      {"attention_hf_blocks_full_M160_S160_Hq2_Hk1_d8",
       attention_blocks({160, 160, 2, 1, 8, AM::kCausalWindowBlocks}, two_blocks(160, 5, 140, 150, 152))},
      {"attention_jax_blocks_window16_M160_S160_Hq2_Hk1_d8",
       attention_blocks({160, 160, 2, 1, 8, AM::kJaxBlocks, 16}, two_blocks(160, 5, 140, 150, 152))},
      // router_topk: indices exactly
      {"router_topk_f32_M7_H45_E9_k3", router_topk(7, 45, 9, 3, DType::kF32)},
      {"router_topk_bf16_M1_H64_E8_k2", router_topk(1, 64, 8, 2, DType::kBF16)},
      {"router_topk_all_experts_M5_H33_E5_k5", router_topk(5, 33, 5, 5, DType::kF32)},
      {"router_topk_M0", router_topk(0, 16, 4, 1, DType::kF32)},
      // moe_experts over plain weights
      {"moe_experts_f32_M6_H40_I24_E5_k2", moe_experts(6, 40, 24, 5, 2, plain(DType::kF32))},
      {"moe_experts_bf16_M13_H33_I20_E6_k3", moe_experts(13, 33, 20, 6, 3, plain(DType::kBF16))},
      {"moe_experts_bf16_M1_H64_I32_E4_k2", moe_experts(1, 64, 32, 4, 2, plain(DType::kBF16))},
      {"moe_experts_repeated_expert_M3_H16_I8_E3_k2", moe_experts(3, 16, 8, 3, 2, plain(DType::kF32), true)},
      {"moe_experts_M0", moe_experts(0, 16, 8, 3, 2, plain(DType::kF32))},
      // moe_experts with its second output, the down projections' inputs
      // (ops/op.h), on the device's paths: fp32, bf16 tensor cores, FP8,
      // int8 (an NF4 row on cuda:int8-dot), and the CPU's grouped GEMMs and
      // quantized experts.
      {"moe_experts_acts_f32_M6_H40_I24_E5_k2", moe_experts(6, 40, 24, 5, 2, plain(DType::kF32)), {Tol{}}, 2},
      {"moe_experts_acts_bf16_M13_H33_I20_E6_k3", moe_experts(13, 33, 20, 6, 3, plain(DType::kBF16)), {Tol{}}, 2},
      {"moe_experts_acts_nf4_dq_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kNf4Dq)), {Tol{}}, 2},
      {"moe_experts_acts_fp8_channel_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kFp8Channel)), {Tol{}}, 2},
      {"moe_experts_acts_M0", moe_experts(0, 16, 8, 3, 2, plain(DType::kF32)), {Tol{}}, 2},
      // moe_experts over every quantization scheme
      {"moe_experts_nf4_dq_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kNf4Dq))},
      {"moe_experts_nvfp4_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kNvfp4))},
      {"moe_experts_affine4_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kAffine4))},
      {"moe_experts_affine8_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kAffine8))},
      {"moe_experts_int8_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kInt8))},
      {"moe_experts_fp8_channel_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kFp8Channel))},
      {"moe_experts_fp8_block32_M5_H64_I64_E4_k2", moe_experts(5, 64, 64, 4, 2, quant(kFp8Block32))},
      // elementwise
      {"gelu_glu_M5_I37", binary(OpKind::kGeluGlu, {5, 37})},
      {"gelu_glu_M0", binary(OpKind::kGeluGlu, {0, 16})},
      {"add_3x7x9", binary(OpKind::kAdd, {3, 7, 9})},
      {"add_1001", binary(OpKind::kAdd, {1001})},
      {"scale_bf16_M4_N33", scale({4, 33}, DType::kBF16)},
      {"scale_f32_M0", scale({0, 8}, DType::kF32)},
      {"softcap_cap30_M3_N50", softcap({3, 50}, 30.0f)},
      // concat_rows: copies, bit for bit
      {"concat_rows_f32_skip3", concat_rows({5, 4}, {2, 3}, DType::kF32, 3, 0), {kExact}},
      {"concat_rows_f32_skip_into_b", concat_rows({2, 5}, {7}, DType::kF32, 4, 0), {kExact}},
      {"concat_rows_f32_empty_a", concat_rows({0, 3}, {4}, DType::kF32, 0, 0), {kExact}},
      {"concat_rows_i32_three_take4", concat_rows({3, 0, 4}, {2}, DType::kI32, 2, 4), {kExact}},
      // sample: z bit for bit, argmax and draw exactly, entropy within 1e-6
      {"sample_draw_M6_V37", sample(6, 37, true, 0.8f), {kExact, kExact, Tol{1e-6, 1e-6}}},
      {"sample_nodraw_M5_V300", sample(5, 300, false, 0.40833334f), {kExact, kExact, Tol{1e-6, 1e-6}}},
      {"sample_draw_M1_V1", sample(1, 1, true, 1.0f), {kExact, kExact, Tol{1e-6, 1e-6}}},
      {"sample_M0", sample(0, 16, false, 0.8f), {kExact, kExact, Tol{1e-6, 1e-6}}},
      // the vision tower's row ops: affine's two roundings and scatter_rows'
      // copies bit for bit; pool_cells sums in row order
      {"affine_f32_M5_H37", affine(5, 37, DType::kF32), {kExact}},
      {"affine_bf16_M3_H64", affine(3, 64, DType::kBF16), {kExact}},
      {"affine_M0", affine(0, 8, DType::kF32), {kExact}},
      {"pool_cells_N20_H33_C6", pool_cells(20, 33, 6)},
      {"scatter_rows_T9_n4_H17", scatter_rows(9, 4, 17), {kExact}},
      {"scatter_rows_n0", scatter_rows(5, 0, 8), {kExact}},
  };
  return rows;
}

// ---- the targets ------------------------------------------------------------------------

struct Target {
  const char* name;  // in test names
  bool cuda = false;
  const char* spec = "";  // cuda: make_backend's name
  CpuIsa isa = CpuIsa::kScalar;
  bool bf16_dot = false, int8_dot = false;  // the modes asked for (cuda: int8-dot implies bf16-dot)
  bool opencl = false;                      // the first PoCL device (else the default OpenCL device)
};

void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"cpu_avx2", false, "", CpuIsa::kAvx2},
      {"cpu_avx512", false, "", CpuIsa::kAvx512},
      {"cpu_avx512bf16", false, "", CpuIsa::kAvx512Bf16},
      {"cpu_amx", false, "", CpuIsa::kAmx},
      {"cpu_bf16_dot", false, "", CpuIsa::kAmx, true, false},  // at the CPU's highest level
      {"cpu_int8_dot", false, "", CpuIsa::kAmx, false, true},
      {"cpu_scalar_int8_dot", false, "", CpuIsa::kScalar, false, true},
      {"cuda", true, "cuda"},
      {"cuda_bf16_dot", true, "cuda:bf16-dot", CpuIsa::kScalar, true, false},
      {"cuda_int8_dot", true, "cuda:int8-dot", CpuIsa::kScalar, true, true},
      {"opencl", false, "", CpuIsa::kScalar, false, false, true},
  };
  return all;
}

// The target's backend and its effective modes, or null with the reason it
// is not available here.
struct Made {
  std::shared_ptr<Backend> backend;
  bool bf16_dot = false, int8_dot = false;
  std::string why_not;
};

std::string this_cpu() {
  const std::string& brand = cpu_features().brand;
  return brand.empty() ? std::string("this CPU") : "this CPU (" + brand + ")";
}

#if DGEMMA_HAVE_OPENCL
// One OpenCL backend per process: creating one builds the kernel program,
// which PoCL compiles with LLVM (its cache under ~/.cache/pocl makes the later
// processes quick). The first PoCL device, where CI has one; else the default.
std::shared_ptr<Backend> opencl_backend(std::string* why) {
  static std::shared_ptr<Backend> made;
  static std::string failure;
  if (made || !failure.empty()) {
    *why = failure;
    return made;
  }
  std::vector<OpenClDeviceInfo> devices = opencl_devices(&failure);
  if (devices.empty()) {
    *why = failure;
    return nullptr;
  }
  OpenClBackendOptions o;
  for (const OpenClDeviceInfo& d : devices)
    if (d.platform_name.find("Portable Computing Language") != std::string::npos) {
      o.platform = d.platform;
      o.device = d.device;
      break;
    }
  made = std::make_shared<OpenClBackend>(o);
  return made;
}
#endif

Made make_target(const Target& t) {
  Made m;
  if (t.opencl) {
#if DGEMMA_HAVE_OPENCL
    m.backend = opencl_backend(&m.why_not);
#else
    m.why_not = "this build has no OpenCL backend (OpenCL not found or DGEMMA_OPENCL=OFF)";
#endif
    return m;
  }
  if (t.cuda) {
#if DGEMMA_HAVE_CUDA
    if (!cuda_device_available()) {
      m.why_not = "no CUDA device: " + cuda_unavailable_reason();
      return m;
    }
    m.backend = make_backend(t.spec);
    m.bf16_dot = t.bf16_dot;
    m.int8_dot = t.int8_dot;
#else
    m.why_not = "this build has no CUDA backend (nvcc not found or DGEMMA_CUDA=OFF)";
#endif
    return m;
  }
  const bool top = t.bf16_dot || (t.int8_dot && t.isa != CpuIsa::kScalar);  // the dot modes at the highest level
  const CpuIsa isa = top ? detected_isa() : t.isa;
  if (int(isa) > int(detected_isa())) {
    m.why_not = this_cpu() + " runs the levels up to " + std::string(isa_name(detected_isa())) + ", not " +
                std::string(isa_name(isa));
    return m;
  }
  CpuBackendOptions o;
  o.threads = 2;
  o.isa = isa;
  o.bf16_dot = t.bf16_dot;
  o.int8_dot = t.int8_dot;
  auto cpu = std::make_unique<CpuBackend>(o);
  if (cpu->isa() != isa) {
    m.why_not = "the CPU backend runs level " + std::string(isa_name(cpu->isa())) + " when asked for " +
                std::string(isa_name(isa));
    return m;
  }
  if (t.bf16_dot && !cpu->bf16_dot()) {
    m.why_not = this_cpu() + " has no AVX512_BF16: the CPU backend has no bf16 dot mode here";
    return m;
  }
  m.bf16_dot = cpu->bf16_dot();
  m.int8_dot = cpu->int8_dot();
  m.backend = std::move(cpu);
  return m;
}

// ---- what a mode changes ---------------------------------------------------------------

bool is_product(const OpCall& c) { return c.kind == OpKind::kLinear || c.kind == OpKind::kMoeExperts; }

bool any_weight(const OpCall& c, const std::function<bool(const WeightRef&)>& pred) {
  return std::any_of(c.w.begin(), c.w.end(), [&](const WeightRef* w) { return pred(*w); });
}

// Products the bf16 dot mode rounds the activations of: bf16 weights, and
// FP8 ones with a scale per channel or per block of 32k columns.
bool bf16_dot_products(const OpCall& c) {
  return is_product(c) && any_weight(c, [](const WeightRef& w) {
           return w.quant ? fp8_dot_weights(*w.quant) : w.dtype == DType::kBF16;
         });
}
bool fp8_dot_products(const OpCall& c) {
  return is_product(c) && any_weight(c, [](const WeightRef& w) { return w.quant && fp8_dot_weights(*w.quant); });
}
// Products the int8 dot mode takes (int8 activation blocks).
bool int8_dot_products(const OpCall& c) {
  return is_product(c) && any_weight(c, [](const WeightRef& w) { return w.quant && int8_dot_supported(*w.quant); });
}

// ---- comparing ----------------------------------------------------------------------------

bool same_value(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

void expect_matches(const Tensor& want, const Tensor& got, Tol tol, const std::string& what) {
  ASSERT_EQ(want.dtype, got.dtype) << what;
  ASSERT_EQ(want.shape, got.shape) << what;
  if (want.dtype == DType::kI32) {
    ASSERT_EQ(want.i.size(), got.i.size()) << what;
    for (size_t e = 0; e < want.i.size(); ++e)
      if (want.i[e] != got.i[e]) {
        size_t diff = 0;
        for (size_t k = 0; k < want.i.size(); ++k) diff += want.i[k] != got.i[k];
        ADD_FAILURE() << what << ": " << diff << " of " << want.i.size() << " differ, first at " << e << ": reference "
                      << want.i[e] << ", target " << got.i[e];
        return;
      }
    return;
  }
  ASSERT_EQ(want.f.size(), got.f.size()) << what;
  if (tol.rtol == 0 && tol.atol == 0) {
    for (size_t e = 0; e < want.f.size(); ++e)
      if (!same_value(want.f[e], got.f[e])) {
        ADD_FAILURE() << what << ": element " << e << " differs (bit for bit expected): reference " << want.f[e]
                      << ", target " << got.f[e];
        return;
      }
    return;
  }
  double max_ref = 0, max_diff = 0;
  size_t worst = 0;
  for (size_t e = 0; e < want.f.size(); ++e) {
    const float a = want.f[e], b = got.f[e];
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      if (!same_value(a, b)) {
        ADD_FAILURE() << what << ": element " << e << ": reference " << a << ", target " << b;
        return;
      }
      continue;
    }
    max_ref = std::max(max_ref, std::fabs(double(a)));
    const double d = std::fabs(double(a) - double(b));
    if (d > max_diff) {
      max_diff = d;
      worst = e;
    }
  }
  const double bound = tol.atol + tol.rtol * max_ref;
  EXPECT_LE(max_diff, bound) << what << ": element " << worst << ": reference " << want.f[worst] << ", target "
                             << got.f[worst] << " (max |reference| " << max_ref << ", rtol " << tol.rtol << ", atol "
                             << tol.atol << ")";
}

// ---- the test ---------------------------------------------------------------------------------

class OpCatalogue : public ::testing::TestWithParam<std::tuple<size_t, Target>> {};

TEST_P(OpCatalogue, MatchesTheScalarReference) {
  const OpCase& row = catalogue()[std::get<0>(GetParam())];
  const Target& target = std::get<1>(GetParam());
#if DGEMMA_HAVE_OPENCL
  // OpenCL's refusals need no device: such rows skip before the process
  // starts one (tests/opencl checks that run() refuses them too).
  if (target.opencl) {
    Built probe;
    Rng probe_rng(seed_of(row.name));
    row.build(probe, probe_rng);
    std::string refused;
    if (!opencl_supports(probe.call, &refused)) GTEST_SKIP() << refused;
  }
#endif
  Made made = make_target(target);
  if (!made.backend) GTEST_SKIP() << made.why_not;

  Built b;
  Rng rng(seed_of(row.name));
  row.build(b, rng);
  const int nout = outputs_of(row, b.call.kind);
  std::vector<Tensor> want(static_cast<size_t>(nout)), got(static_cast<size_t>(nout));
  OpCall ref_call = b.call, target_call = b.call;
  for (int k = 0; k < nout; ++k) {
    ref_call.out.push_back(&want[size_t(k)]);
    target_call.out.push_back(&got[size_t(k)]);
  }
  ASSERT_NO_THROW(prepare_op(target_call)) << "the catalogue's row is not a valid call";
  std::string why;
  if (!made.backend->supports(target_call, &why)) {
    // A refusal is real: run() rejects the call (with an Error, not wrong numbers).
    EXPECT_THROW(
        {
          Executor(*made.backend).run(target_call);
          for (Tensor& t : got) t.ensure_host();
        },
        Error)
        << "supports() refuses a call that run() accepts: " << why;
    GTEST_SKIP() << why;
  }

  const bool rounds_bf16 = (made.bf16_dot && (b.call.kind == OpKind::kAttention || bf16_dot_products(b.call))) ||
                           (made.int8_dot && fp8_dot_products(b.call));
  const bool int8 = made.int8_dot && int8_dot_products(b.call);
  if (target.isa == CpuIsa::kScalar && !target.cuda && !target.opencl && !rounds_bf16 && !int8)
    GTEST_SKIP() << "the scalar level runs the reference kernels where int8-dot does not apply: nothing to compare";

  CpuBackendOptions ro;
  ro.threads = 2;
  ro.isa = CpuIsa::kScalar;
  CpuBackend reference(ro);
  Executor(reference).run(ref_call);
  Executor(*made.backend).run(target_call);
  for (Tensor& t : got) t.ensure_host();

  // The reference computed something (a row of zeros would compare with anything).
  bool any_float = false, nonzero = false;
  for (const Tensor& t : want)
    if (t.dtype == DType::kF32 && !t.f.empty()) {
      any_float = true;
      nonzero = nonzero || std::any_of(t.f.begin(), t.f.end(), [](float v) { return v != 0.0f; });
    }
  EXPECT_TRUE(!any_float || nonzero) << "the reference's outputs are all zero";

  for (int k = 0; k < nout; ++k) {
    Tol tol = row.tol[std::min(size_t(k), row.tol.size() - 1)];
    if (rounds_bf16) tol.rtol = std::max(tol.rtol, 3e-2);
    if (int8) tol.rtol = std::max(tol.rtol, 2e-2);
    expect_matches(want[size_t(k)], got[size_t(k)], tol,
                   row.name + " on " + made.backend->name() + ", output " + std::to_string(k));
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<size_t, Target>>& p) {
  return catalogue()[std::get<0>(p.param)].name + "__" + std::get<1>(p.param).name;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, OpCatalogue,
                         ::testing::Combine(::testing::Range(size_t(0), catalogue().size()),
                                            ::testing::ValuesIn(targets())),
                         param_name);

// The table covers the whole vocabulary.
TEST(OpCatalogueTable, CoversEveryOpKind) {
  std::vector<bool> seen(kNumOpKinds, false);
  for (const OpCase& row : catalogue()) {
    Built b;
    Rng rng(seed_of(row.name));
    row.build(b, rng);
    seen[size_t(b.call.kind)] = true;
  }
  for (int k = 0; k < kNumOpKinds; ++k) EXPECT_TRUE(seen[size_t(k)]) << "no row for " << op_name(OpKind(k));
}

}  // namespace
}  // namespace dgemma
