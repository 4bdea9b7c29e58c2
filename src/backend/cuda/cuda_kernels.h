#pragma once
// Launchers of the CUDA backend's kernels (cuda_kernels.cu). The interface
// uses plain types only, so that the host side of the backend is ordinary C++
// compiled by the C++ compiler (with its warnings and sanitizers) and nvcc only
// sees the kernels. Each launcher enqueues one kernel on `stream` and returns
// its launch shape for the launch log; the caller checks the CUDA error state.
// A launcher whose grid would be empty launches nothing (an empty grid is an
// invalid configuration, not a no-op); callers handle those outputs.
//
// The kernels are deliberately simple (one block per row, one warp per dot
// product) and mirror the scalar reference in ops/cpu line by line, in the
// same order of floating-point operations where the reference has one order.
// Speed is a later issue; this file is the device reference.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dgemma::cuda {

// Weight element types as the kernels read them (widened to fp32 on load).
// kQuant: the weight pointer is a device QView (below), dequantized per
// element.
enum class WType : int { kF32 = 0, kBF16 = 1, kF16 = 2, kQuant = 3 };

// A quantized weight on the device (quantize/quantized_weight.h, whose
// dequantize_reference() the kernels follow formula for formula): the packed
// bytes of each stored slice, uploaded as they are, and the small tables.
// Element i of the logical [rows, cols] matrix dequantizes to fp32 exactly as
// on the CPU; rounding to the logical dtype is the caller's (embeddings).
enum class QScheme : int { kNF4 = 0, kNVFP4 = 1, kAffine = 2, kInt8 = 3, kFP8 = 4, kGgml = 5 };
// ggml's block types (core/ggml_types.h GgmlType, the same ids), as the
// device decoders (ggml_blocks.cuh) name them.
enum class GType : int {
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
};
struct QSlice {
  int64_t row_begin = 0, rows = 0;
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;
  float global_scale = 1.0f;
};
struct QView {
  QScheme scheme = QScheme::kNF4;
  int block = 64, bits = 4;
  WType scale_type = WType::kF32;  // affine scales and biases
  int64_t rows = 0, cols = 0;
  int nslices = 0;
  const QSlice* slices = nullptr;  // device array, ascending row_begin
  float code_map[16] = {};         // NF4 code book, or the E2M1 values (NVFP4)
  int double_quant = 0, nested_block = 256;
  float nested_offset = 0.0f;
  const float* nested_scales = nullptr;  // NF4 double quant
  float nested_map[256] = {};            // NF4 double quant
  float e4m3[256] = {};                  // NVFP4 block scales; FP8 codes
  // The integer path (int8-dot; backend/cpu/int8_dot.h Int8WeightValues, set
  // when int8_dot_supported): each 4-bit code's integer value, NF4's
  // cmax / 32767, the columns per weight scale (32, or 16 for NVFP4).
  int i8_supported = 0;
  int i8_sub = 32;
  float i8_nf4_factor = 0.0f;
  int16_t i8_levels[16] = {};
  // ggml blocks (kGgml; docs/formats.md §5.2): rows of whole blocks, one
  // slice; `block` is the type's elements per block. The columns per scale
  // (32 or 16), whether sub-blocks carry an offset, and IQ4's 16 levels.
  GType ggml_type = GType::kQ8_0;
  int ggml_block_bytes = 0, ggml_sub = 32, ggml_offset = 0;
  int64_t ggml_row_bytes = 0;
  int16_t ggml_iq4[16] = {};
};

// Threads per block of every kernel (8 warps).
inline constexpr unsigned kBlock = 256;

struct LaunchShape {
  unsigned grid[3] = {0, 0, 0};
  unsigned block = 0;
  bool launched = false;  // false: empty grid, nothing enqueued
};

// Attention masks, numbered as ops/op.h AttentionMask. The two block masks
// read a block id per new row (the op's blocks input; cache keys have none).
inline constexpr int kMaskNone = 0, kMaskCausalWindow = 1, kMaskCommittedWindow = 2, kMaskCausalWindowBlocks = 3,
                     kMaskJaxBlocks = 4;

// out[m, :] = round(table[ids[m], :]) · scale, where round goes to the
// table's logical dtype `round_to` (an identity for a plain table; a
// quantized one dequantizes to fp32 first). Ids out of [0, V) give NaN rows
// (the host checks them first; this is the second line of defence).
LaunchShape launch_embedding(cudaStream_t stream, const int32_t* ids, int64_t M, const void* table, WType wt,
                             WType round_to, int64_t V, int64_t H, float scale, float* out);

