// The ops of the CUDA backend (CudaBackend::Impl, cuda_backend_impl.h): each
// op's buffers, weights and launches (cuda_kernels.h), one function per op
// kind; dispatch and the fault guards around it are in cuda_backend.cc.
#include "backend/cuda/cuda_backend_impl.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/quant_upload.h"
#include "dgemma/error.h"
#include "quantize/integer_levels.h"

namespace dgemma {
namespace {

// What embedding rows are rounded to after they are read (and dequantized):
// bf16 in a bf16 run, nothing in an fp32 run (OpAttrs::round_to_bf16,
// quantize/quantized_weight.h). An identity for a plain table, which a bf16
// run stores in bf16.
k::WType row_rounding(const OpCall& c) { return c.attrs.round_to_bf16 ? k::WType::kBF16 : k::WType::kF32; }

}  // namespace

void CudaBackend::Impl::embedding(const OpCall& c) {
  const Tensor& ids = *c.in[0];
  const WeightRef& table = *c.w[0];
  const int64_t M = ids.numel(), V = table.shape[0], H = table.shape[1];
  ids.ensure_host();  // the ids come from the host (the canvas, a prompt): checked there
  for (int64_t m = 0; m < M; ++m)
    if (ids.i[size_t(m)] < 0 || ids.i[size_t(m)] >= V)
      fail("token id " + std::to_string(ids.i[size_t(m)]) + " at row " + std::to_string(m) + " is out of range [0, " +
           std::to_string(V) + ")");
  k::WType wt;
  const void* w = weight(table, &wt);
  auto* d_ids = static_cast<int32_t*>(input(ids, "input 0 (ids)"));
  auto* out = static_cast<float*>(alloc_output(0));
  if (H > 0)
    launched("embedding", k::launch_embedding(stream, d_ids, M, w, wt, row_rounding(c), V, H, c.attrs.scale, out),
             {d_ids, w, out});
  download(0, out);
}

// probs = softmax(logits) per row into a bounded scratch, then
// out[M,H] = s · probs[M,V] · table[V,H]. Column-major view: outᵀ (H×M, ld H)
// = tableᵀ (H×V, ld H) · probsᵀ (V×M, ld V), no transposes. In a bf16 run
// over a bf16 table the probabilities are bf16 (docs/model.md §3.3), so the product
// runs on the tensor cores with exact products (only the fp32 summation order
// differs from the CPU, whose bf16 run does the same). Otherwise a BF16/F16
// table is widened to fp32 in chunks of rows and the chunks accumulate (beta
// = 1) in pedantic fp32.
void CudaBackend::Impl::soft_embedding(const OpCall& c) {
  const Tensor& logits = *c.in[0];
  const WeightRef& table = *c.w[0];
  const int64_t M = logits.dim(0), V = table.shape[0], H = table.shape[1];
  k::WType wt;
  const void* w = weight(table, &wt);
  auto* d_logits = static_cast<float*>(input(logits, "input 0 (logits)"));
  auto* out = static_cast<float*>(alloc_output(0));
  if (M > 0 && H > 0) {
    if (V == 0) {
      zero(out, M * H * 4);
    } else {
      const int64_t rows_per = std::max<int64_t>(1, std::min(M, opt.scratch_elems / V));
      const bool tensor_cores = c.attrs.round_to_bf16 && wt == k::WType::kBF16;
      const bool direct = wt == k::WType::kF32;
      void* probs = alloc(rows_per * V * (tensor_cores ? 2 : 4), "workspace (probabilities)", true);
      const int64_t vrows = direct || tensor_cores ? V : std::max<int64_t>(1, std::min(V, opt.scratch_elems / H));
      auto* wide = direct || tensor_cores
                       ? nullptr
                       : static_cast<float*>(alloc(vrows * H * 4, "workspace (widened table)", true));
      for (int64_t r0 = 0; r0 < M; r0 += rows_per) {
        const int64_t rows = std::min(rows_per, M - r0);
        const std::string detail = "rows " + std::to_string(r0) + ".." + std::to_string(r0 + rows);
        Gemm g;
        g.m = H;
        g.n = rows;
        g.alpha = c.attrs.scale;
        g.lda = H;
        g.ldb = V;
        g.C = out + r0 * H;
        g.ldc = H;
        if (tensor_cores) {
          auto* p16 = static_cast<uint16_t*>(probs);
          launched("soft_embedding.probs_bf16", k::launch_soft_probs_bf16(stream, d_logits + r0 * V, rows, V, p16),
                   {d_logits, p16}, detail);
          g.k = V;
          g.A = w;
          g.B = p16;
          g.bf16 = true;
          gemm(g);
          continue;
        }
        auto* p32 = static_cast<float*>(probs);
        launched("soft_embedding.probs",
                 k::launch_soft_probs(stream, d_logits + r0 * V, rows, V, c.attrs.round_to_bf16, p32), {d_logits, p32},
                 detail);
        if (direct) {
          g.k = V;
          g.A = w;
          g.B = p32;
          gemm(g);
          continue;
        }
        for (int64_t v0 = 0; v0 < V; v0 += vrows) {
          const int64_t vr = std::min(vrows, V - v0);
          launched("soft_embedding.widen", k::launch_widen(stream, w, wt, row_rounding(c), v0 * H, vr * H, wide),
                   {w, wide});
          g.k = vr;
          g.A = wide;
          g.B = p32 + v0;
          g.beta = v0 == 0 ? 0.0f : 1.0f;
          gemm(g);
        }
      }
    }
  }
  download(0, out);
}

void CudaBackend::Impl::rms_norm(const OpCall& c) {
  const Tensor& x = *c.in[0];
  const int64_t D = x.dim(-1), R = D == 0 ? 0 : x.rows();
  k::WType wt = k::WType::kF32;
  const void* w = c.w.empty() ? nullptr : weight(*c.w[0], &wt);
  auto* d_x = static_cast<float*>(input(x, "input 0 (x)"));
  auto* out = static_cast<float*>(alloc_output(0));
  launched("rms_norm", k::launch_rms_norm(stream, d_x, R, D, w, wt, c.attrs.eps, out), {d_x, w, out});
  download(0, out);
}

// out[M, N] = x[M, K] · W[N, K]ᵀ. Column-major view: outᵀ (N×M, ld N) = W
// (the row-major [N, K] matrix read as K×N with ld K, transposed) · xᵀ (K×M,
// ld K). In the dot mode (bf16_dot) a bf16 weight meets x rounded to bf16 on
// the tensor cores (the CPU's dot mode rounds the same activations).
// Otherwise cublasGemmEx has no fp32×bf16 combination, so BF16/F16/quantized
// weights are widened to fp32 in chunks of rows (chunk_rows(N, K) rows;
// output features n0..n0+nr write columns n0.. of out): the product is then
// the reference's fp32 math, not a bf16 one.
void CudaBackend::Impl::linear(const OpCall& c) {
  const Tensor& x = *c.in[0];
  const WeightRef& W = *c.w[0];
  const int64_t M = x.dim(0), K = x.dim(1), N = W.shape[0];
  k::WType wt;
  const void* w = weight(W, &wt);
  auto* d_x = static_cast<float*>(input(x, "input 0 (x)"));
  auto* out = static_cast<float*>(alloc_output(0));
  if (M > 0 && N > 0) {
    if (K == 0) {
      zero(out, M * N * 4);
    } else {
      Gemm g;
      g.ta = CUBLAS_OP_T;
      g.m = N;
      g.n = M;
      g.k = K;
      g.lda = K;
      g.B = d_x;
      g.ldb = K;
      g.C = out;
      g.ldc = N;
      if (int8_path(W)) {
        const I8Acts a = quantize_i8(d_x, M, K, "linear.quantize_i8");
        i8_gemm("linear.i8_gemm", a, K, nullptr, 1, M, W, w, N, out);
      } else if (fp8_path(W)) {
        fp8_gemm("linear.fp8_gemm", to_bf16(d_x, M * K, "workspace (x in bf16)"), K, nullptr, 1, M, W, N, out);
      } else if (wt == k::WType::kF32) {
        g.A = w;
        gemm(g);
      } else if (opt.bf16_dot && wt == k::WType::kBF16) {
        g.A = w;
        g.B = to_bf16(d_x, M * K, "workspace (x in bf16)");
        g.bf16 = true;
        gemm(g);
      } else {
        const int64_t per = chunk_rows(N, K);
        auto* wide = static_cast<float*>(alloc(per * K * 4, "workspace (widened weight)", true));
        for (int64_t n0 = 0; n0 < N; n0 += per) {
          const int64_t nr = std::min(per, N - n0);
          launched("linear.widen", k::launch_widen(stream, w, wt, k::WType::kF32, n0 * K, nr * K, wide), {w, wide},
                   "rows " + std::to_string(n0) + ".." + std::to_string(n0 + nr));
          g.m = nr;
          g.A = wide;
          g.C = out + n0;
          gemm(g);
        }
      }
    }
  }
  download(0, out);
}

bool CudaBackend::Impl::int8_path(const WeightRef& W) const {
  return opt.int8_dot && W.quant && int8_dot_supported(*W.quant);
}

bool CudaBackend::Impl::fp8_path(const WeightRef& W) const {
  return opt.bf16_dot && W.quant && fp8_dot_weights(*W.quant) && W.quant->slices.size() == 1;
}

// The product over W's codes and scales: the first two buffers of a
// one-slice weight (plan_quant_upload), uploaded with it.
void CudaBackend::Impl::fp8_gemm(const char* kernel, const uint16_t* a, int64_t K, const int32_t* starts, int64_t E,
                                 int64_t max_rows, const WeightRef& W, int64_t N, float* y) {
  quant_weight(W);
  const CachedQuant& c = quant_weights.at(W.quant.get());
  const auto* codes = static_cast<const uint8_t*>(c.buffers.at(0));
  const auto* scales = static_cast<const float*>(c.buffers.at(1));
  launched(kernel, k::launch_grouped_gemm_fp8(stream, a, K, starts, E, max_rows, codes, scales, W.quant->block, N, y),
           {a, starts, codes, scales, y});
}

// Device workspaces of this op: q [M, K] int8, then d, ds and Σq per block.
CudaBackend::Impl::I8Acts CudaBackend::Impl::quantize_i8(const float* x, int64_t M, int64_t K, const char* what) {
  const int64_t nb = M * (K / kI8Block);
  auto* q = static_cast<int8_t*>(alloc(M * K, "workspace (int8 activations)", true));
  auto* d = static_cast<float*>(alloc(nb * 4, "workspace (activation block scales)", true));
  auto* ds = static_cast<float*>(alloc(nb * 4, "workspace (activation block scale sums)", true));
  auto* qs = static_cast<int32_t*>(alloc(nb * 4, "workspace (activation block sums)", true));
  launched(what, k::launch_i8_quantize(stream, x, M, K, q, d, ds, qs), {x, q, d, ds, qs});
  return I8Acts{q, d, ds, qs};
}

void CudaBackend::Impl::i8_gemm(const char* kernel, const I8Acts& a, int64_t K, const int32_t* starts, int64_t E,
                                int64_t max_rows, const WeightRef& W, const void* dw, int64_t N, float* y) {
  launched(kernel,
           k::launch_i8_grouped_gemm(stream, a.q, a.d, a.ds, a.qsum, K, starts, E, max_rows,
                                     static_cast<const k::QView*>(dw), k::kernel_scheme(W.quant->scheme), W.quant->bits,
                                     N, y),
           {a.q, a.d, a.ds, a.qsum, starts, dw, y});
}

// 2-D positions (pos [M, 2], the vision tower's, docs/model.md §7.3): each
// half of a head is a split-half RoPE of width d / 2, so the frequencies are
// those of that width.
void CudaBackend::Impl::rope(const OpCall& c) {
  const Tensor &x = *c.in[0], &pos = *c.in[1];
  const int64_t M = x.dim(0), heads = x.dim(1), d = x.dim(2);
  const bool two_d = pos.shape.size() == 2;
  const int64_t width = two_d ? d / 2 : d;
  const int pairs = c.attrs.rope_pairs;
  // The reference's expression, evaluated on the host: the device then uses
  // bit-identical frequencies.
  // Uploaded once per (pairs, width, theta) and kept: a constant of the model.
  float*& d_freq = reinterpret_cast<float*&>(rope_freqs[{pairs, width, c.attrs.rope_theta}]);
  if (!d_freq && pairs > 0) {
    std::vector<float> inv_freq(static_cast<size_t>(pairs));
    for (int i = 0; i < pairs; ++i)
      inv_freq[size_t(i)] = 1.0f / std::pow(float(c.attrs.rope_theta), float(2 * i) / float(width));
    void* p = nullptr;
    outside_capture("cudaMalloc (inverse frequencies)");
    check(cudaMalloc(&p, size_t(pairs) * 4), "cudaMalloc (inverse frequencies)");
    live[reinterpret_cast<uintptr_t>(p)] =
        Alloc{int64_t(pairs) * 4, int64_t(pairs) * 4, "weight (inverse RoPE frequencies)", ""};
    d_freq = static_cast<float*>(p);
    check(cudaMemcpyAsync(d_freq, inv_freq.data(), size_t(pairs) * 4, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (inverse frequencies)");
    arena->traffic.weight_h2d_bytes += int64_t(pairs) * 4;
    sync_stream("cudaStreamSynchronize (inverse frequencies)");  // inv_freq is a local
  }
  auto* d_x = static_cast<float*>(input(x, "input 0 (x)"));
  auto* d_pos = static_cast<int32_t*>(input(pos, "input 1 (positions)"));
  auto* out = static_cast<float*>(alloc_output(0));
  if (heads * d > 0)
    launched("rope", k::launch_rope(stream, d_x, d_pos, d_freq, M, heads, d, pairs, two_d, out),
             {d_x, d_pos, d_freq, out});
  download(0, out);
}

// (x - shift) · scale per column (ops/op.h affine).
void CudaBackend::Impl::affine(const OpCall& c) {
  const Tensor& x = *c.in[0];
  const int64_t M = x.dim(0), H = x.dim(1);
  k::WType st, sct;
  const void* shift = weight(*c.w[0], &st);
  const void* scale = weight(*c.w[1], &sct);
  auto* d_x = static_cast<float*>(input(x, "input 0 (x)"));
  auto* out = static_cast<float*>(alloc_output(0));
  launched("affine", k::launch_affine(stream, d_x, M, H, shift, st, scale, sct, out), {d_x, shift, scale, out});
  download(0, out);
}

// The rows of each cell summed in row order (ops/op.h pool_cells). Cell ids
// the host holds were checked by prepare_op; ids an earlier op left on the
// device add nothing where out of range.
void CudaBackend::Impl::pool_cells(const OpCall& c) {
  const Tensor &x = *c.in[0], &cells = *c.in[1];
  const int64_t N = x.dim(0), H = x.dim(1), C = c.attrs.out_rows;
  auto* d_x = static_cast<float*>(input(x, "input 0 (x)"));
  auto* d_cells = static_cast<int32_t*>(input(cells, "input 1 (cells)"));
  auto* out = static_cast<float*>(alloc_output(0));
  launched("pool_cells", k::launch_pool_cells(stream, d_x, d_cells, N, H, C, c.attrs.scale, out), {d_x, d_cells, out});
  download(0, out);
}

// base copied on the device, then the source rows written over their rows
// (ops/op.h scatter_rows): the prompt's embeddings never leave the device.
void CudaBackend::Impl::scatter_rows(const OpCall& c) {
  const Tensor &base = *c.in[0], &src = *c.in[1], &rows = *c.in[2];
  const int64_t T = base.dim(0), H = base.dim(1), n = src.dim(0);
  auto* d_base = static_cast<float*>(input(base, "input 0 (base)"));
  auto* d_src = static_cast<float*>(input(src, "input 1 (src)"));
  auto* d_rows = static_cast<int32_t*>(input(rows, "input 2 (rows)"));
  auto* out = static_cast<float*>(alloc_output(0));
  if (T * H > 0) {
    copy_device(out, d_base, T * H * 4);
    launched("scatter_rows", k::launch_scatter_rows(stream, d_src, d_rows, n, T, H, out), {d_src, d_rows, out});
  }
  download(0, out);
}

// Attention reads its keys in two segments, the cache's rows then the new
// rows (ops/op.h attention_keys). Head dims up to k::kFlashMaxHeadDim run
// the flash kernel (flash_attention_kernels.cu) on the segments where they
// lie; larger ones, or the option cublas-attention, the products path.
void CudaBackend::Impl::attention(const OpCall& c) {
  const Tensor &q = *c.in[0], &qpos = *c.in[3];
  const AttentionKeys keys = attention_keys(c);
  const int64_t M = q.dim(0), Hq = q.dim(1), d = q.dim(2), S = keys.total(), Hk = c.in[1]->dim(1);
  auto* d_q = static_cast<float*>(input(q, "input 0 (q)"));
  auto* d_qpos = static_cast<int32_t*>(input(qpos, "input 3 (query positions)"));
  static const char* const kNames[2][3] = {
      {"input 5 (cached keys)", "input 6 (cached values)", "input 7 (cached key positions)"},
      {"input 1 (k)", "input 2 (v)", "input 4 (key positions)"}};
  k::FlashArgs a;
  for (int i = 0; i < 2; ++i) {
    const AttentionKeyPart& part = keys.parts[i];
    if (!part.k) continue;
    const int64_t row = Hk * d;
    a.keys[i].k = static_cast<const float*>(input(*part.k, kNames[i][0])) + part.first * row;
    a.keys[i].v = static_cast<const float*>(input(*part.v, kNames[i][1])) + part.first * row;
    a.keys[i].pos = static_cast<const int32_t*>(input(*part.pos, kNames[i][2])) + part.first;
    a.keys[i].rows = part.rows;
  }
  // The block masks' ids, one per new row (docs/model.md §7.7).
  const Tensor* blocks = attention_blocks(c);
  const auto* d_blocks = blocks ? static_cast<const int32_t*>(input(*blocks, "last input (blocks)")) : nullptr;
  auto* out = static_cast<float*>(alloc_output(0));
  if (M > 0 && Hq > 0 && d > 0) {
    if (S == 0) {
      zero(out, M * Hq * d * 4);  // no key at all: zero outputs, as the reference
    } else if (d <= k::kFlashMaxHeadDim && !opt.cublas_attention) {
      a.q = d_q;
      a.qpos = d_qpos;
      a.out = out;
      a.M = M;
      a.Hq = Hq;
      a.Hk = Hk;
      a.d = d;
      a.mask = int(c.attrs.mask);
      a.window = c.attrs.window;
      a.first_canvas_pos = c.attrs.first_canvas_pos;
      a.blocks = d_blocks;
      // The dot mode: on the bf16 tensor cores where the head dim allows,
      // with the CPU dot mode's roundings either way.
      a.round_bf16 = opt.bf16_dot;
      const bool tc = opt.bf16_dot && k::tc_attention_supported(d);
      launched(tc ? "attention.tensor_cores" : "attention.flash",
               tc ? k::launch_tc_attention(stream, a) : k::launch_flash_attention(stream, a),
               {d_q, d_qpos, a.keys[0].k, a.keys[0].v, a.keys[0].pos, a.keys[1].k, a.keys[1].v, a.keys[1].pos, d_blocks,
                out});
    } else {
      attention_products(c, a.keys, d_q, d_qpos, d_blocks, out);
    }
  }
  download(0, out);
}

// Two products in pedantic fp32 cuBLAS around a softmax kernel, per chunk of
// query rows (scores of up to scratch_elems), over the keys gathered into
// one workspace when the cache has rows. Query head h reads key head
// g = h / G (G = Hq / Hk); for each j < G one strided-batched product runs
// the heads h = g·G + j of every g. Row-major, per head: scores_h [rows, S]
// = q_h [rows, d] · k_gᵀ, where q_h rows have stride Hq·d and k_g rows Hk·d;
// column major that is scores_hᵀ (S×rows, ld S) = k_g (d×S, ld Hk·d, op T) ·
// q_hᵀ (d×rows, ld Hq·d). Then out_h [rows, d] (row stride Hq·d) = p_h ·
// v_g, i.e. out_hᵀ (d×rows) = v_gᵀ (d×S, ld Hk·d) · p_hᵀ (S×rows, ld S).
// The scores are head-major [Hq, rows, S].
void CudaBackend::Impl::attention_products(const OpCall& c, const k::FlashKeys (&segments)[2], const float* d_q,
                                           const int32_t* d_qpos, const int32_t* d_blocks, float* out) {
  const Tensor& q = *c.in[0];
  const int64_t M = q.dim(0), Hq = q.dim(1), d = q.dim(2), Hk = c.in[1]->dim(1);
  const int64_t S = segments[0].rows + segments[1].rows, row = Hk * d;
  const float *d_k = segments[1].k, *d_v = segments[1].v;
  const int32_t* d_kpos = segments[1].pos;
  if (segments[0].rows > 0) {  // gather the segments: cache rows, then the new ones
    auto* k_all = static_cast<float*>(alloc(S * row * 4, "workspace (gathered keys)", true));
    auto* v_all = static_cast<float*>(alloc(S * row * 4, "workspace (gathered values)", true));
    auto* p_all = static_cast<int32_t*>(alloc(S * 4, "workspace (gathered key positions)", true));
    for (int i = 0; i < 2; ++i) {
      const k::FlashKeys& seg = segments[i];
      if (seg.rows == 0) continue;
      const int64_t at = i == 0 ? 0 : segments[0].rows;
      copy_device(k_all + at * row, seg.k, seg.rows * row * 4);
      copy_device(v_all + at * row, seg.v, seg.rows * row * 4);
      copy_device(p_all + at, seg.pos, seg.rows * 4);
    }
    d_k = k_all;
    d_v = v_all;
    d_kpos = p_all;
  }
  const int64_t G = Hq / Hk;
  const int64_t rows_per = std::max<int64_t>(1, std::min(M, opt.scratch_elems / std::max<int64_t>(1, Hq * S)));
  auto* scores = static_cast<float*>(alloc(rows_per * Hq * S * 4, "workspace (scores)", true));
  // The dot mode: bf16 products (Q, K, V and the probabilities rounded, fp32
  // sums), as the CPU's dot mode rounds them.
  const bool bf16 = opt.bf16_dot;
  const void *qa = d_q, *ka = d_k, *va = d_v, *pa = scores;
  if (bf16) {
    qa = to_bf16(d_q, M * Hq * d, "workspace (q in bf16)");
    ka = to_bf16(d_k, S * row, "workspace (keys in bf16)");
    va = to_bf16(d_v, S * row, "workspace (values in bf16)");
  }
  const int64_t esize = bf16 ? 2 : 4;
  for (int64_t m0 = 0; m0 < M; m0 += rows_per) {
    const int64_t rows = std::min(rows_per, M - m0);
    const std::string detail = "rows " + std::to_string(m0) + ".." + std::to_string(m0 + rows);
    for (int64_t j = 0; j < G; ++j) {
      Gemm g;
      g.ta = CUBLAS_OP_T;
      g.m = S;
      g.n = rows;
      g.k = d;
      g.A = ka;
      g.lda = Hk * d;
      g.stride_a = d;
      g.B = static_cast<const char*>(qa) + (m0 * Hq * d + j * d) * esize;
      g.ldb = Hq * d;
      g.stride_b = G * d;
      g.C = scores + j * rows * S;
      g.ldc = S;
      g.stride_c = G * rows * S;
      g.batch = Hk;
      g.bf16 = bf16;
      gemm(g);
    }
    launched("attention.softmax",
             k::launch_attention_softmax(stream, scores, d_qpos, d_kpos, m0, rows, Hq, S, int(c.attrs.mask),
                                         c.attrs.window, c.attrs.first_canvas_pos, d_blocks, segments[0].rows),
             {scores, d_qpos, d_kpos, d_blocks}, detail);
    if (bf16) pa = to_bf16(scores, rows * Hq * S, "workspace (probabilities in bf16)");
    for (int64_t j = 0; j < G; ++j) {
      Gemm g;
      g.m = d;
      g.n = rows;
      g.k = S;
      g.A = va;
      g.lda = Hk * d;
      g.stride_a = d;
      g.B = static_cast<const char*>(pa) + j * rows * S * esize;
      g.ldb = S;
      g.stride_b = G * rows * S;
      g.C = out + m0 * Hq * d + j * d;
      g.ldc = Hq * d;
      g.stride_c = G * d;
      g.batch = Hk;
      g.bf16 = bf16;
      gemm(g);
    }
  }
}

void CudaBackend::Impl::router_topk(const OpCall& c) {
  const Tensor& x = *c.in[0];
  const int64_t M = x.dim(0), H = x.dim(1), E = c.w[1]->shape[0];
  const int K = c.attrs.top_k;
  k::WType st, pt, et;
  const void* scale = weight(*c.w[0], &st);
  const void* proj = weight(*c.w[1], &pt);
  const void* pes = weight(*c.w[2], &et);
  auto* d_x = static_cast<float*>(input(x, "input 0 (x)"));
  auto* idx = static_cast<int32_t*>(alloc_output(0));
  auto* wts = static_cast<float*>(alloc_output(1));
  auto* inv = static_cast<float*>(alloc(M * 4, "workspace (inverse rms)", true));
  auto* logits = static_cast<float*>(alloc(M * E * 4, "workspace (router logits)", true));
  const float root = float(1.0 / std::sqrt(double(H)));
  launched("router_topk.inv_rms", k::launch_router_inv_rms(stream, d_x, M, H, c.attrs.eps, inv), {d_x, inv});
  launched("router_topk.logits", k::launch_router_logits(stream, d_x, inv, scale, st, proj, pt, M, H, E, root, logits),
           {d_x, inv, scale, proj, logits});
  launched("router_topk.select", k::launch_router_select(stream, logits, pes, et, M, E, K, idx, wts),
           {logits, pes, idx, wts});
  download(0, idx);
  download(1, wts);
}

// Grouped by expert on the device (docs/cuda.md §3.2): moe_route_kernel
// orders the (token, k) pairs by expert (tokens ascending within an expert),
// one gather stacks the routed rows, two grouped products run every expert
// in one launch each (each expert's weights read once per op, quantized ones
// dequantized in the tiles), the gated activation runs over all rows, and
// moe_combine sums each token's expert outputs in ascending expert order,
// the reference's. The host never needs the counts: nothing waits, unless
// the mode checks every op (checker, sync), which validates the routing at
// once; otherwise an invalid routing (only a faulty router can make one) is
// left out and reported at the next copy to the host (CudaArena::sticky).
// A second output gets each (token, k) slot's fp32 activation row, the down
// product's input before the dot modes round or quantize it (ops/op.h):
// gathered back from the expert-ordered rows by row_of, only when asked.
void CudaBackend::Impl::moe_experts(const OpCall& c) {
  const Tensor &x = *c.in[0], &idx = *c.in[1], &wts = *c.in[2];
  const WeightRef &gu = *c.w[0], &down = *c.w[1];
  const int64_t M = x.dim(0), H = x.dim(1), K = idx.dim(1), E = gu.shape[0], I = gu.shape[1] / 2, MK = M * K;
  auto* d_idx = static_cast<int32_t*>(input(idx, "input 1 (expert indices)"));
  auto* d_wts = static_cast<float*>(input(wts, "input 2 (expert weights)"));
  auto* d_status = static_cast<int32_t*>(alloc((E + 4) * 4, "workspace (expert counts)", true));
  auto* d_starts = static_cast<int32_t*>(alloc((E + 1) * 4, "workspace (expert offsets)", true));
  auto* d_tok = static_cast<int32_t*>(alloc(MK * 4, "workspace (tokens by expert)", true));
  auto* d_w = static_cast<float*>(alloc(MK * 4, "workspace (expert weights by expert)", true));
  auto* d_row = static_cast<int32_t*>(alloc(MK * 4, "workspace (row of each routed pair)", true));
  const bool checked = opt.checker || opt.sync;
  launched("moe_experts.route",
           k::launch_moe_route(stream, d_idx, d_wts, M, int(K), E, d_status, d_starts, d_tok, d_w, d_row,
                               checked ? nullptr : arena->sticky, checked ? 0 : arena->site_id(where, K, E)),
           {d_idx, d_wts, d_status, d_starts, d_tok, d_w, d_row});
  if (checked && MK > 0) {
    std::vector<int32_t> status(size_t(E + 4), 0);
    check(cudaMemcpyAsync(status.data(), d_status, status.size() * 4, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync (routing status)");
    arena->traffic.d2h_bytes += int64_t(status.size()) * 4;
    sync_stream("cudaStreamSynchronize (routing status)");
    const std::string bad = routing_error(&status[size_t(E)], K, E);
    if (!bad.empty()) fail(bad);
  }
  k::WType gt, dt;
  const void* d_gu = weight(gu, &gt);
  const void* d_down = weight(down, &dt);
  auto* d_x = static_cast<float*>(input(x, "input 0 (x)"));
  auto* out = static_cast<float*>(alloc_output(0));
  auto* acts = c.out.size() > 1 ? static_cast<float*>(alloc_output(1)) : nullptr;
  // Slot order from the fp32 activation rows (expert order), when asked.
  auto slot_acts = [&](const float* act) {
    if (acts)
      launched("moe_experts.slot_acts", k::launch_gather_slots(stream, act, d_row, MK, I, acts), {act, d_row, acts});
  };
  float* y = nullptr;
  // The dot mode over bf16 experts (or FP8 ones with a scale per channel):
  // the tensor-core grouped products on the expert inputs and activations
  // rounded to bf16 (the CPU's dot mode).
  const bool fp8 = fp8_path(gu) && fp8_path(down);
  const bool tensor_cores = fp8 || (opt.bf16_dot && gt == k::WType::kBF16 && dt == k::WType::kBF16);
  // The integer mode over quantized experts: both products on int8
  // activation blocks (the CPU's int8-dot experts), the gated activation in
  // fp32 between them.
  const bool integer = int8_path(gu) && int8_path(down);
  if (MK > 0 && H > 0 && integer) {
    auto* xe = static_cast<float*>(alloc(MK * H * 4, "workspace (expert inputs)", true));
    y = static_cast<float*>(alloc(MK * H * 4, "workspace (expert outputs)", true));
    launched("moe_experts.gather", k::launch_gather_rows(stream, d_x, d_tok, MK, H, xe), {d_x, d_tok, xe});
    if (I > 0) {
      auto* g = static_cast<float*>(alloc(MK * 2 * I * 4, "workspace (gate and up)", true));
      auto* act = static_cast<float*>(alloc(MK * I * 4, "workspace (expert activations)", true));
      const I8Acts ax = quantize_i8(xe, MK, H, "moe_experts.quantize_i8");
      i8_gemm("moe_experts.gate_up_i8", ax, H, d_starts, E, M, gu, d_gu, 2 * I, g);
      launched("moe_experts.glu", k::launch_glu_split(stream, g, MK, I, act), {g, act});
      slot_acts(act);
      const I8Acts aa = quantize_i8(act, MK, I, "moe_experts.quantize_i8");
      i8_gemm("moe_experts.down_i8", aa, I, d_starts, E, M, down, d_down, H, y);
    } else {
      zero(y, MK * H * 4);
    }
  } else if (MK > 0 && H > 0 && tensor_cores) {
    auto* xe = static_cast<uint16_t*>(alloc(MK * H * 2, "workspace (expert inputs, bf16)", true));
    y = static_cast<float*>(alloc(MK * H * 4, "workspace (expert outputs)", true));
    launched("moe_experts.gather_bf16", k::launch_gather_rows_bf16(stream, d_x, d_tok, MK, H, xe), {d_x, d_tok, xe});
    if (I > 0) {
      auto* g = static_cast<float*>(alloc(MK * 2 * I * 4, "workspace (gate and up)", true));
      auto* act = static_cast<uint16_t*>(alloc(MK * I * 2, "workspace (expert activations, bf16)", true));
      const auto* w_gu = static_cast<const uint16_t*>(d_gu);
      const auto* w_down = static_cast<const uint16_t*>(d_down);
      if (fp8)
        fp8_gemm("moe_experts.gate_up_fp8", xe, H, d_starts, E, M, gu, 2 * I, g);
      else
        launched("moe_experts.gate_up_bf16", k::launch_grouped_gemm_bf16(stream, xe, H, d_starts, E, M, w_gu, 2 * I, g),
                 {xe, d_starts, w_gu, g});
      launched("moe_experts.glu_bf16", k::launch_glu_split_bf16(stream, g, MK, I, act), {g, act});
      if (acts) {  // act holds them rounded to bf16: the same products in fp32
        auto* act32 = static_cast<float*>(alloc(MK * I * 4, "workspace (expert activations, fp32)", true));
        launched("moe_experts.glu", k::launch_glu_split(stream, g, MK, I, act32), {g, act32});
        slot_acts(act32);
      }
      if (fp8)
        fp8_gemm("moe_experts.down_fp8", act, I, d_starts, E, M, down, H, y);
      else
        launched("moe_experts.down_bf16", k::launch_grouped_gemm_bf16(stream, act, I, d_starts, E, M, w_down, H, y),
                 {act, d_starts, w_down, y});
    } else {
      zero(y, MK * H * 4);
    }
  } else if (MK > 0 && H > 0) {
    auto* xe = static_cast<float*>(alloc(MK * H * 4, "workspace (expert inputs)", true));
    auto* g = static_cast<float*>(alloc(MK * 2 * I * 4, "workspace (gate and up)", true));
    auto* act = static_cast<float*>(alloc(MK * I * 4, "workspace (expert activations)", true));
    y = static_cast<float*>(alloc(MK * H * 4, "workspace (expert outputs)", true));
    launched("moe_experts.gather", k::launch_gather_rows(stream, d_x, d_tok, MK, H, xe), {d_x, d_tok, xe});
    if (I > 0) {
      launched("moe_experts.gate_up", k::launch_grouped_gemm(stream, xe, H, d_starts, E, M, d_gu, gt, 2 * I, g),
               {xe, d_starts, d_gu, g});
      launched("moe_experts.glu", k::launch_glu_split(stream, g, MK, I, act), {g, act});
      slot_acts(act);
      launched("moe_experts.down", k::launch_grouped_gemm(stream, act, I, d_starts, E, M, d_down, dt, H, y),
               {act, d_starts, d_down, y});
    } else {
      zero(y, MK * H * 4);  // no intermediate units: every expert outputs zeros
    }
  }
  if (M > 0 && H > 0) {
    if (MK == 0)
      zero(out, M * H * 4);
    else
      launched("moe_experts.combine", k::launch_moe_combine(stream, y, d_idx, d_wts, d_row, M, int(K), H, out),
               {y, d_idx, d_wts, d_row, out});
  }
  download(0, out);
  if (acts) {
    // No hidden units (H = 0): every gate and up product is 0, and so is gelu_tanh(0)·0.
    if (H == 0) zero(acts, MK * I * 4);
    download(1, acts);
  }
}

void CudaBackend::Impl::elementwise(const OpCall& c) {
  const int64_t n = c.in[0]->numel();
  auto* a = static_cast<float*>(input(*c.in[0], "input 0"));
  float* b = c.in.size() > 1 ? static_cast<float*>(input(*c.in[1], "input 1")) : nullptr;
  auto* out = static_cast<float*>(alloc_output(0));
  switch (c.kind) {
    case OpKind::kGeluGlu: launched("gelu_glu", k::launch_gelu_glu(stream, a, b, n, out), {a, b, out}); break;
    case OpKind::kAdd: launched("add", k::launch_add(stream, a, b, n, out), {a, b, out}); break;
    case OpKind::kScale:
      // The scalar is read on the host, as the reference does.
      launched("scale", k::launch_scale(stream, a, c.w[0]->at(0), n, out), {a, out});
      break;
    case OpKind::kSoftcap: launched("softcap", k::launch_softcap(stream, a, c.attrs.cap, n, out), {a, out}); break;
    default: fail("internal: not an elementwise op");
  }
  download(0, out);
}

// Rows skip.. of (a then b), the first take_rows of them when set: two
// device-to-device copies (the KV cache stays on the device, and a batched
// pass slices and stacks its rows there).
void CudaBackend::Impl::concat_rows(const OpCall& c) {
  std::vector<const char*> src(c.in.size());
  for (size_t i = 0; i < c.in.size(); ++i)
    src[i] = static_cast<const char*>(input(*c.in[i], "input " + std::to_string(i)));
  auto* out = static_cast<char*>(alloc_output(0));
  char* dst = out;
  if (out)
    for (const ConcatRowsPart& p : concat_rows_parts(c)) {
      copy_device(dst, src[p.input] + p.from * 4, p.count * 4);
      dst += p.count * 4;
    }
  download(0, out);
}

// The per-step sampler (ops/op.h kSample), one block per row. The kernel
// cannot throw: a row it cannot sample comes back marked in the argmax output
// (ops/row_sampling.h bad_row_mark) and the caller reports it.
void CudaBackend::Impl::sample(const OpCall& c) {
  const Tensor &x = *c.in[0], &u = *c.in[1];
  const int64_t M = x.dim(0), V = x.dim(1);
  auto* d_x = static_cast<float*>(input(x, "input 0 (logits)"));
  auto* d_u = u.dim(0) > 0 ? static_cast<int32_t*>(input(u, "input 1 (uniforms)")) : nullptr;
  auto* z = static_cast<float*>(alloc_output(0));
  auto* am = static_cast<int32_t*>(alloc_output(1));
  auto* ent = static_cast<float*>(alloc_output(2));
  auto* smp = static_cast<int32_t*>(alloc_output(3));
  launched("sample", k::launch_sample(stream, d_x, M, V, c.attrs.temperature, d_u, z, am, ent, smp),
           {d_x, d_u, z, am, ent, smp});
  download(0, z);
  download(1, am);
  download(2, ent);
  download(3, smp);
}

}  // namespace dgemma
