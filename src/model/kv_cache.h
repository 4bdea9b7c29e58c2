#pragma once
// Per-layer key/value cache of committed positions (docs/model.md §2.2). Keys are
// stored after k_norm + RoPE, values after v_norm, as tensors [S, Hkv, d]
// with their positions [S] (I32). Sliding layers retain only the last
// `retain` positions (W-1 in the reference, docs/model.md §2.4); full layers retain
// everything. The model grows the cache with concat_rows ops (ops/op.h), so
// on a device backend the cache lives in device memory (Tensor::device).
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace dgemma {

struct LayerCache {
  int kv_heads = 0;
  int head_dim = 0;
  int64_t retain = 0;  // 0: unbounded
  Tensor keys, values, positions;

  // An empty cache of this layout.
  void reset(int kv_heads, int head_dim, int64_t retain);
  int64_t size() const { return positions.shape.empty() ? 0 : positions.dim(0); }
  int64_t row_floats() const { return int64_t(kv_heads) * head_dim; }
  // Rows to drop from the front when n rows are appended (sliding eviction).
  int64_t evicted_by(int64_t n) const { return retain > 0 ? std::max<int64_t>(0, size() + n - retain) : 0; }
  // Drops rows with position >= length (on the host).
  void truncate(int64_t length);
};

struct KvCache {
  std::vector<LayerCache> layers;
  int64_t length = 0;  // committed positions so far
  uint64_t bytes() const;
};

}  // namespace dgemma
