#pragma once
// The SIMD building blocks one dispatch level provides, as a table of plain
// functions. Each level is compiled in its own translation unit
// (kernels_avx2.cc, kernels_avx512.cc, kernels_avx512bf16.cc) under a target
// region, and these functions take only raw pointers and the POD structs
// below, so that no standard-library code is ever compiled for a wider ISA
// than the baseline. The drivers in fast_*.cc (baseline code) get the table
// of the backend's level (cpu_levels.h), own the threading and the scratch
// memory, and call in.
//
// GEMM formulation (broadcast form, as in GotoBLAS/BLIS): C[M,N] = A[M,K]·B[K,N]
// where for `linear` B = Wᵀ. A is packed into micro-panels of `mr` rows
// ([ceil(M/mr)][K][mr]: one broadcast per row and k), B into panels of kNr
// columns ([ceil(N/kNr)][K][kNr], zero-padded); the micro-kernel keeps an
// mr × kNr tile of C in registers (AVX2: mr × 16, one half of the panel after
// the other) and streams k. Each C element is one lane accumulated over
// k = 0..K-1 in order with FMA, so results do not depend on the blocking, the
// tile position, the row count or the thread count, and a bf16 weight gives
// bit-identical results to the same values stored as fp32.
#include <cstdint>

#include "core/cpu_features.h"

namespace dgemma::cpu {

// Panel width: 2 zmm (AVX-512) or 2 × 2 ymm (AVX2, one 16-column half at a
// time) of fp32 accumulators per row, and 32 bf16 = one 64-byte cache line of
// weights per k.
inline constexpr int kNr = 32;
// K block: a B micro-panel of kKc × kNr is 32 KB in fp32 (16 KB in bf16) and
// stays in the 48 KB L1d while every mr-row block of A streams past it; the A
// slab of a 256-row canvas (256 × kKc × 4 B = 256 KB) stays in the 1 MB L2.
inline constexpr int kKc = 256;
// Panels per L2 block: with M = 256 the C block (256 × 8·32 × 4 B = 256 KB)
// stays in L2 across all K blocks instead of making a round trip to memory
// per K block (which for the 262144-wide LM head would be 11× its 268 MB).
inline constexpr int kNcPanels = 8;

enum class PanelType : uint8_t {
  kF32,        // [P][K][kNr] float
  kBF16,       // [P][K][kNr] bf16, widened exactly in the micro-kernel (fp32 FMA)
  kBF16Pairs,  // [P][ceil(K/2)][kNr][2] bf16: vdpbf16ps layout (A is bf16 pairs too)
  kBF16Split,  // [P][K][kNr] bf16, columns in bf16_split_slot order (AVX2 fp32 FMA)
};

// kBF16Split: within each group of 16 columns, column j < 8 is stored at slot
// 2j and column 8 + j at slot 2j + 1, so that one 256-bit load holds, in each
// 32-bit lane j, column j in the low half and column 8 + j in the high half.
// Two exact widenings then give both fp32 vectors: the lane shifted left by
// 16 (columns 0..7) and the lane with the low half cleared (columns 8..15),
// instead of a zero-extension plus a shift per 8 columns.
inline constexpr int bf16_split_slot(int j) { return (j & ~15) | ((j & 7) << 1) | ((j >> 3) & 1); }

// The B operand: prepacked panels, or a row-major [K][ld] source (fp32 or
// bf16) packed per (K block, panel) into the caller's scratch.
struct GemmB {
  PanelType type = PanelType::kF32;
  const void* panels = nullptr;  // panel p starts at element p·panel_stride
  int64_t panel_stride = 0;      // elements (float or uint16) per panel
  const void* rows = nullptr;    // row-major source instead of panels
  int64_t ld = 0;                // elements per source row
};

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  // Packed A: float [ceil(m/mr)][k][mr], or for kBF16Pairs uint32 (two bf16,
  // k even in the low half) [ceil(m/mr)][ceil(k/2)][mr].
  const void* a = nullptr;
  GemmB b;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;  // C += A·B instead of C = A·B (k = 0 adds to the stored C)
};

// Rows [m0, m1) (m0 a multiple of mr) × panels [p0, p1) of C.
struct GemmRange {
  int64_t p0 = 0, p1 = 0, m0 = 0, m1 = 0;
};

