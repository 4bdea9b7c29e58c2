#pragma once
// Integer-dot GEMMs over quantized weights (`--precision int8-dot`,
// CpuBackendOptions::int8_dot). The activations are quantized per row in
// blocks of 32 columns (symmetric int8: d = max|x| / 127, q = round(x / d));
// the weights stay exactly the stored codes and scales, decoded in tiles
// into small integers (below) and never widened to floats. Per (activation
// row m, weight row j, block b) the integer sum Σ q·V is exact in int32 and
// the output is
//     out[m, j] = Σ_b fma-chain( float(Σ_k q[m,k]·V[j,k]) · (ws[j,b]·d[m,b]) )
//                 (+ wb[j,b] · (d[m,b]·Σ_k q[m,k]) for MLX affine weights),
// blocks in ascending order, each term one fma into an fp32 accumulator. The
// integer value V and the block scale ws of each format (docs/formats.md §2-§4):
//   int8 (ours)   V = q,                    ws = scale
//   MLX affine    V = q (0..15 or 0..255),  ws = scale, wb = bias (the bias
//                 is folded through the activation block sums)
//   NVFP4         V = 2·E2M1 (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12: exact),
//                 ws = (e4m3(scale) · global) · 0.5, per 16 columns
//   NF4           V = round(code / cmax · 32767) with cmax = max |code|,
//                 ws = absmax · cmax / 32767: the 16 code-book levels to 15
//                 bits (error ≤ 1.5e-5 of the block's absmax, 250× finer than
//                 the bf16 a reference runtime dequantizes to).
// So only the activations are rounded (≤ d/2 per element) and, for NF4, the
// code book to 15 bits. Everything is integer-exact up to the per-block fma
// chain, whose order is fixed: every level (portable, AVX2) and every thread
// count gives bit-identical results (tests/quantize/int8_dot_test.cc).
//
// Products are int16 × int16 pairs (vpmaddwd, or vpdpwssd with VNNI), or on
// AMX int8 × int8 quads (TDPBSSD/TDPBSUD; NF4's values as a signed high and
// an unsigned low byte, two products): |V| ≤ 32767 and |q| ≤ 127, so a block
// of 32 sums to at most 32·32767·127 < 2^31 without overflow; its
// conversion to fp32 is exact below 2^24 and rounds to nearest above (every
// level alike).
#include <cstdint>
#include <vector>

#include "core/ggml_types.h"
#include "core/thread_pool.h"
#include "ops/op.h"
#include "quantize/integer_levels.h"
#include "quantize/quantized_weight.h"

