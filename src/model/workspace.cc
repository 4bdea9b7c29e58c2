#include "model/workspace.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace dgemma {

Tensor& Workspace::slot(std::string_view site) {
  auto it = slots_.find(site);
  if (it == slots_.end()) it = slots_.emplace(std::string(site), Tensor{}).first;
  Tensor& t = it->second;
#ifndef NDEBUG
  std::fill(t.f.begin(), t.f.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(t.i.begin(), t.i.end(), std::numeric_limits<int32_t>::min());
#endif
  return t;
}

size_t Workspace::bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : slots_) n += t.f.capacity() * sizeof(float) + t.i.capacity() * sizeof(int32_t);
  return n;
}

}  // namespace dgemma
