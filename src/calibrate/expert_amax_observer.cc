#include "calibrate/expert_amax_observer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "dgemma/error.h"

namespace dgemma {
namespace {

// "<pass>.<kind>.<layer>.<what>" -> its parts; false for other names.
struct TapName {
  std::string_view pass, kind, what;
  int64_t layer = -1;
};

bool split_tap(std::string_view name, TapName& out) {
  const size_t a = name.find('.');
  if (a == std::string_view::npos) return false;
  const size_t b = name.find('.', a + 1);
  if (b == std::string_view::npos) return false;
  const size_t c = name.find('.', b + 1);
  if (c == std::string_view::npos) return false;
  out.pass = name.substr(0, a);
  out.kind = name.substr(a + 1, b - a - 1);
  out.what = name.substr(c + 1);
  const auto [p, ec] = std::from_chars(name.data() + b + 1, name.data() + c, out.layer);
  return ec == std::errc() && p == name.data() + c;
}

}  // namespace

ExpertAmaxObserver::ExpertAmaxObserver(int64_t num_layers, int64_t num_experts, bool encoder, bool decoder)
    : encoder_(encoder), decoder_(decoder) {
  ranges_.resize(num_layers, num_experts);
}

void ExpertAmaxObserver::on_tap(std::string_view name, const Tensor& t) {
  TapName tap;
  if (!split_tap(name, tap)) return;
  if (!((tap.pass == "encoder" && encoder_) || (tap.pass == "decoder" && decoder_))) return;
  if (tap.layer < 0 || tap.layer >= ranges_.num_layers) return;
  if (tap.kind == "router" && tap.what == "top_k_index") {
    idx_ = t;
    idx_layer_ = tap.layer;
    return;
  }
  if (tap.kind != "experts" || (tap.what != "input" && tap.what != "down_input")) return;
  if (idx_layer_ != tap.layer) throw Error("calibration: " + std::string(name) + " came without its routing");
  const int64_t M = idx_.dim(0), K = idx_.dim(1), E = ranges_.num_experts;
  const bool down = tap.what == "down_input";
  // input: [M, H], the same row for each of a token's K experts;
  // down_input: [M, K, I], a row per (token, slot).
  const int64_t rows = down ? M * K : M;
  if (t.numel() % std::max<int64_t>(rows, 1) != 0 || t.dim(0) != M)
    throw Error("calibration: " + std::string(name) + " has shape " + t.shape_string() + " for " + std::to_string(M) +
                " tokens");
  const int64_t cols = rows ? t.numel() / rows : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = t.f.data() + r * cols;
    float m = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      if (!std::isfinite(v[c]))
        throw Error("calibration: " + std::string(name) + " holds " + std::to_string(v[c]) + " (row " +
                    std::to_string(r) + "); the model does not compute finite values on this sample");
      m = std::max(m, std::fabs(v[c]));
    }
    for (int64_t k = down ? r % K : 0; k < (down ? r % K + 1 : K); ++k) {
      const int64_t token = down ? r / K : r;
      const int32_t e = idx_.i[size_t(token * K + k)];
      if (e < 0 || e >= E) throw Error("calibration: expert index " + std::to_string(e) + " out of range");
      const size_t at = ranges_.at(tap.layer, e);
      float& amax = down ? ranges_.down_amax[at] : ranges_.gate_up_amax[at];
      amax = std::max(amax, m);
      if (!down) ++ranges_.routed[at];
    }
  }
}

}  // namespace dgemma
