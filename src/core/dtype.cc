#include "core/dtype.h"

#include <cmath>
#include <string>

#include "dgemma/error.h"

namespace dgemma {
namespace {
struct Entry {
  DType type;
  std::string_view name;
  int bits;
  bool is_float;
};
constexpr Entry kTable[] = {
    {DType::kBool, "BOOL", 8, false},
    {DType::kU8, "U8", 8, false},
    {DType::kI8, "I8", 8, false},
    {DType::kU16, "U16", 16, false},
    {DType::kI16, "I16", 16, false},
    {DType::kU32, "U32", 32, false},
    {DType::kI32, "I32", 32, false},
    {DType::kU64, "U64", 64, false},
    {DType::kI64, "I64", 64, false},
    {DType::kF16, "F16", 16, true},
    {DType::kBF16, "BF16", 16, true},
    {DType::kF32, "F32", 32, true},
    {DType::kF64, "F64", 64, true},
    {DType::kC64, "C64", 64, false},
    {DType::kF8_E4M3, "F8_E4M3", 8, true},
    {DType::kF8_E5M2, "F8_E5M2", 8, true},
    {DType::kF8_E8M0, "F8_E8M0", 8, false},
    {DType::kF8_E4M3FNUZ, "F8_E4M3FNUZ", 8, false},
    {DType::kF8_E5M2FNUZ, "F8_E5M2FNUZ", 8, false},
    {DType::kF4, "F4", 4, false},
    {DType::kF6_E2M3, "F6_E2M3", 6, false},
    {DType::kF6_E3M2, "F6_E3M2", 6, false},
};
const Entry& entry(DType t) {
  for (const auto& e : kTable)
    if (e.type == t) return e;
  throw Error("internal: unknown dtype enum value " + std::to_string(int(t)));
}
}  // namespace

std::string_view dtype_name(DType t) { return entry(t).name; }
int dtype_bits(DType t) { return entry(t).bits; }
bool dtype_is_float(DType t) { return entry(t).is_float; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& e : kTable)
    if (e.name == name) return e.type;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400) == 0);
      u = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return uint16_t(sign | 0x7e00);   // NaN
  if (a >= 0x477ff000) return uint16_t(sign | 0x7c00);  // overflow -> Inf (after rounding)
  if (a < 0x38800000) {                                 // subnormal or zero in f16
    float af;
    std::memcpy(&af, &a, 4);
    // 2^-24 is the f16 subnormal unit; nearbyint gives round-to-nearest-even.
    return uint16_t(sign | uint32_t(std::nearbyint(af * 16777216.0f)));
  }
  uint32_t r = a + 0xfff + ((a >> 13) & 1);  // RNE on the 13 dropped bits
  return uint16_t(sign | ((r - 0x38000000) >> 13));
}

float f8_e4m3_to_f32(uint8_t v) {
  uint32_t sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 7;
  if (exp == 0xf && man == 7) return std::nanf("");
  float r = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(float(8 + man), int(exp) - 10);
  return sign ? -r : r;
}

float f8_e5m2_to_f32(uint8_t v) { return f16_to_f32(uint16_t(v) << 8); }

float load_as_f32(DType t, const void* data, size_t i) {
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, static_cast<const char*>(data) + 4 * i, 4);
      return f;
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(data) + 2 * i, 2);
      return bf16_to_f32(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(data) + 2 * i, 2);
      return f16_to_f32(h);
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, static_cast<const char*>(data) + 8 * i, 8);
      return float(d);
    }
    case DType::kF8_E4M3: return f8_e4m3_to_f32(static_cast<const uint8_t*>(data)[i]);
    case DType::kF8_E5M2: return f8_e5m2_to_f32(static_cast<const uint8_t*>(data)[i]);
    default: throw Error("cannot read dtype " + std::string(dtype_name(t)) + " as a float");
  }
}

}  // namespace dgemma
