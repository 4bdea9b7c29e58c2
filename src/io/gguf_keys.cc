// Typed access to the keys of a parsed GGUF header (docs/formats.md §5.1).
// Values are decoded from the file's little-endian bytes on each call; the
// parser has already checked that every value lies inside the file.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "dgemma/error.h"
#include "io/gguf.h"

namespace dgemma {
namespace {

uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kU16:
    case GgufValueType::kI16:
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kU64:
    case GgufValueType::kI64: return true;
    default: return false;
  }
}

bool is_float_type(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }

// The value of type `t` at `p` as a 64-bit signed integer; false when an
// unsigned 64-bit value does not fit.
bool load_integer(GgufValueType t, const uint8_t* p, int64_t* out) {
  const uint64_t raw = load_le(p, int(gguf_scalar_bytes(t)));
  switch (t) {
    case GgufValueType::kI8: *out = raw < 0x80 ? int64_t(raw) : int64_t(raw) - 256; return true;
    case GgufValueType::kI16: *out = int16_t(uint16_t(raw)); return true;
    case GgufValueType::kI32: *out = int32_t(uint32_t(raw)); return true;
    case GgufValueType::kI64: *out = int64_t(raw); return true;
    case GgufValueType::kU64:
      if (raw > uint64_t(std::numeric_limits<int64_t>::max())) return false;
      *out = int64_t(raw);
      return true;
    default: *out = int64_t(raw); return true;  // u8, u16, u32
  }
}

double load_float(GgufValueType t, const uint8_t* p) {
  if (t == GgufValueType::kF32) {
    const auto bits = uint32_t(load_le(p, 4));
    float f = 0;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const uint64_t bits = load_le(p, 8);
  double d = 0;
  std::memcpy(&d, &bits, 8);
  return d;
}

std::string_view load_string(const uint8_t* p) {
  return std::string_view(reinterpret_cast<const char*>(p + 8), size_t(load_le(p, 8)));
}

std::string type_desc(const GgufKv& kv) {
  if (kv.type == GgufValueType::kArray)
    return "an array of " + std::to_string(kv.count) + " " + std::string(gguf_value_type_name(kv.elem_type));
  return std::string(gguf_value_type_name(kv.type));
}

}  // namespace

GgufKeys::GgufKeys(const std::vector<GgufKv>* kvs, std::string source) : kvs_(kvs), source_(std::move(source)) {
  for (size_t i = 0; i < kvs_->size(); ++i) index_.emplace((*kvs_)[i].key, i);
}

const GgufKv* GgufKeys::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &(*kvs_)[it->second];
}

namespace {

// The key, or an error naming the file and the key.
const GgufKv& need(const GgufKeys& keys, std::string_view key) {
  const GgufKv* kv = keys.find(key);
  if (!kv) throw Error(keys.source() + ": key " + gguf_quoted(key) + " is missing");
  return *kv;
}

[[noreturn]] void wrong_type(const GgufKeys& keys, const GgufKv& kv, const std::string& expected) {
  throw Error(keys.source() + ": key " + gguf_quoted(kv.key) + ": holds " + type_desc(kv) + ", expected " + expected);
}

}  // namespace

int64_t GgufKeys::integer(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (!is_integer_type(kv.type)) wrong_type(*this, kv, "an integer");
  int64_t v = 0;
  if (!load_integer(kv.type, kv.data, &v))
    throw Error(source_ + ": key " + gguf_quoted(kv.key) + ": value " + std::to_string(load_le(kv.data, 8)) +
                " does not fit a signed 64-bit integer");
  return v;
}

double GgufKeys::number(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (is_float_type(kv.type)) return load_float(kv.type, kv.data);
  if (is_integer_type(kv.type)) {
    if (kv.type == GgufValueType::kU64) return double(load_le(kv.data, 8));
    int64_t v = 0;
    load_integer(kv.type, kv.data, &v);
    return double(v);
  }
  wrong_type(*this, kv, "a number");
}

bool GgufKeys::boolean(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (kv.type != GgufValueType::kBool) wrong_type(*this, kv, "bool");
  return kv.data[0] != 0;
}

std::string_view GgufKeys::string(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (kv.type != GgufValueType::kString) wrong_type(*this, kv, "string");
  return load_string(kv.data);
}

std::vector<int64_t> GgufKeys::integers(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (kv.type != GgufValueType::kArray || !is_integer_type(kv.elem_type)) wrong_type(*this, kv, "an array of integers");
  const int step = int(gguf_scalar_bytes(kv.elem_type));
  std::vector<int64_t> out(size_t(kv.count));
  for (uint64_t i = 0; i < kv.count; ++i) {
    if (!load_integer(kv.elem_type, kv.data + i * uint64_t(step), &out[size_t(i)]))
      throw Error(source_ + ": key " + gguf_quoted(kv.key) + ": element " + std::to_string(i) +
                  " does not fit a signed 64-bit integer");
  }
  return out;
}

std::vector<float> GgufKeys::floats(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (kv.type != GgufValueType::kArray || !is_float_type(kv.elem_type)) wrong_type(*this, kv, "an array of floats");
  const int step = int(gguf_scalar_bytes(kv.elem_type));
  std::vector<float> out(size_t(kv.count));
  for (uint64_t i = 0; i < kv.count; ++i)
    out[size_t(i)] = float(load_float(kv.elem_type, kv.data + i * uint64_t(step)));
  return out;
}

std::vector<bool> GgufKeys::booleans(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (kv.type != GgufValueType::kArray || kv.elem_type != GgufValueType::kBool)
    wrong_type(*this, kv, "an array of bool");
  std::vector<bool> out(size_t(kv.count));
  for (uint64_t i = 0; i < kv.count; ++i) out[size_t(i)] = kv.data[i] != 0;
  return out;
}

std::vector<std::string_view> GgufKeys::strings(std::string_view key) const {
  const GgufKv& kv = need(*this, key);
  if (kv.type != GgufValueType::kArray || kv.elem_type != GgufValueType::kString)
    wrong_type(*this, kv, "an array of strings");
  std::vector<std::string_view> out;
  out.reserve(size_t(kv.count));
  const uint8_t* p = kv.data;
  for (uint64_t i = 0; i < kv.count; ++i) {
    out.push_back(load_string(p));
    p += 8 + out.back().size();
  }
  return out;
}

}  // namespace dgemma
