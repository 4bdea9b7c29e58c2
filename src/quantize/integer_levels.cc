#include "quantize/integer_levels.h"

#include <algorithm>
#include <cmath>

#include "quantize/format_tables.h"

namespace dgemma {

Int8WeightValues int8_weight_values(const QuantizedWeight& w) {
  Int8WeightValues v;
  switch (w.scheme) {
    case QuantScheme::kNF4: {
      float cmax = 0.0f;
      for (float c : w.code_map) cmax = std::max(cmax, std::fabs(c));
      if (cmax > 0.0f)
        for (int i = 0; i < 16; ++i) v.levels[i] = int16_t(std::lround(w.code_map[i] / cmax * 32767.0f));
      v.nf4_factor = cmax / 32767.0f;
      v.values = I8Values::kS16;
      break;
    }
    case QuantScheme::kNVFP4:
      v.sub = 16;
      for (int i = 0; i < 16; ++i) v.levels[i] = int16_t(quant::kE2m1Values[i] * 2.0f);
      break;
    case QuantScheme::kAffine:
      v.bias = true;
      for (int i = 0; i < 16; ++i) v.levels[i] = int16_t(i);
      v.values = w.bits == 8 ? I8Values::kU8 : I8Values::kS8;
      break;
    case QuantScheme::kInt8:
    case QuantScheme::kFP8: break;  // (kFP8 never takes this path: int8_dot_supported)
  }
  return v;
}

bool int8_dot_supported(const QuantizedWeight& w) {
  if (w.cols % kI8Block != 0 || w.block <= 0) return false;
  switch (w.scheme) {
    case QuantScheme::kNVFP4: return w.block == 16;
    case QuantScheme::kAffine: return w.block % kI8Block == 0 && (w.bits == 4 || w.bits == 8);
    case QuantScheme::kNF4:
    case QuantScheme::kInt8: return w.block % kI8Block == 0;
    case QuantScheme::kFP8: return false;  // E4M3 values are not integers: the exact path
  }
  return false;
}

}  // namespace dgemma
