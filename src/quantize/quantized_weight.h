#pragma once
// A quantized weight: the logical tensor a WeightRef describes (shape and a
// float dtype, so op shape checks keep working), stored as packed codes plus
// block scales in one of the formats of docs/formats.md §2-§4 or our int8
// format. The bytes normally stay in the mapped checkpoint (pointers into it,
// valid as long as the TensorStore); buffers produced at load (quantize at
// load, the dense embedding copy) are owned here.
//
// Value semantics (one definition for every reader, kernel and test):
//   * the dequantized value of an element is the format's formula evaluated
//     in fp32, in the order written in dequantize_reference() (docs/formats.md
//     §2.4, §3.3, §4.2, §5.2); GEMMs use exactly these values with fp32
//     accumulation (docs/model.md §6.1: the product path is an fp32-accumulate engine);
//   * embedding rows (lookup and the dense copy used by soft_embedding) are
//     these values in an fp32 run, and these values rounded to bf16 in a bf16
//     run (OpAttrs::round_to_bf16), as a reference runtime's dequantize op
//     returns its compute dtype. So an fp32 run of a quantized checkpoint
//     computes exactly what an fp32 run of its dequantized F32 copy does.
//
// WeightRef::data of a quantized weight points at the first slice's codes and
// must not be read as `dtype`: CPU kernels that accept quantized weights
// dispatch on WeightRef::quant first (backend/cpu/quant_kernels.h). The one
// exception is a quantized weight consumed by an op without a quantized path
// (router.proj, which MLX conversions store in 8 bits): it is bound with a
// dense fp32 copy as data/dtype (see resolve.h) so those kernels run unchanged.
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "core/tensor.h"

namespace dgemma {

enum class QuantScheme : uint8_t {
  kNF4,     // bitsandbytes NF4, optional double quant (docs/formats.md §2)
  kNVFP4,   // NVIDIA ModelOpt NVFP4: E2M1 codes, E4M3 block scales, fp32 global scale (docs/formats.md §3)
  kAffine,  // MLX affine: w = fma(scale, q, bias), 4 or 8 bits (docs/formats.md §4)
  kInt8,    // ours (quantize at load): w = scale·q, q int8, one fp32 scale per block
  kFP8,     // ours (quantize at load): w = scale·e4m3(q), q an E4M3FN byte, one fp32 scale per block
            // of a row (the whole row: per output channel)
  kGgml,    // a ggml block type of a GGUF file (QuantizedWeight::ggml_type; docs/formats.md §5.2):
            // scales inside the blocks, rows of whole blocks back to back
};
std::string_view quant_scheme_name(QuantScheme s);

// One stored piece of a quantized weight: logical rows [row_begin, row_begin
// + rows) of the weight viewed as a matrix [rows(), cols()] (leading
// dimensions flattened). One slice for a tensor stored whole; ModelOpt stores
// every expert projection separately, so a fused expert weight is one slice
// per expert and projection (docs/formats.md §3.2), used in place.
struct QuantSlice {
  int64_t row_begin = 0;
  int64_t rows = 0;
  // Packed codes. kNF4: the flattened tensor, element 2k in the high nibble of
  // byte k (§2.2). kNVFP4: row-major [rows, cols/2], column 2k in the low
  // nibble (§3.3). kAffine: row-major [rows, cols·bits/8] (little-endian u32
  // words packed LSB first, so byte-wise: 4-bit column 2k in the low nibble,
  // §4.2). kInt8: row-major int8 [rows, cols]. kFP8: row-major E4M3FN
  // bytes [rows, cols]. kGgml: the blocks, row-major, each row
  // ggml_row_bytes(ggml_type, cols) long; scales are inside the blocks.
  const uint8_t* codes = nullptr;
  // Block scales, `scale_dtype` elements. kNF4: absmax per block of the
  // flattened tensor (F32, or U8 codes with double quant); kNVFP4: E4M3
  // [rows, cols/16]; kAffine: [rows, cols/group]; kInt8, kFP8: F32 [rows,
  // cols/block].
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;  // kAffine: like scales
  float global_scale = 1.0f;        // kNVFP4: weight_scale_2
};

struct QuantizedWeight {
  QuantScheme scheme = QuantScheme::kNF4;
  std::vector<int64_t> shape;  // logical shape
  DType dtype = DType::kBF16;  // logical float dtype (the original weight's)
  int64_t rows = 0, cols = 0;  // shape as [product of leading dims, last dim]
  int block = 64;              // elements per scale (NF4 blocksize, NVFP4 16, MLX group size, int8 block;
                               // kGgml: elements per ggml block, 32 or 256)
  int bits = 4;                // kAffine: 4 or 8; others fixed (4, 4, 8, 8)
  DType scale_dtype = DType::kF32;
  GgmlType ggml_type = GgmlType::kF32;  // kGgml: the block type
  std::vector<QuantSlice> slices;       // ascending row_begin, covering [0, rows) without gaps

