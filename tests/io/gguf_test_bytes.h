#pragma once
// Test-local GGUF bytes (docs/formats.md §5.1): a builder that lays files out
// field by field, so that any field can be made wrong, and a minimal walker
// of the tensor descriptors for checking what the writer produced. Neither
// uses the reader or the writer under test.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dgemma::test {

// GGUF value type ids and ggml type ids as the format defines them.
namespace gguf_id {
inline constexpr uint32_t kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8,
                          kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12;
inline constexpr uint32_t kTypeF32 = 0, kTypeF16 = 1, kTypeQ4_0 = 2, kTypeQ8_0 = 8, kTypeQ4_K = 12, kTypeQ6_K = 14,
                          kTypeBF16 = 30;
}  // namespace gguf_id

// Bytes per block and elements per block of the ggml types the tests use,
// written out from the format's block structs (not from core/ggml_types.h).
struct TestBlock {
  uint32_t id;
  uint64_t elems, bytes;
};
inline constexpr TestBlock kTestBlocks[] = {
    {0, 1, 4}, {1, 1, 2}, {2, 32, 18}, {8, 32, 34}, {12, 256, 144}, {14, 256, 210}, {30, 1, 2},
};
inline uint64_t test_tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne) {
  for (const TestBlock& b : kTestBlocks) {
    if (b.id != type) continue;
    uint64_t rows = 1;
    for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
    return ne[0] / b.elems * b.bytes * rows;
  }
  throw std::runtime_error("test_tensor_bytes: type not in the test table");
}

class GgufBytes {
 public:
  std::string bytes;

  GgufBytes& raw(std::string_view s) {
    bytes.append(s);
    return *this;
  }
  GgufBytes& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(char(uint8_t(v >> (8 * i))));
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return le(v, 1); }
  GgufBytes& u16(uint16_t v) { return le(v, 2); }
  GgufBytes& u32(uint32_t v) { return le(v, 4); }
  GgufBytes& i32(int32_t v) { return le(uint32_t(v), 4); }
  GgufBytes& u64(uint64_t v) { return le(v, 8); }
  GgufBytes& f32(float f) {
    uint32_t b = 0;
    std::memcpy(&b, &f, 4);
    return u32(b);
  }
  GgufBytes& f64(double d) {
    uint64_t b = 0;
    std::memcpy(&b, &d, 8);
    return u64(b);
  }
  // A gguf_string: u64 length, then the bytes.
  GgufBytes& str(std::string_view s) { return u64(s.size()).raw(s); }

  // Magic, version and the two counts.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }

  // Keys: name, type id, value.
  GgufBytes& kv_head(std::string_view key, uint32_t type) { return str(key).u32(type); }
  GgufBytes& kv_u8(std::string_view key, uint8_t v) { return kv_head(key, gguf_id::kU8).u8(v); }
  GgufBytes& kv_u16(std::string_view key, uint16_t v) { return kv_head(key, gguf_id::kU16).u16(v); }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return kv_head(key, gguf_id::kU32).u32(v); }
  GgufBytes& kv_i32(std::string_view key, int32_t v) { return kv_head(key, gguf_id::kI32).i32(v); }
  GgufBytes& kv_u64(std::string_view key, uint64_t v) { return kv_head(key, gguf_id::kU64).u64(v); }
  GgufBytes& kv_i64(std::string_view key, int64_t v) { return kv_head(key, gguf_id::kI64).u64(uint64_t(v)); }
  GgufBytes& kv_f32(std::string_view key, float v) { return kv_head(key, gguf_id::kF32).f32(v); }
  GgufBytes& kv_f64(std::string_view key, double v) { return kv_head(key, gguf_id::kF64).f64(v); }
  GgufBytes& kv_bool(std::string_view key, bool v) { return kv_head(key, gguf_id::kBool).u8(v ? 1 : 0); }
  GgufBytes& kv_string(std::string_view key, std::string_view v) { return kv_head(key, gguf_id::kString).str(v); }
  // An array's head: element type and count; the elements follow.
  GgufBytes& kv_array(std::string_view key, uint32_t elem_type, uint64_t count) {
    return kv_head(key, gguf_id::kArray).u32(elem_type).u64(count);
  }
  GgufBytes& kv_i32s(std::string_view key, const std::vector<int32_t>& v) {
    kv_array(key, gguf_id::kI32, v.size());
    for (int32_t x : v) i32(x);
    return *this;
  }
  GgufBytes& kv_f32s(std::string_view key, const std::vector<float>& v) {
    kv_array(key, gguf_id::kF32, v.size());
    for (float x : v) f32(x);
    return *this;
  }
  GgufBytes& kv_bools(std::string_view key, const std::vector<bool>& v) {
    kv_array(key, gguf_id::kBool, v.size());
    for (bool x : v) u8(x ? 1 : 0);
    return *this;
  }
  GgufBytes& kv_strings(std::string_view key, const std::vector<std::string>& v) {
    kv_array(key, gguf_id::kString, v.size());
    for (const auto& s : v) str(s);
    return *this;
  }

  // A tensor descriptor: name, n_dims, ne (innermost first), type, offset.
  GgufBytes& tensor(std::string_view name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).u32(uint32_t(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }

  GgufBytes& zeros(uint64_t n) {
    bytes.append(size_t(n), '\0');
    return *this;
  }
  // Zero bytes up to the next multiple of `alignment`.
  GgufBytes& pad(uint64_t alignment = 32) { return zeros((alignment - bytes.size() % alignment) % alignment); }
  // n bytes of a position-dependent pattern starting at `seed`.
  GgufBytes& pattern(uint64_t n, uint8_t seed) {
    for (uint64_t i = 0; i < n; ++i) bytes.push_back(char(uint8_t(seed + i * 7)));
    return *this;
  }
  size_t size() const { return bytes.size(); }
};

