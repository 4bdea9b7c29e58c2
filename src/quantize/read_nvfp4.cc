// ModelOpt NVFP4 tensors (docs/formats.md §3), used in place from the mapped
// file. A fused expert weight becomes one slice per expert projection: for
// gate_up, expert e's gate_proj is rows [e·2I, e·2I + I) and its up_proj rows
// [e·2I + I, e·2I + 2I) (gate = first half, §3.2); for down, down_proj is rows
// [e·H, e·H + H). Each slice keeps its own weight_scale_2.
#include <cmath>

#include "dgemma/error.h"
#include "quantize/readers.h"

namespace dgemma::quant {
namespace {

// One NVFP4 linear `module` of logical shape [rows, cols] as a slice starting
// at logical row `row_begin`; nullptr-equivalent (false) when not NVFP4.
bool read_linear(const QuantContext& ctx, const std::string& module, int64_t rows, int64_t cols, int64_t row_begin,
                 QuantizedWeight& q, QuantSlice& slice) {
  const TensorStore& store = *ctx.store;
  const TensorView* scale = store.find(module + ".weight_scale");
  if (!scale) return false;
  const std::string need = where(*scale);
  const TensorView& w = require(ctx, module + ".weight", need);
  const TensorView& g = require(ctx, module + ".weight_scale_2", need);
  if (w.dtype() != DType::kU8)
    throw Error(where(w) + ": NVFP4 packed weight must be U8, got " + std::string(dtype_name(w.dtype())) +
                " (docs/formats.md §3.2)");
  if (scale->dtype() != DType::kF8_E4M3)
    throw Error(need + ": NVFP4 weight_scale must be F8_E4M3, got " + std::string(dtype_name(scale->dtype())));
  if (cols % ctx.group_size != 0)
    throw Error(where(w) + ": " + std::to_string(cols) + " columns are not a multiple of the NVFP4 group size " +
                std::to_string(ctx.group_size));
  const std::vector<int64_t> ws = {rows, cols / 2}, ss = {rows, cols / ctx.group_size};
  if (w.shape() != ws)
    throw Error(where(w) + ": shape " + shape_string(w.shape()) + ", expected " + shape_string(ws) +
                " for a logical [" + std::to_string(rows) + ", " + std::to_string(cols) + "] (docs/formats.md §3.2)");
  if (scale->shape() != ss)
    throw Error(need + ": shape " + shape_string(scale->shape()) + ", expected " + shape_string(ss) +
                " (docs/formats.md §3.2)");
  if (g.dtype() != DType::kF32 || g.numel() != 1)
    throw Error(where(g) + ": weight_scale_2 must be one F32 value, got " + std::string(dtype_name(g.dtype())) + " " +
                shape_string(g.shape()));
  const float gs = g.at_f32(0);
  if (!std::isfinite(gs) || gs < 0.0f)
    throw Error(where(g) + ": weight_scale_2 value " + std::to_string(gs) + " is not a finite non-negative scale");
  if (const std::string* p = ctx.excluded_by(module))
    throw Error(where(w) + ": module " + module + " is stored as NVFP4 but " + ctx.source +
                " excludes it from quantization (pattern \"" + *p + "\")");
  slice.row_begin = row_begin;
  slice.rows = rows;
  slice.codes = w.data;
  slice.scales = scale->data;
  slice.global_scale = gs;
  add_stored(q, w);
  add_stored(q, *scale);
  add_stored(q, g);
  // Activation scale (W4A4 engines); this engine is weight-only (§3.3).
  if (const TensorView* in = store.find(module + ".input_scale")) add_stored(q, *in);
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::shared_ptr<QuantizedWeight> read_modelopt_nvfp4(const QuantContext& ctx, const ExpectedTensor& ex,
                                                     const std::string& name) {
  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kNVFP4;
  q->shape = ex.shape;
  q->dtype = ctx.default_dtype;
  q->block = ctx.group_size;
  q->bits = 4;
  q->scale_dtype = DType::kF8_E4M3;
  set_logical_shape(*q, ex.shape);
  q->describe = "modelopt nvfp4";

  const bool gate_up = ends_with(name, ".experts.gate_up_proj"), down = ends_with(name, ".experts.down_proj");
  if (ex.shape.size() == 3 && (gate_up || down)) {
    // Split per expert on export (§3.2): <layer>.experts.<e>.{gate,up,down}_proj.
    const std::string base = name.substr(0, name.rfind('.') + 1);
    const std::string first = base + "0." + (gate_up ? "gate_proj" : "down_proj");
    if (!ctx.store->find(first + ".weight_scale")) {
      if (ctx.store->find(first + ".weight"))
        throw Error(std::string(ctx.store->find(first + ".weight")->file) + ": tensor " + first +
                    ".weight: experts split per expert but not NVFP4-quantized are not supported");
      return nullptr;  // fused expert tensor stored plain (older exports, §3.1)
    }
    const int64_t E = ex.shape[0], rows = ex.shape[1], cols = ex.shape[2];
    for (int64_t e = 0; e < E; ++e) {
      const std::string pre = base + std::to_string(e) + ".";
      std::vector<std::pair<std::string, int64_t>> parts;  // module, first row
      if (gate_up)
        parts = {{pre + "gate_proj", e * rows}, {pre + "up_proj", e * rows + rows / 2}};
      else
        parts = {{pre + "down_proj", e * rows}};
      for (const auto& [module, row0] : parts) {
        QuantSlice s;
        if (!read_linear(ctx, module, gate_up ? rows / 2 : rows, cols, row0, *q, s))
          throw Error(ctx.store->dir() + ": expert weight " + module + ".weight_scale is missing (needed for " +
                      ex.name + "; docs/formats.md §3.2)");
        q->slices.push_back(s);
      }
    }
    return q;
  }
  if (ex.shape.size() != 2) return nullptr;
  QuantSlice s;
  if (!read_linear(ctx, module_path(name), ex.shape[0], ex.shape[1], 0, *q, s)) return nullptr;
  q->slices.push_back(s);
  return q;
}

}  // namespace dgemma::quant