namespace dgemma::cpu {

// The integer levels of each format and the activation block live in the
// quantization layer (quantize/integer_levels.h), shared with the CUDA backend.
using ::dgemma::I8Values;
using ::dgemma::int8_dot_supported;
using ::dgemma::int8_weight_values;
using ::dgemma::Int8WeightValues;
using ::dgemma::kI8Block;

// out[m·ld_out + j] = Σ_k x[m·K + k] · W[row0 + j, k] for m < M, j < n, on
// the integer path (module comment) with the kernels of `isa` (every level
// gives the same bits). Requires int8_dot_supported(*w.quant).
struct Int8DotIsa;
void int8_dot_gemm(const Int8DotIsa& isa, const WeightRef& w, int64_t row0, int64_t n, const float* x, int64_t M,
                   float* out, int64_t ld_out, ThreadPool& pool);

// Several GEMMs over one weight on one activation matrix x [M, K]: group g
// multiplies rows [m0, m1) of x with weight rows [row0, row0 + n) into rows
// [m0, m1) of out (routed experts: one group per expert, its tokens' rows).
// All groups' tiles are scheduled together over the pool; each group's
// results are bit-identical to int8_dot_gemm on its rows alone (activations
// are quantized per row). Requires int8_dot_supported(*w.quant).
struct Int8Group {
  int64_t row0 = 0, m0 = 0, m1 = 0;
};
void int8_dot_grouped_gemm(const Int8DotIsa& isa, const WeightRef& w, const std::vector<Int8Group>& groups, int64_t n,
                           const float* x, int64_t M, float* out, int64_t ld_out, ThreadPool& pool);

// Activations quantized in blocks of 32: q[m·kp + k] (int16 holding int8
// values, zero-padded to kp = K rounded up to 32), d[m·nb + b] and
// ds[m·nb + b] = d · Σ_k q over the block (nb = kp / 32). A block with a NaN
// or ±Inf gets q = 0 and d = ds = NaN, so the outputs it feeds become NaN.
// q8: the same values as int8 for the levels that take them so
// (Int8DotIsa::int8_rows; else null), in panels of 64 columns,
// q8[((k / 64)·(m + 16) + row)·64 + k % 64], with 16 zero rows after the
// last row of each panel and zero columns up to a multiple of 64: 16 rows of
// a panel are 1 KB in a row, whatever row they start at.
struct Int8Activations {
  int64_t m = 0, k = 0, kp = 0, nb = 0;
  int16_t* q = nullptr;
  float* d = nullptr;
  float* ds = nullptr;
  const int8_t* q8 = nullptr;
  // For the levels with byte products (Int8DotIsa::byte_tile) on
  // byte-level weights, else null: q + 128 as unsigned bytes in panels of
  // kBytePanelRows rows, quads of columns interleaved by row,
  // u8[((p·kp/4 + k/4)·kBytePanelRows + r)·4 + k % 4] for row r of panel p,
  // and d and ds likewise, d8[(p·nb + b)·kBytePanelRows + r]: a tile
  // broadcasts each row's quad and scale at fixed offsets from one pointer.
  // A panel starts at every row tile() is called with as m0 and every
  // kBytePanelRows rows after it up to its m1 (panel_of_row[m]: the panel
  // starting at row m); its rows past m1 are zero and never read.
  const uint8_t* u8 = nullptr;
  const float* d8 = nullptr;
  const float* ds8 = nullptr;
  const int32_t* panel_of_row = nullptr;
};
inline constexpr int kBytePanelRows = 8;

// A 16-entry int16 table as two pshufb tables: the low and the high bytes.
struct NibbleTable {
  alignas(16) uint8_t lo[16];
  alignas(16) uint8_t hi[16];
};
NibbleTable nibble_table(const int16_t (&values)[16]);

// The building blocks of one dispatch level (int8_dot_kernels.cc,
// int8_dot_amx.cc).
struct Int8DotIsa {
  const char* name;
  // Quantizes rows [m0, m1) of x (row stride ldx, K columns) into a.
  void (*quantize_rows)(const float* x, int64_t ldx, int64_t m0, int64_t m1, const Int8Activations& a);
  // Weight tile of 16 rows over columns [k0, k0 + kc) (kc a multiple of 32),
  // decoded and laid out by interleave() below; ws[s·16 + j] the scale of
  // sub-block s (of `sub` columns: 32, or 16 for NVFP4) of row j; wb[b·16 +
  // j] the affine bias of block b (null when none). acc[(m - m0)·16 + j] +=
  // this chunk's terms (module comment) for rows m ∈ [m0, m1) of a.
  void (*tile)(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, I8Values values,
               const int16_t* v, const float* ws, const float* wb, float* acc);
  // Weight decoding: n values (a multiple of 32) of 4-bit codes through a
  // 16-entry table (element 2k in the high nibble of byte k when high_first,
  // else the low one), and of 8-bit codes (signed or unsigned), as int16.
  void (*nibbles)(const uint8_t* codes, int64_t n, bool high_first, const NibbleTable& table, int16_t* out);
  void (*bytes)(const uint8_t* codes, int64_t n, bool is_signed, int16_t* out);
  // The decoded rows rows[j·ld + k] (j < 16, k < kc ≤ ld) in the layout tile()
  // reads, into v (room for 16·kc int16). The int16 levels: pairs
  // interleaved by row, v[(p·16 + j)·2 + i] = rows[j·ld + 2p + i]. AMX: see
  // int8_dot_amx.cc.
  void (*interleave)(const int16_t* rows, int64_t ld, int64_t kc, I8Values values, int16_t* v);
  // Levels with per-thread state (AMX's tile configuration): called by each
  // worker before its first tile() of a GEMM with these sub-blocks and
  // values, and after its last. Null when none.
  void (*begin)(int sub, I8Values values) = nullptr;
  void (*end)() = nullptr;
  // Whether tile() reads Int8Activations::q8.
  bool int8_rows = false;
  // Optional, for the int16 pair layout: 4-bit codes of nr ≤ 16 rows (row j
  // from rows[j]: kc/2 bytes, pair p of the row in byte p; element 2p in
  // the high nibble when high_first) decoded through the table straight
  // into interleave()'s layout, rows nr..15 zero — the same v as nibbles()
  // per row and interleave(), without the row buffer.
  void (*nibble_pairs)(const uint8_t* const* rows, int nr, int64_t kc, bool high_first, const NibbleTable& table,
                       int16_t* v) = nullptr;
  // The integer levels of n columns of ggml blocks as bytes (int8_dot_ggml.h
  // ggml_levels; every level gives the same bytes).
  void (*ggml_levels)(GgmlType t, const uint8_t* blocks, int64_t n, uint8_t* out) = nullptr;
  // Optional byte products for weights whose levels are bytes (the ggml
  // types; int8_dot_bytes.cc): byte_quads() lays 16 rows of kc levels
  // (rows[j·ld + k], int8) out as quads of columns by row, and sums each
  // row's levels per sub-block into wsum[s·16 + j]; byte_tile() is tile()
  // over them with the activations of Int8Activations::u8: the same integer
  // sums and epilogue, so the same bits.
  void (*byte_quads)(const int8_t* rows, int64_t ld, int64_t kc, int sub, uint8_t* v, int32_t* wsum) = nullptr;
  void (*byte_tile)(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
                    const int32_t* wsum, const float* ws, const float* wb, float* acc) = nullptr;
  // The largest |V| byte_tile() takes (AVX2's vpmaddubsw keeps a pair of
  // products in int16 only up to 64); weights with larger levels keep the
  // int16 pairs on this level.
  int byte_max_level = 128;
};
inline constexpr int kI8TileRows = 16;

// Every level's table (int8_dot_kernels.cc). Which one a CPU dispatch level
// uses is decided in one place, cpu_level_kernels() (cpu_levels.h); the
// AMX-INT8 one only for CPUs with CpuFeatures::amx_int8.
enum class Int8DotLevel { kPortable, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni, kAmxInt8 };
const Int8DotIsa& int8_dot_table(Int8DotLevel level);
// Every level the running CPU can execute, portable first, including those
// no dispatch level picks on it (AVX2 without VNNI on a VNNI CPU): for tests
// and benchmarks, whatever the cap.
std::vector<const Int8DotIsa*> int8_dot_levels();

namespace int8avx512 {
// Int8DotIsa::nibble_pairs on AVX-512 BW (int8_dot_avx512.cc).
void nibble_pairs(const uint8_t* const* rows, int nr, int64_t kc, bool high_first, const NibbleTable& table,
                  int16_t* v);
}  // namespace int8avx512

namespace int8avx2 {
// Int8DotIsa::ggml_levels on AVX2 (int8_dot_ggml_avx2.cc).
void ggml_levels(GgmlType t, const uint8_t* blocks, int64_t n, uint8_t* out);
}  // namespace int8avx2

namespace int8bytes {
// Int8DotIsa::byte_quads and byte_tile on AVX512-VNNI (int8_dot_bytes.cc).
void quads(const int8_t* rows, int64_t ld, int64_t kc, int sub, uint8_t* v, int32_t* wsum);
void tile(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
          const int32_t* wsum, const float* ws, const float* wb, float* acc);
}  // namespace int8bytes

namespace int8bytes256 {
// Int8DotIsa::byte_quads and byte_tile on AVX2 (vpmaddubsw) and AVX-VNNI
// (vpdpbusd on 256 bits) (int8_dot_bytes_avx2.cc).
void quads(const int8_t* rows, int64_t ld, int64_t kc, int sub, uint8_t* v, int32_t* wsum);
void tile(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
          const int32_t* wsum, const float* ws, const float* wb, float* acc);
void tile_vnni(const Int8Activations& a, int64_t m0, int64_t m1, int64_t k0, int64_t kc, int sub, const uint8_t* v,
               const int32_t* wsum, const float* ws, const float* wb, float* acc);
}  // namespace int8bytes256

namespace int8amx {
// The AMX-INT8 level (int8_dot_amx.cc), built on the AVX2 level's
// activation quantization; only for CPUs with CpuFeatures::amx_int8.
Int8DotIsa level(const Int8DotIsa& avx2);
}  // namespace int8amx

}  // namespace dgemma::cpu
