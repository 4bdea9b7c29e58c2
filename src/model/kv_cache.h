#pragma once
// Per-layer key/value cache of committed positions (spec §2.2). Keys are
// stored after k_norm + RoPE, values after v_norm, row layout [S, Hkv, d].
// Sliding layers retain only the last `retain` positions (W-1 in the
// reference, spec §2.4); full layers retain everything.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dgemma {

struct LayerCache {
  int kv_heads = 0;
  int head_dim = 0;
  int64_t retain = 0;  // 0: unbounded
  std::vector<float> keys, values;
  std::vector<int32_t> positions;

  int64_t size() const { return int64_t(positions.size()); }
  int64_t row_floats() const { return int64_t(kv_heads) * head_dim; }
  // Appends n rows and then drops the oldest beyond `retain`.
  void append(const float* k, const float* v, const int32_t* pos, int64_t n);
  // Drops rows with position >= length.
  void truncate(int64_t length);
};

struct KvCache {
  std::vector<LayerCache> layers;
  int64_t length = 0;  // committed positions so far
  uint64_t bytes() const;
};

}  // namespace dgemma
