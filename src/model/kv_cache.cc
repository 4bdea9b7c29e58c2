#include "model/kv_cache.h"

#include <cstring>

namespace dgemma {

void LayerCache::reset(int kv_heads_in, int head_dim_in, int64_t retain_in) {
  kv_heads = kv_heads_in;
  head_dim = head_dim_in;
  retain = retain_in;
  keys = Tensor::f32({0, kv_heads, head_dim});
  values = Tensor::f32({0, kv_heads, head_dim});
  positions = Tensor::i32({0});
}

void LayerCache::truncate(int64_t length) {
  positions.ensure_host();
  int64_t keep = 0;
  while (keep < size() && positions.i[size_t(keep)] < length) ++keep;
  if (keep == size()) return;
  keys.ensure_host();
  values.ensure_host();
  keys.resize({keep, kv_heads, head_dim});
  values.resize({keep, kv_heads, head_dim});
  positions.resize({keep});
  keys.host_written();
  values.host_written();
  positions.host_written();
}

uint64_t KvCache::bytes() const {
  uint64_t b = 0;
  for (const auto& l : layers) b += uint64_t(l.keys.numel() + l.values.numel()) * sizeof(float);
  return b;
}

}  // namespace dgemma
