#pragma once
// Quantizers from fp32 rows to ggml's block types (docs/formats.md §5.2
// "Quantizers"): per (sub-)block a least-squares scale (and offset) search,
// the K-quants' sub-block scales coded against their super-block scales, and
// the codes recomputed against the stored, rounded scales. The bytes decode
// with ggml_blocks.h.
#include <cstdint>

#include "core/ggml_types.h"

namespace dgemma::quant {

// Quantizes `n` fp32 values (n a multiple of the type's block: Error
// otherwise, as for a non-finite value) into ggml_row_bytes(type, n) bytes
// at `out`. Plain types are converted (F16, BF16: round to nearest even).
// Deterministic: each block depends only on its own values.
void ggml_quantize_row(GgmlType type, const float* x, int64_t n, uint8_t* out);
// `rows` rows of `cols` values, row-major, into rows·ggml_row_bytes(type,
// cols) bytes, over up to `threads` threads (quantizers.h's convention: 0 =
// every hardware thread); the bytes do not depend on the thread count.
void ggml_quantize_rows(GgmlType type, const float* x, int64_t rows, int64_t cols, uint8_t* out, int threads = 1);

}  // namespace dgemma::quant
