#pragma once
// Builds GGUF key/value lists in memory, each value encoded as a GGUF file
// stores it (little-endian scalars; strings as a u64 length and the bytes;
// arrays as their elements back to back), so that configuration code can be
// tested without a file.
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"

namespace dgemma::test {

class GgufKvBuilder {
 public:
  GgufKvBuilder& u32(std::string key, uint32_t v) { return scalar(std::move(key), GgufValueType::kU32, &v, 4); }
  GgufKvBuilder& i32(std::string key, int32_t v) { return scalar(std::move(key), GgufValueType::kI32, &v, 4); }
  GgufKvBuilder& f32(std::string key, float v) { return scalar(std::move(key), GgufValueType::kF32, &v, 4); }
  GgufKvBuilder& boolean(std::string key, bool v) {
    const uint8_t b = v ? 1 : 0;
    return scalar(std::move(key), GgufValueType::kBool, &b, 1);
  }
  GgufKvBuilder& str(std::string key, std::string_view v) {
    return add(std::move(key), GgufValueType::kString, GgufValueType::kU8, 1, encode_string(v));
  }
  GgufKvBuilder& i32s(std::string key, const std::vector<int32_t>& v) {
    return add(std::move(key), GgufValueType::kArray, GgufValueType::kI32, v.size(),
               std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  }
  GgufKvBuilder& f32s(std::string key, const std::vector<float>& v) {
    return add(std::move(key), GgufValueType::kArray, GgufValueType::kF32, v.size(),
               std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  }
  GgufKvBuilder& bools(std::string key, const std::vector<bool>& v) {
    std::string bytes;
    for (bool b : v) bytes += char(b ? 1 : 0);
    return add(std::move(key), GgufValueType::kArray, GgufValueType::kBool, v.size(), std::move(bytes));
  }
  GgufKvBuilder& strs(std::string key, const std::vector<std::string>& v) {
    std::string bytes;
    for (const std::string& s : v) bytes += encode_string(s);
    return add(std::move(key), GgufValueType::kArray, GgufValueType::kString, v.size(), std::move(bytes));
  }
  // Removes a key (to test its absence).
  GgufKvBuilder& erase(std::string_view key) {
    for (size_t i = 0; i < kvs_.size(); ++i)
      if (kvs_[i].key == key) kvs_.erase(kvs_.begin() + std::ptrdiff_t(i));
    return *this;
  }
  const std::vector<GgufKv>& kvs() const { return kvs_; }

 private:
  static std::string encode_string(std::string_view s) {
    const uint64_t n = s.size();
    std::string bytes(reinterpret_cast<const char*>(&n), 8);
    bytes += s;
    return bytes;
  }
  GgufKvBuilder& scalar(std::string key, GgufValueType t, const void* p, size_t n) {
    return add(std::move(key), t, GgufValueType::kU8, 1, std::string(static_cast<const char*>(p), n));
  }
  GgufKvBuilder& add(std::string key, GgufValueType t, GgufValueType elem, uint64_t count, std::string bytes) {
    erase(key);
    storage_.push_back(std::move(bytes));
    GgufKv kv;
    kv.key = std::move(key);
    kv.type = t;
    kv.elem_type = elem;
    kv.count = count;
    kv.data = reinterpret_cast<const uint8_t*>(storage_.back().data());
    kv.nbytes = storage_.back().size();
    kvs_.push_back(std::move(kv));
    return *this;
  }
  std::deque<std::string> storage_;  // stable addresses for the views
  std::vector<GgufKv> kvs_;
};

}  // namespace dgemma::test
