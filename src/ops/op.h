#pragma once
// The op vocabulary: every computation of the model is one of these ops,
// described by an OpCall (kind, where it runs, inputs, weights, outputs,
// attributes). Backends implement run(OpCall); observers see every call. This
// is what makes backends comparable op by op (conventions.md: ggml's
// test-backend-ops) and what the differential checker replays.
//
// Shapes (M rows/tokens, H hidden, V vocab, E experts, k top-k):
//   embedding       in: ids[M] I32          w: table[V,H]            out: [M,H] = table[id]·scale
//   soft_embedding  in: logits[M,V]         w: table[V,H]            out: [M,H] = softmax(logits)·table·scale
//                   (logits and probabilities are rounded to the table dtype first, docs/model.md §3.3)
//   rms_norm        in: x[...,D]            w: [D] or none           out: like x (row-wise over D, docs/model.md §1.2)
//   linear          in: x[M,K]              w: W[N,K]                out: [M,N] = x·Wᵀ
//   rope            in: x[M,h,d], pos[M]                             out: like x (split-half pairs, docs/model.md §1.4)
//                   or  x[M,h,d], pos[M,2] (column, row): the vision tower's 2-D RoPE (docs/model.md §7.3):
//                   channels [0, d/2) rotate with the column and [d/2, d) with the row, each half as a
//                   split-half RoPE of width d/2 (rope_pairs <= d/4 pairs per half; d % 4 == 0)
//   attention       in: q[M,Hq,d], k[S,Hk,d], v[S,Hk,d], qpos[M], kpos[S]
//                       [, cache_k[C,Hk,d], cache_v[C,Hk,d], cache_kpos[C]]
//                                                                    out: [M,Hq·d] (scale 1.0, fp32 softmax)
//                   [, blocks[M] I32] (last input; only with a blocks mask, below)
//                   With the three cache inputs the keys are the cache's rows skip_rows.. followed by
//                   k's rows, in that order: the keys (and the sums) of an attention over
//                   concat_rows(cache, k) with that skip, without the copy, so that a device reads
//                   its KV cache where it lies (attention_keys below).
//   router_topk     in: x[M,H]              w: scale[H], proj[E,H], per_expert_scale[E]
//                                                                    out: idx[M,k] I32, weight[M,k] (docs/model.md
//                                                                    §1.5)
//   moe_experts     in: x[M,H], idx[M,k], weight[M,k]   w: gate_up[E,2I,H], down[E,H,I]
//                                                                    out: [M,H] = Σ weight·down(gelu(gate)·up)
//                                                                    [, act[M,k,I]]
//                   One or two outputs. The optional second is the input of each routed expert's
//                   down projection: act[m,j,:] = gelu_tanh(gate_e·x_m) ⊙ (up_e·x_m), e = idx[m,j],
//                   in fp32 as the op computes it, before the rounding or quantization a product
//                   mode applies to the down product's input (bf16-dot, int8-dot). Output 0 is
//                   bit-identical with or without it; a backend copies it out only when asked
//                   (PTQ calibration of the experts' activation scales, docs/formats.md §3).
//   gelu_glu        in: gate[M,I], up[M,I]                           out: gelu_tanh(gate)·up
//   add             in: a, b (same shape)                            out: a + b
//   scale           in: x                   w: s[1]                  out: s·x
//   softcap         in: x                                            out: cap·tanh(x/cap)
//   concat_rows     in: a[Sa,...], b[Sb,...], ... (two or more; same dtype and row shape)
//                                                                    out: [Sa+Sb+...-skip,...] = rows skip.. of (a then
//                                                                    b ...)
//                   (the KV cache: gathering committed keys with the new ones,
//                   appending to the cache with sliding-window eviction; a
//                   batched pass stacking its sequences' self-conditioning);
//                   with take_rows > 0 only rows skip..skip+take-1 (out: [take,...]):
//                   a slice of a batched pass's stacked rows (b empty)
//   affine          in: x[M,H]              w: shift[H], scale[H]    out: (x - shift)·scale (fp32, each step
//                                                                         rounded; the patch input 2·(p - 0.5) and the
//                                                                         vision standardization, docs/model.md §7)
//   pool_cells      in: x[N,H], cell[N] I32                          out: [attrs.out_rows,H], row c = Σ over the rows n
//                                                                         with cell[n] = c, in row order, of
//                                                                         x[n]·attrs.scale (the vision pooler,
//                                                                         docs/model.md §7.4); every cell in
//                                                                         [0, out_rows)
//   scatter_rows    in: base[T,H], src[n,H], rows[n] I32             out: [T,H] = base with row rows[i] replaced by
//                                                                         src[i] (rows distinct, in [0, T): image soft
//                                                                         tokens into the prompt, docs/model.md §7.6)
//   sample          in: logits[M,V], uniforms[M,2] I32 or [0,2]      out: z[M,V], argmax[M] I32, entropy[M],
//                                                                         sample[M] I32
//                   The per-row pass of a denoising step (docs/model.md §3.2, ops/row_sampling.h process_row):
//                   z = logits / T (attrs.temperature; float32 division), argmax = first maximum of z,
//                   entropy (nats) of softmax(z) as float(log S - Σp·d / S), p = exp(d) in fp32,
//                   d = z - max z, sums in double; sample = inverse CDF of p at u·S (double) where u is
//                   the double whose bit pattern is uniforms[r] (low word first), never a zero-weight
//                   index. A [0,2] uniforms tensor means no draw: sample = -1. Sums may run in any
//                   order (a device differs from the CPU only by rounding), the draw is deterministic.
//                   A row whose z holds NaN or +inf, or only -inf, cannot be sampled: the CPU throws
//                   BadLogitsRow (ops/row_sampling.h) naming the row and its first bad logit; a device kernel,
//                   which cannot throw, marks the row instead (argmax = bad_row_mark(first bad logit),
//                   or -1 for a row of -inf; entropy NaN; sample -1), and the caller turns the mark into
//                   the same error (ops/row_sampling.h throw_marked_row).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace dgemma {

