#include "model/kv_cache.h"

#include <cstddef>

namespace dgemma {

void LayerCache::append(const float* k, const float* v, const int32_t* pos, int64_t n) {
  const int64_t rf = row_floats();
  keys.insert(keys.end(), k, k + n * rf);
  values.insert(values.end(), v, v + n * rf);
  positions.insert(positions.end(), pos, pos + n);
  if (retain > 0 && size() > retain) {
    const int64_t drop = size() - retain;
    keys.erase(keys.begin(), keys.begin() + drop * rf);
    values.erase(values.begin(), values.begin() + drop * rf);
    positions.erase(positions.begin(), positions.begin() + drop);
  }
}

void LayerCache::truncate(int64_t length) {
  int64_t keep = 0;
  while (keep < size() && positions[size_t(keep)] < length) ++keep;
  keys.resize(size_t(keep * row_floats()));
  values.resize(size_t(keep * row_floats()));
  positions.resize(size_t(keep));
}

uint64_t KvCache::bytes() const {
  uint64_t b = 0;
  for (const auto& l : layers) b += (l.keys.size() + l.values.size()) * sizeof(float);
  return b;
}

}  // namespace dgemma
