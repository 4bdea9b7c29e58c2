#pragma once
// Quantize at load (`--quantize nf4|nvfp4-experts|q8|fp8|fp8-block`): plain checkpoint
// weights are quantized in memory as they are bound, with the same
// quantizers `dgemma quantize` writes files with (quantizers.h); nothing is
// written. Covered weights:
//   nf4            NF4 + double quant (blocksize 64): attention, dense MLP,
//                  self-conditioning, experts and the vision tower's linears
//                  (like `dgemma quantize --format nf4`, which leaves the tower plain)
//   nvfp4-experts  NVFP4, routed experts only, one slice per expert projection
//                  with gate and up sharing weight_scale_2 (docs/formats.md §3)
//   q8             int8, one fp32 scale per 64 (or 32, 16) columns: the same
//                  weights as nf4
//   fp8            FP8 E4M3, one fp32 scale per output channel (row): the
//                  same weights as nf4
//   fp8-block      FP8 E4M3, one fp32 scale per 128 (or 64, 32, 16) columns
//                  of a row; per channel when none of them divides the row
// Embeddings, norms, the router and layer scalars stay as stored.
#include <optional>
#include <string>
#include <string_view>

#include "checkpoint/tensor_names.h"
#include "core/tensor.h"

namespace dgemma {

enum class LoadQuantization { kNone, kNf4, kNvfp4Experts, kQ8, kFp8, kFp8Block };
// Each mode's name, help line, scheme, covered weights and block rule are
// one row of kLoadFormats (quantize/load_formats.h); the functions below read
// the rows.
//
// "none", "nf4", "nvfp4-experts", "q8", "fp8", "fp8-block" (the rows' names; "" is none).
std::optional<LoadQuantization> parse_load_quantization(std::string_view name);
// The accepted names, for messages: "none, nf4, ..., fp8 or fp8-block".
const char* load_quantization_names();
// The modes and what each does, for --help: "none; nf4 (NF4 + double quant:
// ...); nvfp4-experts (NVFP4, experts only); ...".
std::string load_quantization_help();

// Whether `mode` quantizes weights of component `c` (see the list above).
bool load_quantization_covers(Component c, LoadQuantization mode);

// The quantized weight for `plain` (a float weight bound for `ex`) when the
// mode covers ex's component, else nullopt. With `release_source` (the plain
// data is a read-only file mapping, not a buffer anyone owns) the source
// pages are handed back to the kernel afterwards (madvise), so loading
// never holds the plain and the quantized copy of the whole model at once.
// `threads` quantize blocks of the weight in parallel (quant::QuantizeParams).
std::optional<WeightRef> quantize_at_load(const WeightRef& plain, const ExpectedTensor& ex, LoadQuantization mode,
                                          bool release_source, int threads = 0);

}  // namespace dgemma