enum class OpKind : uint8_t {
  kEmbedding,
  kSoftEmbedding,
  kRmsNorm,
  kLinear,
  kRope,
  kAttention,
  kRouterTopk,
  kMoeExperts,
  kGeluGlu,
  kAdd,
  kScale,
  kSoftcap,
  kConcatRows,
  kSample,
  kAffine,
  kPoolCells,
  kScatterRows,
};
inline constexpr int kNumOpKinds = 17;

std::string_view op_name(OpKind kind);

// kVision: the vision tower, run once per image before the encoder pass that
// takes its soft tokens (docs/model.md §7).
enum class Pass : uint8_t { kEncoder, kDecoder, kVision };
std::string_view pass_name(Pass pass);

// Which keys a query may see (docs/model.md §2.2, §2.4).
enum class AttentionMask : uint8_t {
  kNone,             // decoder: every given key (the key set itself encodes the window)
  kCausalWindow,     // encoder: kpos <= qpos and (window == 0 or qpos - kpos < window)
  kCommittedWindow,  // decoder A/B variant (JAX after its 2026-07 fix): committed keys
                     // (kpos < first_canvas_pos) only if kpos > qpos - window
  // The encoder over a prompt with images (docs/model.md §7.7); both need the
  // blocks input: blocks[r] >= 0 names the image block of new row r (a
  // query and the key of the same row), -1 a text row. Keys in the cache
  // segment belong to no block.
  kCausalWindowBlocks,  // Transformers' generate(): kCausalWindow, or the same block
                        // (a block may reach past the window)
  kJaxBlocks,           // Google's JAX rule for sliding layers: (kpos <= qpos or the same
                        // block) and |qpos - kpos| < window
};

// Whether `mask` reads the attention call's blocks input.
inline bool mask_uses_blocks(AttentionMask mask) {
  return mask == AttentionMask::kCausalWindowBlocks || mask == AttentionMask::kJaxBlocks;
}

