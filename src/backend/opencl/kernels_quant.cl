// The decoders of quantized weights (docs/opencl.md §3): each returns one
// logical element [r, c] of a weight as fp32, exactly as the CPU's
// dequantize_reference() computes it (quantize/quantized_weight.h: the same
// float operations in the same order, FP_CONTRACT off). The weight arrives as
// the cache uploaded it (cl_weights.h ClQuantWeight): the packed codes and
// block scales of all its slices joined in row order, so a slice's rows sit
// where the whole tensor's would. The parameters (QPARAMS, kernels_common.cl):
//   q_codes   the packed codes
//   q_scales  the block scales (F32; NF4 with double quant: U8 codes; NVFP4:
//             E4M3 bytes; affine: q_p1's dtype)
//   q_extra   NF4 with double quant: the nested F32 absmax; affine: the biases
//   q_table   NF4: the 16-entry code map, then the 256-entry nested map;
//             NVFP4: per slice its first row (an int's bits) and global scale
//   q_cols    the columns of the weight viewed as a matrix
//   q_block   elements per scale
//   q_p0      NF4: 1 with double quant; affine: the code bits (4 or 8)
//   q_p1      NF4: the nested block; NVFP4: the slice count; affine: the
//             scales' dtype (0 F32, 1 BF16, 2 F16)
//   q_f0      NF4: the nested offset
// Unused parameters are never read.

// An E4M3FN byte as fp32 (docs/formats.md §3.3: bias 7, subnormals, no
// infinity, 0x7f/0xff NaN), built from its bits: exact, like core/dtype.h's
// f8_e4m3_to_f32.
float e4m3_to_f32(uchar v) {
  const uint sign = (uint)(v >> 7), exp = (uint)((v >> 3) & 0xF), man = (uint)(v & 7);
  if (exp == 0xF && man == 7) return NAN;
  const float r = exp == 0 ? (float)man * 0x1.0p-9f : as_float(((exp + 120u) << 23) | (man << 20));
  return sign ? -r : r;
}

// A float scale stored as F32, BF16 or F16 (dtype 0, 1, 2), element i.
float qscale_at(__global const uchar* p, size_t i, int dtype) {
  if (dtype == 1) return as_float(((uint)((__global const ushort*)p)[i]) << 16);
  if (dtype == 2) return vload_half(i, (__global const half*)p);
  return ((__global const float*)p)[i];
}

// NF4 (docs/formats.md §2.2-§2.4): blocks over the flattened tensor, element
// 2k in the high nibble of byte k; code_map[nibble] · absmax, the absmax
// decoded as nested_map[code] · nested_absmax + offset with double quant.
float qload_nf4(QPARAMS, int r, int c) {
  const size_t i = (size_t)r * (size_t)q_cols + (size_t)c;
  const uchar byte = q_codes[i / 2];
  const int nib = (i % 2 == 0) ? (byte >> 4) : (byte & 0xF);
  const size_t b = i / (size_t)q_block;
  float scale;
  if (q_p0) {
    const float nested = ((__global const float*)q_extra)[b / (size_t)q_p1];
    scale = q_table[16 + q_scales[b]] * nested + q_f0;
  } else {
    scale = ((__global const float*)q_scales)[b];
  }
  return q_table[nib] * scale;
}

// The E2M1 values of NVFP4's codes (docs/formats.md §3.3).
__constant float kE2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// NVFP4 (docs/formats.md §3.3): (E2M1[nibble] · e4m3(scale)) · global scale,
// column 2k in the low nibble; the global scale is its slice's.
float qload_nvfp4(QPARAMS, int r, int c) {
  int lo = 0, hi = q_p1 - 1;  // the last slice whose first row is <= r
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (as_int(q_table[2 * mid]) <= r) lo = mid; else hi = mid - 1;
  }
  const size_t row = (size_t)r;
  const uchar byte = q_codes[row * (size_t)(q_cols / 2) + (size_t)(c / 2)];
  const int nib = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
  const float scale = e4m3_to_f32(q_scales[row * (size_t)(q_cols / q_block) + (size_t)(c / q_block)]);
  return (kE2m1[nib] * scale) * q_table[2 * lo + 1];
}

// MLX affine (docs/formats.md §4.2): fma(scale, q, bias) per group, 4-bit
// column 2k in the low nibble.
float qload_affine(QPARAMS, int r, int c) {
  const size_t row = (size_t)r;
  int q;
  if (q_p0 == 4) {
    const uchar byte = q_codes[row * (size_t)(q_cols / 2) + (size_t)(c / 2)];
    q = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
  } else {
    q = q_codes[row * (size_t)q_cols + (size_t)c];
  }
  const size_t g = row * (size_t)(q_cols / q_block) + (size_t)(c / q_block);
  return fma(qscale_at(q_scales, g, q_p1), (float)q, qscale_at(q_extra, g, q_p1));
}

// dgemma's int8 (docs/formats.md §8.2): scale · q.
float qload_int8(QPARAMS, int r, int c) {
  const size_t row = (size_t)r;
  const int q = (int)as_char(q_codes[row * (size_t)q_cols + (size_t)c]);
  return ((__global const float*)q_scales)[row * (size_t)(q_cols / q_block) + (size_t)(c / q_block)] * (float)q;
}

// dgemma's FP8 (docs/formats.md §8.2): scale · e4m3(q).
float qload_fp8(QPARAMS, int r, int c) {
  const size_t row = (size_t)r;
  const float q = e4m3_to_f32(q_codes[row * (size_t)q_cols + (size_t)c]);
  return ((__global const float*)q_scales)[row * (size_t)(q_cols / q_block) + (size_t)(c / q_block)] * q;
}
