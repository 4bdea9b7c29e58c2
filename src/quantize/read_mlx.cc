// MLX affine tensors (docs/formats.md §4), used in place from the mapped
// file. Bits and group size follow from the shapes (the logical width is
// known from the config) and must agree with config.json's `quantization`
// entry for the module (§4.3) when there is one.
#include "dgemma/error.h"
#include "quantize/readers.h"

namespace dgemma::quant {

std::shared_ptr<QuantizedWeight> read_mlx_affine(const QuantContext& ctx, const ExpectedTensor& ex,
                                                 const std::string& name) {
  const TensorStore& store = *ctx.store;
  const std::string path = module_path(name);
  const TensorView* scales = store.find(path + ".scales");
  if (!scales) return nullptr;
  const std::string need = where(*scales);
  const TensorView& w = require(ctx, path + ".weight", need);
  const TensorView* biases = store.find(path + ".biases");
  if (!biases)
    throw Error(need + ": no " + path +
                ".biases: only MLX affine mode is supported (mxfp4/mxfp8/nvfp4 modes "
                "have no biases; docs/formats.md §4.2)");

  MlxQuantParams params = ctx.mlx_default;
  std::string params_source = ctx.source + ": quantization";
  if (const MlxQuantParams* o = ctx.mlx_override(path)) {
    params = *o;
    params_source = ctx.source + ": quantization override for " + path;
  }
  if (ctx.mlx_from_config && !params.quantized)
    throw Error(need + ": module is quantized but " + params_source + " says it is not");
  if (ctx.mlx_from_config && params.mode != "affine")
    throw Error(params_source + ": mode \"" + params.mode +
                "\" is not supported (MLX affine only, docs/formats.md §4.2)");

  // Shapes: weight U32 [..., in·bits/32], scales/biases [..., in/group].
  const int64_t in = ex.shape.back();
  const std::vector<int64_t> lead(ex.shape.begin(), ex.shape.end() - 1);
  auto check_lead = [&](const TensorView& v) {
    if (v.shape().size() != ex.shape.size() || !std::equal(lead.begin(), lead.end(), v.shape().begin()))
      throw Error(where(v) + ": shape " + shape_string(v.shape()) + " does not match " + ex.name + " " +
                  shape_string(ex.shape) + " (docs/formats.md §4.1)");
  };
  check_lead(w);
  check_lead(*scales);
  check_lead(*biases);
  if (w.dtype() != DType::kU32)
    throw Error(where(w) + ": packed MLX weight must be U32, got " + std::string(dtype_name(w.dtype())));
  const int64_t packed = w.shape().back(), groups = scales->shape().back();
  if (packed <= 0 || groups <= 0 || (packed * 32) % in != 0 || in % groups != 0)
    throw Error(where(w) + ": packed width " + std::to_string(packed) + " and " + std::to_string(groups) +
                " groups do not describe " + std::to_string(in) + " columns (docs/formats.md §4.1)");
  const int bits = int(packed * 32 / in), group = int(in / groups);
  if (ctx.mlx_from_config && (bits != params.bits || group != params.group_size))
    throw Error(where(w) + ": shapes imply bits " + std::to_string(bits) + ", group_size " + std::to_string(group) +
                " but " + params_source + " gives bits " + std::to_string(params.bits) + ", group_size " +
                std::to_string(params.group_size));
  if (bits != 4 && bits != 8)
    throw Error(where(w) + ": MLX affine " + std::to_string(bits) + "-bit is not supported (4 and 8 are)");
  if (group != 32 && group != 64 && group != 128)
    throw Error(where(w) + ": MLX group size " + std::to_string(group) +
                " is not one of 32, 64, 128 (docs/formats.md §4.2)");
  const DType sd = scales->dtype();
  if (sd != DType::kBF16 && sd != DType::kF16 && sd != DType::kF32)
    throw Error(where(*scales) + ": scales must be BF16, F16 or F32, got " + std::string(dtype_name(sd)));
  if (biases->dtype() != sd || biases->shape() != scales->shape())
    throw Error(where(*biases) + ": biases must have the dtype and shape of " + path + ".scales");

  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kAffine;
  q->shape = ex.shape;
  q->dtype = sd;  // MLX keeps scales in the model dtype
  q->block = group;
  q->bits = bits;
  q->scale_dtype = sd;
  set_logical_shape(*q, ex.shape);
  QuantSlice s;
  s.rows = q->rows;
  s.codes = w.data;
  s.scales = scales->data;
  s.biases = biases->data;
  q->slices.push_back(s);
  add_stored(*q, w);
  add_stored(*q, *scales);
  add_stored(*q, *biases);
  q->describe = "mlx affine " + std::to_string(bits) + "-bit group " + std::to_string(group);
  return q;
}

}  // namespace dgemma::quant