// A small valid file: six keys of several types, three tensors packed in
// declaration order (a f32 [4, 2], b q8_0 [32, 2], c f16 [3]) with patterned
// data. The offsets are worked out by hand: a is 32 bytes at 0, b is 68
// bytes at 32 (padded to 96), c is 6 bytes at 128.
inline GgufBytes valid_gguf() {
  GgufBytes b;
  b.header(3, 6)
      .kv_string("general.architecture", "toy")
      .kv_u32("toy.block_count", 2)
      .kv_f32("toy.rope.freq_base", 10000.0f)
      .kv_i32s("toy.head_count_kv", {8, 2})
      .kv_bools("toy.pattern", {true, false, true})
      .kv_strings("tokenizer.ggml.tokens", {"<pad>", "a", ""});
  b.tensor("a", {4, 2}, gguf_id::kTypeF32, 0)
      .tensor("b", {32, 2}, gguf_id::kTypeQ8_0, 32)
      .tensor("c", {3}, gguf_id::kTypeF16, 128);
  b.pad();
  b.pattern(32, 1);            // a
  b.pattern(68, 2).zeros(28);  // b, padded to 96
  b.pattern(6, 3);             // c
  return b;
}

// What a walk over the descriptors finds (for checking the writer's layout).
struct WalkedTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
};
struct WalkedFile {
  uint32_t version = 0;
  uint64_t n_kv = 0;
  std::vector<std::string> keys;
  std::vector<WalkedTensor> tensors;
  uint64_t infos_end = 0;  // the byte after the last descriptor
};

// Walks a well-formed image (throws std::runtime_error on anything odd).
inline WalkedFile walk_gguf(const std::string& image) {
  size_t pos = 0;
  auto take = [&](size_t n) {
    if (n > image.size() - pos) throw std::runtime_error("walk_gguf: truncated");
    const size_t at = pos;
    pos += n;
    return at;
  };
  auto rd = [&](int n) {
    const size_t at = take(size_t(n));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | uint8_t(image[at + size_t(i)]);
    return v;
  };
  auto rd_str = [&] {
    const uint64_t n = rd(8);
    return image.substr(take(size_t(n)), size_t(n));
  };
  auto scalar_size = [](uint64_t t) -> int {
    switch (t) {
      case gguf_id::kU8:
      case gguf_id::kI8:
      case gguf_id::kBool: return 1;
      case gguf_id::kU16:
      case gguf_id::kI16: return 2;
      case gguf_id::kU32:
      case gguf_id::kI32:
      case gguf_id::kF32: return 4;
      case gguf_id::kU64:
      case gguf_id::kI64:
      case gguf_id::kF64: return 8;
    }
    throw std::runtime_error("walk_gguf: bad value type");
  };
  WalkedFile f;
  if (image.compare(0, 4, "GGUF") != 0) throw std::runtime_error("walk_gguf: no magic");
  take(4);
  f.version = uint32_t(rd(4));
  const uint64_t n_tensors = rd(8);
  f.n_kv = rd(8);
  for (uint64_t i = 0; i < f.n_kv; ++i) {
    f.keys.push_back(rd_str());
    uint64_t type = rd(4);
    uint64_t count = 1;
    if (type == gguf_id::kArray) {
      type = rd(4);
      count = rd(8);
    }
    for (uint64_t j = 0; j < count; ++j) {
      if (type == gguf_id::kString)
        rd_str();
      else
        take(size_t(scalar_size(type)));
    }
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    WalkedTensor t;
    t.name = rd_str();
    const uint64_t n_dims = rd(4);
    for (uint64_t d = 0; d < n_dims; ++d) t.ne.push_back(rd(8));
    t.type = uint32_t(rd(4));
    t.offset = rd(8);
    f.tensors.push_back(std::move(t));
  }
  f.infos_end = pos;
  return f;
}

}  // namespace dgemma::test
