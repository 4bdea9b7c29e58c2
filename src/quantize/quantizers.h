#pragma once
// Post-training quantizers (round to nearest, no calibration) producing each
// format's packed bytes exactly as its files store them (docs/formats.md
// §2-§4), plus our int8 format. Used by `dgemma quantize` (export.h), by
// quantize-at-load (load_quantize.h) and by tests. Inputs are read through a
// FloatSource in chunks, so no fp32 copy of a whole tensor is made.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "quantize/quantized_weight.h"

namespace dgemma::quant {

// Elements of a float tensor (F32, BF16, F16) by flat index.
struct FloatSource {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t numel = 0;
  void read(int64_t begin, int64_t n, float* out) const;
};

// Largest |x| over elements [begin, begin + n).
float abs_max(const FloatSource& src, int64_t begin, int64_t n);

// Every quantizer below takes `threads` (1: the calling thread only; 0: every
// hardware thread). Blocks and rows are independent, so the bytes produced do
// not depend on it; pieces smaller than ~256K elements per thread run serially.
int resolve_quantize_threads(int threads);

// ---- bitsandbytes NF4 (docs/formats.md §2) ---------------------------------------
struct Nf4Packed {
  int blocksize = 64;
  bool double_quant = true;
  int nested_blocksize = 256;
  std::vector<uint8_t> codes;         // ceil(n/2) bytes, element 2k in the high nibble
  std::vector<float> absmax;          // per block (without double quant)
  std::vector<uint8_t> absmax_codes;  // per block (double quant)
  std::vector<float> nested_absmax;   // per nested block (double quant)
  float nested_offset = 0.0f;         // mean of the block absmax values (double quant)
};
// Codes by nearest NF4 value of x / absmax(block); with double quant the
// absmax values minus their mean are coded with bitsandbytes' dynamic 8-bit
// map in blocks of `nested_blocksize` (§2.3).
Nf4Packed quantize_nf4(const FloatSource& src, int blocksize = 64, bool double_quant = true, int nested_blocksize = 256,
                       int threads = 1);
// The double-quant step alone: fills absmax_codes, nested_absmax and
// nested_offset of `p` from block maxima `absmax` (for chunked writers).
void nf4_double_quantize(const std::vector<float>& absmax, int nested_blocksize, Nf4Packed& p);

// ---- ModelOpt NVFP4 (docs/formats.md §3.3) -----------------------------------------
struct Nvfp4Packed {
  std::vector<uint8_t> codes;   // [rows, cols/2], column 2k in the low nibble
  std::vector<uint8_t> scales;  // E4M3 [rows, cols/16]
  float global_scale = 1.0f;    // weight_scale_2
};
// weight_scale_2 for a weight whose largest |x| is amax: amax / (6 · 448)
// (1 for an all-zero weight).
float nvfp4_global_scale(float amax);
// Rows [row0, row0 + rows) of a [*, cols] source with the given global scale:
// block scale e4m3(amax(block) / (6 · g)) clamped to [2^-9, 448] (1 for an
// all-zero block), codes nearest E2M1 of x / (scale · g).
Nvfp4Packed quantize_nvfp4(const FloatSource& src, int64_t row0, int64_t rows, int64_t cols, float global_scale,
                           int threads = 1);

// ---- MLX affine (docs/formats.md §4.2) ---------------------------------------------
struct AffinePacked {
  std::vector<uint8_t> codes;   // [rows, cols·bits/8] bytes = little-endian u32 words, LSB first
  std::vector<uint8_t> scales;  // [rows, cols/group] in scale_dtype
  std::vector<uint8_t> biases;  // like scales
};
// Per group: bias = min, scale = (max - min) / (2^bits - 1), both rounded to
// scale_dtype first, q = round((x - bias) / scale) clamped.
AffinePacked quantize_affine(const FloatSource& src, int64_t rows, int64_t cols, int bits, int group, DType scale_dtype,
                             int threads = 1);

// ---- int8 (ours) ---------------------------------------------------------------
struct Int8Packed {
  std::vector<uint8_t> codes;  // int8 [rows, cols]
  std::vector<float> scales;   // [rows, cols/block]: amax / 127
};
Int8Packed quantize_int8(const FloatSource& src, int64_t rows, int64_t cols, int block, int threads = 1);

// ---- FP8 E4M3 (ours) -------------------------------------------------------------
struct Fp8Packed {
  std::vector<uint8_t> codes;  // E4M3FN [rows, cols]
  std::vector<float> scales;   // [rows, cols/block]: amax / 448
};
// Per block of a row: scale = amax / 448 (0 for an all-zero block, whose
// codes are 0), codes = e4m3(x / scale) rounded to nearest even (NaN stays
// NaN). block = cols: one scale per output channel.
Fp8Packed quantize_fp8(const FloatSource& src, int64_t rows, int64_t cols, int block, int threads = 1);

// ---- in-memory quantized weights (quantize at load, tests) --------------------
struct QuantizeParams {
  int block = 0;             // 0: the scheme's default (NF4 64, NVFP4 16, affine 64, int8 64, fp8 the row)
  int bits = 4;              // affine: 4 or 8
  bool double_quant = true;  // NF4
  // NVFP4: rows per stored slice and per shared global scale. A fused expert
  // gate_up [E, 2I, H] uses slice_rows I and scale_rows 2I (gate and up of an
  // expert share weight_scale_2, docs/formats.md §3.3); 0: the whole weight.
  int64_t slice_rows = 0, scale_rows = 0;
  int threads = 1;  // see resolve_quantize_threads
};
// A QuantizedWeight owning its bytes, of logical `shape` and `dtype`.
std::shared_ptr<QuantizedWeight> quantize_weight(QuantScheme scheme, const FloatSource& src,
                                                 const std::vector<int64_t>& shape, DType dtype,
                                                 const QuantizeParams& params = {});
// The largest block size in {64, 32, 16} that divides cols (0 if none):
// MLX and int8 groups must divide the row.
int row_block_for(int64_t cols, int preferred);

}  // namespace dgemma::quant
