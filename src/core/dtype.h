#pragma once
// Element types of checkpoint tensors (docs/formats.md §1.2) and the scalar
// conversions the engine needs. Sub-byte and exotic fp8 variants are listed so
// that a header naming them parses; they are rejected where data is consumed.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace dgemma {

enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kU64,
  kI64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kC64,
  kF8_E4M3,
  kF8_E5M2,
  kF8_E8M0,
  kF8_E4M3FNUZ,
  kF8_E5M2FNUZ,
  kF4,
  kF6_E2M3,
  kF6_E3M2,
};

// The safetensors spelling ("BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// Size in bits of one element (4 for F4, 6 for F6_*).
int dtype_bits(DType t);
bool dtype_is_float(DType t);

// ---- scalar conversions ----------------------------------------------------
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round-to-nearest-even, NaN kept quiet (matches torch's .to(bfloat16)).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f8_e4m3_to_f32(uint8_t v);  // OCP e4m3fn: no Inf, 0x7f/0xff are NaN, max 448
float f8_e5m2_to_f32(uint8_t v);

// Reads element i of a buffer of the given float dtype as float. Throws for
// non-float dtypes.
float load_as_f32(DType t, const void* data, size_t i);

}  // namespace dgemma