struct OpAttrs {
  float eps = 0.0f;    // rms_norm, router_topk
  float scale = 1.0f;  // embedding, soft_embedding
  // embedding, soft_embedding: the run computes like the reference in bf16.
  // soft_embedding rounds the logits and their softmax to bf16 before the
  // product (docs/model.md §3.3), and rows of a quantized table are rounded to bf16
  // after dequantization (quantize/quantized_weight.h). Set from the run's
  // precision, never from the table's storage dtype: a bf16 checkpoint run in
  // fp32 is the reference in float32.
  bool round_to_bf16 = false;
  float cap = 0.0f;         // softcap
  int top_k = 0;            // router_topk
  int rope_pairs = 0;       // rope: rotated (i, i+d/2) pairs
  double rope_theta = 0.0;  // rope
  AttentionMask mask = AttentionMask::kNone;
  int window = 0;                // attention
  int64_t first_canvas_pos = 0;  // attention kCommittedWindow
  int64_t skip_rows = 0;         // concat_rows: leading rows of the concatenation left out;
                                 // attention: leading rows of the cache left out
  float temperature = 0.0f;      // sample (> 0)
  int64_t take_rows = 0;         // concat_rows: rows kept after the skipped ones (0: all the rest)
  int64_t out_rows = 0;          // pool_cells: cells (rows of the output)
};

struct OpCall {
  OpKind kind{};
  std::string_view site;  // instance within the layer, e.g. "self_attn.q_proj"
  int layer = -1;         // -1: runs once per pass (model level)
  Pass pass = Pass::kEncoder;
  int step = 0;  // denoising step (0 for encoder passes)
  std::vector<const Tensor*> in;
  std::vector<const WeightRef*> w;
  std::vector<Tensor*> out;
  OpAttrs attrs;
  // The caller accepts outputs that stay in a device backend's memory
  // (Tensor::device with host_stale set) until someone calls ensure_host().
  // Without it every output is current on the host when run() returns. Set
  // by the Executor in resident mode (ops/backend.h); host backends ignore it.
  bool device_outputs = false;
};

// Validates input/weight shapes and dtypes of `call` and sizes its outputs.
// Shared by every backend so that all of them agree on the contract; throws
// dgemma::Error naming the op, site, layer and the offending shape.
void prepare_op(const OpCall& call);

// The copies of a prepared concat_rows call, in elements, in output order:
// `count` elements of input `input` from element `from` (rows skip.. of the
// inputs one after the other, the first take_rows of them; inputs that
// contribute nothing are left out). Shared by every backend, so that they
// cannot disagree on the row arithmetic.
struct ConcatRowsPart {
  size_t input = 0;
  int64_t from = 0, count = 0;
};
std::vector<ConcatRowsPart> concat_rows_parts(const OpCall& call);

// The blocks input of a prepared attention call (null without one).
const Tensor* attention_blocks(const OpCall& call);

// Whether a query at position qpos sees a key at kpos under the call's mask
// (attrs.mask, window, first_canvas_pos); qblock and kblock are their image
// blocks for the blocks masks (-1: none; a key of the cache segment has
// none). The one statement of the rules (docs/model.md §2.2, §2.4, §7.7) for
// host code: reference kernels, FLOP counts.
bool attention_visible(const OpAttrs& attrs, int64_t qpos, int64_t kpos, int32_t qblock = -1, int32_t kblock = -1);

// The keys of a prepared attention call as two segments, in order: part 0
// the cache's rows [first, first + rows) (none without cache inputs), part 1
// the new rows. Key s < parts[0].rows is cache row parts[0].first + s, else
// new row s - parts[0].rows. Shared by every backend, like concat_rows_parts.
struct AttentionKeyPart {
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* pos = nullptr;
  int64_t first = 0, rows = 0;
};
struct AttentionKeys {
  AttentionKeyPart parts[2];
  int64_t total() const { return parts[0].rows + parts[1].rows; }
};
AttentionKeys attention_keys(const OpCall& call);

// Whether the op runs inside each transformer layer ("layer") or once per
// pass ("model") in the DiffusionGemma graph.
std::string_view op_scope(OpKind kind);

}  // namespace dgemma