// probs[r, :] = softmax(logits[r, :]) over V, for rows [0, rows); logits and
// probabilities rounded to bf16 when round_bf16 (docs/model.md §3.3).
LaunchShape launch_soft_probs(cudaStream_t stream, const float* logits, int64_t rows, int64_t V, bool round_bf16,
                              float* probs);

// dst[i] = round((float) src[offset + i]) for i < n, rounding to `round_to`
// (kF32: none).
LaunchShape launch_widen(cudaStream_t stream, const void* src, WType wt, WType round_to, int64_t offset, int64_t n,
                         float* dst);

// Row-wise RMSNorm over D; w may be null (no scale).
LaunchShape launch_rms_norm(cudaStream_t stream, const float* x, int64_t rows, int64_t D, const void* w, WType wt,
                            float eps, float* out);

// Split-half RoPE; inv_freq[pairs] is computed on the host exactly as the
// reference does, for the rotated width (d, or d / 2 with two_d). two_d: pos
// is [M, 2] (column, row) and each head's channels [0, d/2) rotate with the
// column, [d/2, d) with the row, each half a split-half RoPE of width d / 2
// (ops/op.h rope, docs/model.md §7.3).
LaunchShape launch_rope(cudaStream_t stream, const float* x, const int32_t* pos, const float* inv_freq, int64_t M,
                        int64_t heads, int64_t d, int pairs, bool two_d, float* out);

// out[m, h] = (x[m, h] - shift[h]) · scale[h], each step rounded to fp32
// (ops/op.h affine).
LaunchShape launch_affine(cudaStream_t stream, const float* x, int64_t M, int64_t H, const void* shift, WType shift_t,
                          const void* scale, WType scale_t, float* out);
// out[c, :] = Σ over the rows n with cells[n] = c, in row order, of
// fp32(x[n, :] · scale), for c < C (ops/op.h pool_cells); a cell outside
// [0, C) adds to no row.
LaunchShape launch_pool_cells(cudaStream_t stream, const float* x, const int32_t* cells, int64_t N, int64_t H,
                              int64_t C, float scale, float* out);
// out[rows[i], :] = src[i, :] for i < n where rows[i] is in [0, T) (out
// already holds the base; ops/op.h scatter_rows).
LaunchShape launch_scatter_rows(cudaStream_t stream, const float* src, const int32_t* rows, int64_t n, int64_t T,
                                int64_t H, float* out);

// Router (docs/model.md §1.5): inv_rms[m] = (mean(x²) + eps)^(-1/2); logits[m, e] =
// Σ_h ((x·inv)·scale[h]·root)·proj[e, h]; then per row softmax, top-k
// (descending, lower index on ties), renormalize, × per_expert_scale.
LaunchShape launch_router_inv_rms(cudaStream_t stream, const float* x, int64_t M, int64_t H, float eps, float* inv_rms);
LaunchShape launch_router_logits(cudaStream_t stream, const float* x, const float* inv_rms, const void* scale,
                                 WType scale_t, const void* proj, WType proj_t, int64_t M, int64_t H, int64_t E,
                                 float root, float* logits);
LaunchShape launch_router_select(cudaStream_t stream, float* logits, const void* per_expert_scale, WType pes_t,
                                 int64_t M, int64_t E, int K, int32_t* idx, float* weights);

// Routed experts, all on the device (moe_experts in cuda_backend.cc).
// The routing permutation of moe_experts (cuda_kernels.cu moe_route_kernel):
// status [E + 4] (counts, then the validity code, its entries and index),
// starts [E + 1], tokens/weights [M·K] in expert order, row_of [M·K] (the
// position of each (token, k) entry in that order, -1 when left out); the
// first invalid routing is also kept in sticky[5] (with `site`) when given.
LaunchShape launch_moe_route(cudaStream_t stream, const int32_t* idx, const float* w, int64_t M, int K, int64_t E,
                             int32_t* status, int32_t* starts, int32_t* tokens, float* weights, int32_t* row_of,
                             int32_t* sticky, int32_t site);
// y[j, :N] = a[j, :K] · W[e]ᵀ for the rows of each expert e (starts[E+1] on
// the device; max_rows bounds any expert's rows), W [E, N, K] in its stored
// or quantized type.
LaunchShape launch_grouped_gemm(cudaStream_t stream, const float* a, int64_t K, const int32_t* starts, int64_t E,
                                int64_t max_rows, const void* w, WType wt, int64_t N, float* y);
// out[m, :] = sum over token m's experts, ascending, of w · y[row_of[m, k], :].
LaunchShape launch_moe_combine(cudaStream_t stream, const float* y, const int32_t* idx, const float* w,
                               const int32_t* row_of, int64_t M, int K, int64_t H, float* out);
