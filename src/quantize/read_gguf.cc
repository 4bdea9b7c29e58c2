// GGUF tensors of a ggml block type (docs/formats.md §5.3), used in place
// from the mapped file: a QuantizedWeight of scheme kGgml whose one slice
// holds every row, each ggml_row_bytes(type, cols) long. A fused expert
// tensor [E, N, K] is E·N rows, expert-major, as the experts' GEMMs address
// them. Plain GGUF tensors (F32, F16, BF16) are not read here: the binder
// takes them as it takes safetensors tensors.
#include "dgemma/error.h"
#include "quantize/readers.h"

namespace dgemma::quant {

std::shared_ptr<QuantizedWeight> read_gguf_blocks(const QuantContext& ctx, const ExpectedTensor& ex,
                                                  const std::string& name) {
  const TensorView* v = ctx.store->find(name);
  if (!v || !v->info->ggml_blocks) return nullptr;
  const GgmlType type = *v->info->ggml_blocks;
  const GgmlTypeTraits& traits = ggml_traits(type);
  if (v->shape() != ex.shape)
    throw Error(where(*v) + ": shape " + shape_string(v->shape()) + " (GGUF dims reversed) does not match " + ex.name +
                " " + shape_string(ex.shape));
  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kGgml;
  q->ggml_type = type;
  q->shape = ex.shape;
  q->dtype = DType::kF32;  // the values are fp32 products of the block scales (docs/formats.md §5.2)
  q->block = traits.block_elems;
  q->scale_dtype = DType::kF16;
  set_logical_shape(*q, ex.shape);
  if (q->cols % traits.block_elems != 0)
    throw Error(where(*v) + ": rows of " + std::to_string(q->cols) + " are not whole " +
                std::string(ggml_type_name(type)) + " blocks of " + std::to_string(traits.block_elems));
  if (uint64_t(q->rows) * ggml_row_bytes(type, q->cols) != v->nbytes())
    throw Error(where(*v) + ": " + std::to_string(v->nbytes()) + " bytes do not hold " + std::to_string(q->rows) +
                " rows of " + std::to_string(q->cols) + " " + std::string(ggml_type_name(type)) + " values");
  QuantSlice s;
  s.rows = q->rows;
  s.codes = v->data;
  q->slices.push_back(s);
  add_stored(*q, *v);
  q->describe = "gguf " + std::string(ggml_type_name(type));
  return q;
}

}  // namespace dgemma::quant