// One attention work item (docs/model.md §1.3, §2.1-§2.4): rows t ∈ [t0, t1) of KV
// head kh, row t = query m = t / group, query head kh·group + t % group.
struct AttnArgs {
  const float* q = nullptr;  // [M, Hq, d]
  const int32_t* qpos = nullptr;
  const float* kt = nullptr;                       // per KV head: [ceil(S/kNr)][d][kNr] (Kᵀ panels)
  const float* vp = nullptr;                       // per KV head: [ceil(d/kNr)][S][kNr] (V panels)
  int64_t kt_head_stride = 0, vp_head_stride = 0;  // floats per KV head
  const int32_t* kpos = nullptr;
  float* out = nullptr;  // [M, Hq·d]
  int64_t m = 0, hq = 0, hk = 0, d = 0, s = 0, group = 1;
  int mask = 0;  // AttentionMask as int
  int64_t window = 0, first_canvas_pos = 0;
  // The blocks masks (docs/model.md §7.7): query m's image block and key s's
  // (-1: none; the cache segment's keys have none). Null for other masks.
  const int32_t* qblock = nullptr;
  const int32_t* kblock = nullptr;
  // The dot mode (CpuBackendOptions::bf16_dot): Q, K and V rounded to bf16
  // (K and V by the driver when it packs them), and each key block's
  // probabilities rounded to bf16 for P·V while the row sums add the
  // unrounded ones, as the CUDA backend's tensor-core attention takes them.
  bool round_bf16 = false;
};
// Query rows per attention tile (a multiple of every mr): the K/V block read
// from L2 is reused by this many rows; O tile = 24 × 512 × 4 B = 48 KB.
inline constexpr int kAttnRows = 24;
// Keys per block: scores 24 × 128 and the Kᵀ / V blocks (128 × d) stay in L2.
inline constexpr int kAttnKeys = 128;
// Floats of per-thread scratch an attention tile needs for head dim d.
inline int64_t attn_scratch_floats(int64_t d) {
  const int64_t dp = (d + kNr - 1) / kNr * kNr;
  return kAttnRows * d + kAttnRows * kAttnKeys * 2 + kAttnRows * dp + 4 * kAttnRows + 64;
}

struct IsaKernels {
  CpuIsa isa = CpuIsa::kScalar;
  int mr = 1;  // rows per A micro-panel
  // Panel type for bf16 weights on the fp32 FMA path (kBF16 or kBF16Split).
  PanelType bf16_panels = PanelType::kBF16;
  // Packs rows of x (row r of A = x + rows[r]·ldx, or x + r·ldx when rows is
  // null) into [ceil(m/mr)][k][mr], zero-padding the last block.
  void (*pack_a)(const float* x, int64_t ldx, const int32_t* rows, int64_t m, int64_t k, float* out) = nullptr;
  // Same into bf16 pairs (round to nearest even; only kAvx512Bf16 and up;
  // the AMX level lays each block of mr rows out row-major, kernels_amx.cc).
  void (*pack_a_pairs)(const float* x, int64_t ldx, const int32_t* rows, int64_t m, int64_t k, uint32_t* out) = nullptr;
  // scratch: kKc·kNr floats, used when b.rows is set.
  void (*gemm)(const GemmArgs& args, const GemmRange& range, float* scratch) = nullptr;
  // Rows [kc, kc + kcl) (kc even) × panels [p0, p1) of a row-major bf16
  // [K][ld] source into kBF16Pairs panels at dst + (p - p0)·stride (uint16
  // units; only kAvx512Bf16 and up).
  void (*pack_b_pairs)(const uint16_t* src, int64_t ld, int64_t n, int64_t K, int64_t kc, int64_t kcl, int64_t p0,
                       int64_t p1, int64_t stride, uint16_t* dst) = nullptr;
  // out[i] = gelu_tanh(g[i])·u[i]
  void (*gelu_glu)(const float* g, const float* u, float* out, int64_t n) = nullptr;
  // out[i] = cap·tanh(x[i]/cap)
  void (*softcap)(const float* x, float* out, int64_t n, float cap) = nullptr;
  // out = x · (mean(x²) + eps)^-1/2 (· w when w is not null), one row of n.
  void (*rms_norm_row)(const float* x, const float* w, float* out, int64_t n, float eps) = nullptr;
  // Row max over n values (NaN ignored, -inf when n == 0 or all -inf).
  float (*row_max)(const float* x, int64_t n) = nullptr;
  // out[i] = e^(x[i] - shift); returns Σ out (out may alias x).
  float (*exp_sum)(const float* x, float shift, float* out, int64_t n) = nullptr;
  // x[i] = bf16(x[i]·s) (round to nearest even), in place.
  void (*scale_round_bf16)(float* x, float s, int64_t n) = nullptr;
  // One attention tile; scratch: attn_scratch_floats(d) floats.
  void (*attention_tile)(const AttnArgs& args, int64_t kh, int64_t t0, int64_t t1, float* scratch) = nullptr;
  // Peak-rate loops for the roofline: `iters` iterations of independent
  // register-only FMA chains (fp32) or vdpbf16ps chains (only kAvx512Bf16);
  // return the FLOP executed (a bf16 pair product-add counts 4). `seed`
  // keeps the compiler from folding them away.
  double (*peak_fma)(int64_t iters, float seed) = nullptr;
  double (*peak_dot)(int64_t iters, float seed) = nullptr;
};

// Each level's table; cpu_level_kernels() (cpu_levels.h) picks one per
// dispatch level and never for a level the CPU cannot run.
namespace avx2 {
const IsaKernels* table();
}
namespace avx512 {
const IsaKernels* table();
}
namespace avx512bf16 {
const IsaKernels* table();
}
namespace amx {
const IsaKernels* table();
}

}  // namespace dgemma::cpu