// out[t, :] = x[rows[t], :] for t < n.
LaunchShape launch_gather_rows(cudaStream_t stream, const float* x, const int32_t* rows, int64_t n, int64_t H,
                               float* out);
// out[s, :] = act[row_of[s], :] for s < n: expert-ordered rows back in (token, k)
// slot order; NaN where row_of[s] is -1 (a pair the routing left out).
LaunchShape launch_gather_slots(cudaStream_t stream, const float* act, const int32_t* row_of, int64_t n, int64_t I,
                                float* out);
// act[t, i] = gelu_tanh(g[t, i]) · g[t, I + i] over [n, 2I] gate/up rows;
LaunchShape launch_glu_split(cudaStream_t stream, const float* g, int64_t n, int64_t I, float* act);

// ---- bf16 tensor-core path (tc_gemm_kernels.cu; CudaBackendOptions::bf16_dot) ----
// bf16 values are their 16-bit patterns (uint16_t), rounded from fp32 to
// nearest even exactly as dgemma::f32_to_bf16 (core/dtype.h).

// out[i] = bf16(x[i]) for i < n.
LaunchShape launch_to_bf16(cudaStream_t stream, const float* x, int64_t n, uint16_t* out);
// out[t, :] = bf16(x[rows[t], :]) for t < n (the expert inputs of the dot mode).
LaunchShape launch_gather_rows_bf16(cudaStream_t stream, const float* x, const int32_t* rows, int64_t n, int64_t H,
                                    uint16_t* out);
// act[t, i] = bf16(gelu_tanh(g[t, i]) · g[t, I + i]): glu_split rounded for the down projection.
LaunchShape launch_glu_split_bf16(cudaStream_t stream, const float* g, int64_t n, int64_t I, uint16_t* act);
// probs[r, :] = bf16(softmax(bf16(logits[r, :]))): the probabilities of
// soft_probs with round_bf16, bit for bit, stored as bf16.
LaunchShape launch_soft_probs_bf16(cudaStream_t stream, const float* logits, int64_t rows, int64_t V, uint16_t* probs);
// The grouped expert product on the tensor cores: y[j, :N] = a[j, :K] ·
// W[e]ᵀ for the rows j of each expert e (starts[E+1] on the device; max_rows
// bounds any expert's rows), a and W [E, N, K] in bf16, fp32 accumulation
// (wmma 16x16x16 tiles; 64x64 output tiles, k in steps of 32).
LaunchShape launch_grouped_gemm_bf16(cudaStream_t stream, const uint16_t* a, int64_t K, const int32_t* starts,
                                     int64_t E, int64_t max_rows, const uint16_t* w, int64_t N, float* y);
// The same product over FP8 weights (quantized_weight.h fp8_dot_weights):
// codes [E, N, K] E4M3FN bytes widened to bf16 in the tile (exact), scales
// [E·N, K / scale_block] fp32, one per output row and block of scale_block
// columns (K: one per row; else a multiple of 32 dividing K):
// y = Σ_b scales[e·N + n, b] · (a · codesᵀ over block b). Without starts
// (E = 1), one group of max_rows rows: a linear.
LaunchShape launch_grouped_gemm_fp8(cudaStream_t stream, const uint16_t* a, int64_t K, const int32_t* starts, int64_t E,
                                    int64_t max_rows, const uint8_t* codes, const float* scales, int64_t scale_block,
                                    int64_t N, float* y);

// ---- the integer path (int8_dot_kernels.cu; CudaBackendOptions::int8_dot) ----
// The CPU's int8-dot GEMM (backend/cpu/int8_dot.h) on the integer tensor cores,
// with the same integers and the same fp32 operations in the same order, so
// the outputs are bit-identical to the CPU's.

// Activations x [M, K] (K a multiple of 32) quantized per row in blocks of
// 32: q [M, K] int8, and per block d = max|x| / 127, ds = d · Σq and the
// integer Σq (each [M, K / 32]); a block holding NaN or ±Inf gets q = 0,
// Σq = 0 and d = ds = NaN (cpu quantize_rows_portable).
LaunchShape launch_i8_quantize(cudaStream_t stream, const float* x, int64_t M, int64_t K, int8_t* q, float* d,
                               float* ds, int32_t* qsum);
