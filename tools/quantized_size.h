#pragma once
// Bytes a weight would take after `--quantize MODE` (quantize at load,
// src/quantize/load_quantize.h), estimated from its shape alone, for
// `dgemma plan --quantize`: "would the model fit if quantized?".
#include <cstdint>

#include "model/weights.h"
#include "quantize/load_quantize.h"

namespace dgemma::cli {

// The stored bytes of `t` (t.nbytes) when `mode` leaves it as it is;
// otherwise codes plus scales in the mode's layout, from the mode's row
// (quantize/load_formats.h load_quantized_bytes):
//   nf4            n/2 + n/64 (8-bit block absmax) + 4 per 256 blocks + 4 (double quant)
//   nvfp4-experts  n/2 + n/16 (fp8 scale per 16) + 4 per expert projection (weight_scale_2:
//                  8 per expert of gate_up_proj, 4 of down_proj)
//   q8             n + 4 per row block of 64/32/16 columns
//   fp8            n + 4 per row; fp8-block n + 4 per row block of 128/64/32/16 columns
uint64_t quantized_bytes(const BoundTensor& t, LoadQuantization mode);

}  // namespace dgemma::cli