  // kNF4 only (docs/formats.md §2.1, §2.3): the 16-entry code book and, with double
  // quant, the 8-bit absmax code book, the per-nested-block fp32 scales and
  // the offset. Code books are tiny and copied here (aligned for kernels).
  float code_map[16] = {};
  bool double_quant = false;
  int nested_block = 256;
  float nested_map[256] = {};
  const uint8_t* nested_scales = nullptr;  // F32 [ceil(blocks / nested_block)]
  float nested_offset = 0.0f;

  // Checkpoint tensors this weight was read from (the packed weight first),
  // so the binder can mark them used; their total size.
  std::vector<std::string> stored_names;
  uint64_t stored_bytes = 0;
  // The expected-tensor names (canonical or tied alias) it was found under.
  std::vector<std::string> found_as;
  std::string describe;  // e.g. "bitsandbytes nf4 (double quant)", for messages and reports

  // Buffers owned by this weight (codes/scales produced at load, dense copies).
  std::deque<std::vector<uint8_t>> owned;
  // True when the WeightRef bound to this weight carries a dense fp32 copy as
  // data/dtype (resolve.h: weights of ops without a quantized path), so any
  // backend may read it as a plain weight.
  bool bound_dense = false;

  QuantizedWeight() = default;
  QuantizedWeight(const QuantizedWeight&) = delete;
  QuantizedWeight& operator=(const QuantizedWeight&) = delete;

  // The slice holding logical row r (binary search).
  const QuantSlice& slice_for(int64_t r) const;
  // Scale of NF4 block b (absmax; decoded from the nested code with double
  // quant). Inline: the GEMMs' decoders call it once per block.
  float nf4_block_scale(int64_t b) const {
    const uint8_t* absmax = slices.front().scales;
    float f;
    if (!double_quant) {
      std::memcpy(&f, absmax + 4 * b, 4);
      return f;
    }
    // docs/formats.md §2.4: nested_quant_map[absmax_u8[b]] * nested_absmax[b / 256] + nested_offset.
    std::memcpy(&f, nested_scales + 4 * (b / nested_block), 4);
    return nested_map[absmax[b]] * f + nested_offset;
  }

  // The whole weight dequantized, as F32 or rounded to BF16 (`as`; module
  // comment), materialized once per dtype on first use and kept for the
  // weight's lifetime: the table soft_embedding multiplies with (docs/model.md §6.3
  // pitfall 10). Thread-safe. `row_fn` expands one row (a kernel's fast path,
  // which must give the reference's values); null: dequantize_reference().
  using RowFn = std::function<void(const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out)>;
  const WeightRef& dense(DType as, const RowFn& row_fn = {}) const;

 private:
  struct DenseCopy {
    std::once_flag once;
    std::vector<uint8_t> bytes;
    WeightRef ref;
  };
  mutable DenseCopy dense_f32_, dense_bf16_;
};

// FP8 with one scale per output channel (row).
inline bool fp8_per_channel(const QuantizedWeight& w) { return w.scheme == QuantScheme::kFP8 && w.block == w.cols; }
// The FP8 weights the bf16 dot mode multiplies as bf16 values (E4M3 numbers
// are bf16 numbers), the scales applied to the sums (CUDA: the tensor cores;
// CPU: activations rounded to bf16, backend/cpu/quant_kernels.h QuantDot): a
// scale per output channel, applied to each output, or per block of a
// multiple of 32 columns (the tensor-core kernel's depth), applied to each
// block's partial sum.
inline bool fp8_dot_weights(const QuantizedWeight& w) {
  return fp8_per_channel(w) || (w.scheme == QuantScheme::kFP8 && w.block % 32 == 0 && w.cols % w.block == 0);
}

// Scalar reference dequantization of logical elements [col, col + n) of row
// `row` into fp32 `out` (module comment; docs/formats.md §2.4, §3.3, §4.2, §5.2). The
// oracle the fast kernels are tested against; also used for dense copies.
void dequantize_reference(const QuantizedWeight& w, int64_t row, int64_t col, int64_t n, float* out);

// Rounds fp32 values to `dtype` in place (identity for F32; BF16/F16 round to
// nearest even).
void round_to_dtype(DType dtype, float* v, int64_t n);

}  // namespace dgemma