// y[j, :N] = Σ_k a[j, k] · W[e·N + n, k] on the integer path for the rows j
// of each expert e (starts[E+1] on the device; max_rows bounds any expert's
// rows); starts null: one group, rows [0, max_rows) and E = 1 (a linear).
// `w` is the device QView of a weight whose i8_supported is set (scheme and
// bits: its format, known on the host).
LaunchShape launch_i8_grouped_gemm(cudaStream_t stream, const int8_t* q, const float* d, const float* ds,
                                   const int32_t* qsum, int64_t K, const int32_t* starts, int64_t E, int64_t max_rows,
                                   const QView* w, QScheme scheme, int bits, int64_t N, float* y);

// Attention's softmax between its two products (cuBLAS): scores [Hq, rows,
// S] (head-major, query rows m0.. of the op) in place, masked by the
// positions (mask, window, first canvas position: ops/op.h AttentionMask),
// then p = e · (1 / sum) as the reference; a row with no visible key becomes
// zeros. With a block mask, blocks[M] holds the block of each new row (query
// m, and key cached + m: the first `cached` keys are the cache's, in no block).
LaunchShape launch_attention_softmax(cudaStream_t stream, float* scores, const int32_t* qpos, const int32_t* kpos,
                                     int64_t m0, int64_t rows, int64_t Hq, int64_t S, int mask, int64_t window,
                                     int64_t first_canvas_pos, const int32_t* blocks, int64_t cached);

// Flash-style attention (flash_attention_kernels.cu) over two key segments,
// the KV cache's rows then the new rows (ops/op.h attention_keys): out [M,
// Hq·d] as the attention op, the scores kept on the chip. Head dims up to
// kFlashMaxHeadDim; nothing is launched for larger ones.
inline constexpr int64_t kFlashMaxHeadDim = 512;
struct FlashKeys {
  const float* k = nullptr;  // [rows, Hk, d]
  const float* v = nullptr;
  const int32_t* pos = nullptr;  // [rows]
  int64_t rows = 0;
};
struct FlashArgs {
  const float* q = nullptr;  // [M, Hq, d]
  const int32_t* qpos = nullptr;
  FlashKeys keys[2];
  float* out = nullptr;
  int64_t M = 0, Hq = 0, Hk = 0, d = 0;
  int mask = kMaskNone;
  int64_t window = 0, first_canvas_pos = 0;
  // The block masks: the block of each new row [M] (query m and new key m;
  // keys[0], the cache's, have none). Null for the other masks.
  const int32_t* blocks = nullptr;
  // The dot mode's roundings (launch_tc_attention below; the fp32 kernel
  // honours them too, for head dims the tensor-core kernel does not take):
  // Q, K, V and the probabilities in P·V rounded to bf16.
  bool round_bf16 = false;
};
LaunchShape launch_flash_attention(cudaStream_t stream, const FlashArgs& args);
// The same attention on the bf16 tensor cores (tc_attention_kernels.cu), the
// dot mode's: Q, K, V and the probabilities rounded to bf16, fp32 scores,
// softmax and sums, as the CPU's dot mode (ops/cpu AttnArgs::round_bf16).
// For head dims tc_attention_supported() takes (multiples of 8 up to
// kFlashMaxHeadDim: one that is not a multiple of 16, such as the vision
// tower's 72, runs zero-padded to the next one inside the tile, which is
// exact); nothing is launched for others.
bool tc_attention_supported(int64_t d);
LaunchShape launch_tc_attention(cudaStream_t stream, const FlashArgs& args);

LaunchShape launch_gelu_glu(cudaStream_t stream, const float* gate, const float* up, int64_t n, float* out);
LaunchShape launch_add(cudaStream_t stream, const float* a, const float* b, int64_t n, float* out);
LaunchShape launch_scale(cudaStream_t stream, const float* x, float s, int64_t n, float* out);
LaunchShape launch_softcap(cudaStream_t stream, const float* x, float cap, int64_t n, float* out);

// The sample op (ops/op.h kSample), one block per row of logits[M, V]: z =
// logits / T, argmax = first maximum, entropy, and with `uniforms` (M
// doubles as int32 pairs, low word first; null: no draw, sample -1) the
// inverse-CDF sample. A row holding NaN or +inf (after the division), or only
// -inf, is marked instead (ops/row_sampling.h bad_row_mark): argmax -2 - the
// first such index, or -1; entropy NaN; sample -1.
LaunchShape launch_sample(cudaStream_t stream, const float* logits, int64_t M, int64_t V, float temperature,
                          const int32_t* uniforms, float* z, int32_t* argmax, float* entropy, int32_t* sample);

// Test hook of the fault guards: a deliberately bad kernel that stores one
// float at p[index] (used to write just past an output into its canary).
LaunchShape launch_write_at(cudaStream_t stream, float* p, int64_t index, float value);

}  // namespace dgemma::cuda
