#pragma once
// Per-format readers behind resolve_quantized() (internal to src/quantize).
// Each returns nullptr when the tensor is not stored in its format (a plain
// tensor, bound the ordinary way), and throws dgemma::Error naming the file,
// tensor, field and value when a quantized tensor is malformed.
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/tensor_names.h"
#include "quantize/quant_context.h"
#include "quantize/quantized_weight.h"

namespace dgemma::quant {

// docs/formats.md §2: NF4 iff `name.quant_state.bitsandbytes__nf4` exists.
std::shared_ptr<QuantizedWeight> read_bnb_nf4(const QuantContext& ctx, const ExpectedTensor& ex,
                                              const std::string& name);
// docs/formats.md §3: NVFP4 iff U8 weight + F8_E4M3 weight_scale + weight_scale_2;
// fused experts from their per-expert tensors.
std::shared_ptr<QuantizedWeight> read_modelopt_nvfp4(const QuantContext& ctx, const ExpectedTensor& ex,
                                                     const std::string& name);
// docs/formats.md §4: quantized iff `<module>.scales` exists.
std::shared_ptr<QuantizedWeight> read_mlx_affine(const QuantContext& ctx, const ExpectedTensor& ex,
                                                 const std::string& name);
// docs/formats.md §5.3: a GGUF tensor of a ggml block type, used in place.
std::shared_ptr<QuantizedWeight> read_gguf_blocks(const QuantContext& ctx, const ExpectedTensor& ex,
                                                  const std::string& name);

// "<file>: tensor <name>" for messages.
std::string where(const TensorView& v);
// The tensor or an error naming what needed it.
const TensorView& require(const QuantContext& ctx, const std::string& name, const std::string& needed_by);
// Module path of a parameter name: "a.b.weight" -> "a.b"; fused expert
// parameters ("...experts.gate_up_proj") are their own module path.
std::string module_path(const std::string& name);
int64_t product(const std::vector<int64_t>& shape);
// Fills rows/cols from shape ([leading product, last dim]).
void set_logical_shape(QuantizedWeight& q, const std::vector<int64_t>& shape);
void add_stored(QuantizedWeight& q, const TensorView& v);

}  // namespace dgemma::quant
