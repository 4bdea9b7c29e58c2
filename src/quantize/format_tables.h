#pragma once
// Code books and small scalar encoders shared by the quantized-weight readers,
// writers and kernels.
#include <cstdint>

namespace dgemma::quant {

// bitsandbytes NF4 code book, index = 4-bit code (docs/formats.md §2.2 table,
// bitsandbytes get_4bit_type("nf4")).
inline constexpr float kNf4Values[16] = {-1.0f,
                                         -0.6961928009986877f,
                                         -0.5250730514526367f,
                                         -0.39491748809814453f,
                                         -0.28444138169288635f,
                                         -0.18477343022823334f,
                                         -0.09105003625154495f,
                                         0.0f,
                                         0.07958029955625534f,
                                         0.16093020141124725f,
                                         0.24611230194568634f,
                                         0.33791524171829224f,
                                         0.44070982933044434f,
                                         0.5626170039176941f,
                                         0.7229568362236023f,
                                         1.0f};

// E2M1 (FP4) values, index = 4-bit code: bit 3 sign, bits 0-2 magnitude
// index (docs/formats.md §3.3; code 8 is -0).
inline constexpr float kE2m1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// All 256 E4M3FN byte values as fp32 (docs/formats.md §3.3: bias 7, no infinity,
// 0x7f/0xff NaN, max 448).
const float* e4m3_table();

// fp32 -> E4M3FN, round to nearest even, saturating to ±448 (NaN -> 0x7f).
uint8_t f32_to_e4m3(float v);

// Nearest code of a 16-entry ascending code book (NF4) to v (ties to the
// lower code).
uint8_t nearest_code16(const float* book, float v);
// Nearest E2M1 code to v (sign kept; ties to the even magnitude index, i.e.
// round half to even in the E2M1 grid).
uint8_t nearest_e2m1(float v);

// bitsandbytes' signed 8-bit "dynamic" code book (create_dynamic_map(signed=
// True, max_exponent_bits=7, total_bits=8)), ascending; used as the
// nested_quant_map when we write double-quantized NF4 (docs/formats.md §2.3).
const float* bnb_dynamic_map();
// Nearest code of an ascending 256-entry code book to v.
uint8_t nearest_code256(const float* book, float v);

}  // namespace dgemma::quant
