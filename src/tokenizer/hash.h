#pragma once
// Small, fast hashing for the tokenizer's open-addressing tables. Quality only
// needs to be good enough for short vocabulary pieces and id pairs.
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dgemma::tok {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0x9fb21c651e98df25ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);  // n < 8
  h = (h ^ w) * 0x9fb21c651e98df25ull;
  return mix64(h);
}

}  // namespace dgemma::tok
