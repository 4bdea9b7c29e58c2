#include "ops/sampling_filters.h"

#include <algorithm>
#include <vector>

namespace dgemma {
namespace {

struct Ranked {
  float w;
  int32_t id;
};

// Rank order: heavier first, ties by lower index (a strict total order, so
// every partial selection below agrees with one full sort).
bool ranks_before(const Ranked& a, const Ranked& b) { return a.w > b.w || (a.w == b.w && a.id < b.id); }

double kept_sum(const float* w, size_t n) {
  double sum = 0.0;
  for (size_t v = 0; v < n; ++v) sum += double(w[v]);
  return sum;
}

// top_p over the `ranked` survivors: sorts a growing ranked prefix (a
// selection of the next chunk, then a sort of it) until the cumulative weight
// reaches the target, so a peaked row sorts only a few tokens.
void keep_top_p(float* w, size_t n, std::vector<Ranked>& ranked, double top_p) {
  const double target = top_p * kept_sum(w, n);
  const size_t kept = ranked.size();
  double cumulative = 0.0;
  size_t sorted = 0, chunk = 64, cut = kept;
  while (sorted < kept && cut == kept) {
    const size_t end = std::min(kept, sorted + chunk);
    if (end < kept) std::nth_element(ranked.begin() + sorted, ranked.begin() + end, ranked.end(), ranks_before);
    std::sort(ranked.begin() + sorted, ranked.begin() + end, ranks_before);
    for (size_t i = sorted; i < end; ++i) {
      cumulative += double(ranked[i].w);
      if (cumulative >= target) {
        cut = i + 1;
        break;
      }
    }
    sorted = end;
    chunk *= 4;
  }
  for (size_t i = cut; i < kept; ++i) w[ranked[i].id] = 0.0f;
}

}  // namespace

double filter_weights(float* w, size_t n, const SamplingFilters& filters) {
  if (filters.top_k > 0 || filters.top_p < 1.0) {
    thread_local std::vector<Ranked> ranked;
    ranked.clear();
    for (size_t v = 0; v < n; ++v)
      if (w[v] > 0.0f) ranked.push_back({w[v], int32_t(v)});
    if (filters.top_k > 0 && size_t(filters.top_k) < ranked.size()) {
      const auto k = ranked.begin() + filters.top_k;
      std::nth_element(ranked.begin(), k, ranked.end(), ranks_before);
      for (auto it = k; it != ranked.end(); ++it) w[it->id] = 0.0f;
      ranked.erase(k, ranked.end());
    }
    if (filters.top_p < 1.0) keep_top_p(w, n, ranked, filters.top_p);
  }
  if (filters.min_p > 0.0)
    for (size_t v = 0; v < n; ++v)
      if (w[v] > 0.0f && double(w[v]) < filters.min_p) w[v] = 0.0f;
  return kept_sum(w, n);
}

}  // namespace dgemma
