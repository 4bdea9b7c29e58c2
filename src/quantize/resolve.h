#pragma once
// Binding of quantized checkpoint tensors (the hook bind_weights() calls for
// every expected tensor of a quantized checkpoint, docs/formats.md §7).
#include <optional>
#include <string>

#include "checkpoint/tensor_names.h"
#include "core/tensor.h"
#include "quantize/quant_context.h"

namespace dgemma {

// The expected tensor (under its canonical name or a tied alias, in that
// order) when the checkpoint stores it quantized in the context's format:
// a WeightRef with the logical shape and dtype and `quant` set, whose
// QuantizedWeight::stored_names lists every stored tensor it consumed
// (packed data and companions such as absmax, quant_map, scales, biases,
// weight_scale), including quantized copies under other tied names. nullopt:
// the tensor is stored plain (or absent) and is bound the ordinary way.
// Throws dgemma::Error for malformed quantized data.
//
// Weights read by an op without a quantized path (everything but the
// embedding, attention/MLP/self-conditioning linears and the experts: in
// practice router.proj, 8-bit in MLX conversions) get a dense fp32 copy as
// their data (quantize/quantized_weight.h); it is small (E × H).
std::optional<WeightRef> resolve_quantized(const QuantContext& ctx, const ExpectedTensor& ex);

// Stored tensors of a quantized checkpoint the engine reads nothing from
// and that belong to no expected tensor: ModelOpt KV-cache scales
// (`*.k_scale`, `*.v_scale`; the KV cache stays fp32, docs/formats.md §3.4),
// and a GGUF file's `rope_freqs.weight`, which the config reads
// (docs/formats.md §5.3).
bool is_ignored_quant_tensor(const QuantContext& ctx, const std::string& name);

}  // namespace dgemma
