#pragma once
// The filters of draw B (docs/model.md §3.7): top_k, top_p and min_p restrict
// the tokens a position may be drawn from, then the draw is the inverse CDF
// over what is left. They act on the weights w = exp(z - max z) of one row of
// processed logits (the most likely token has w = 1 exactly), never on z
// itself: the argmax, the entropy and the self-conditioning input stay those
// of the unfiltered distribution.
#include <cstddef>
#include <cstdint>

namespace dgemma {

struct SamplingFilters {
  int64_t top_k = 0;   // keep the k most likely tokens; 0 = off
  double top_p = 1.0;  // keep the smallest most-likely set whose probability reaches p; 1 = off
  double min_p = 0.0;  // drop tokens below min_p x the top probability; 0 = off
  bool active() const { return top_k > 0 || top_p < 1.0 || min_p > 0.0; }
};

// Zeroes, in place, the weights of the tokens the filters drop and returns
// the sum of the weights kept (in double, summed in index order). `w` holds
// one row's weights exp(z - max z) (>= 0, the first maximum's is 1).
//
// Tokens are ranked by weight, descending, ties by lower index; in order:
//  * top_k: the first k ranked tokens are kept;
//  * top_p: of those, the shortest ranked prefix whose cumulative weight
//    (double, in rank order) reaches top_p x their total is kept, so the top
//    token always is;
//  * min_p: tokens with w < min_p (= min_p x the top token's weight 1) are
//    dropped; the top token never is (min_p <= 1).
// The first maximum is always kept, so the filters never change the argmax.
// The weights a filter sees are the survivors of the one before it.
double filter_weights(float* w, size_t n, const SamplingFilters& filters);

}  // namespace dgemma
