#pragma once
// One row per `--quantize` mode (LoadQuantization, docs/formats.md §8.1): its
// name on the command line, its help line, the scheme it stores, the weights
// it covers and how it picks a weight's block. The parser, the list of names
// in messages and help, quantize_at_load's parameters and `dgemma plan`'s
// byte estimate all read the same row, so a new mode is one row here (plus,
// for a new block rule, its case in load_block).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/tensor_names.h"
#include "core/dtype.h"
#include "quantize/load_quantize.h"
#include "quantize/quantized_weight.h"

namespace dgemma {

// How a mode chooses the block (elements per scale) of a weight.
enum class LoadBlockRule : uint8_t {
  kNothing,        // (none) nothing is quantized
  kFlat,           // `block` elements of the flattened tensor
  kExpertSlices,   // 3-D experts only, the scheme's fixed block along each row (left as stored when it does not
                   // divide the row); one slice per expert projection
  kRowBlock,       // quant::row_block_for(cols, block); left as stored when none divides the row
  kRowBlockOrRow,  // quant::row_block_for(cols, block); the whole row when none divides it
  kRow,            // the whole row: one scale per output channel
};

constexpr uint32_t component_bit(Component c) { return uint32_t(1) << unsigned(c); }
// The weights of the linear layers: attention, dense MLP, self-conditioning,
// experts and the vision tower's linears (docs/model.md §7.1).
inline constexpr uint32_t kLinearWeights = component_bit(Component::kAttention) | component_bit(Component::kDenseMlp) |
                                           component_bit(Component::kSelfConditioning) |
                                           component_bit(Component::kExperts) | component_bit(Component::kVisionLinear);

struct LoadFormat {
  LoadQuantization mode;
  std::string_view name;  // the `--quantize` spelling
  std::string_view help;  // what it does, for --help (empty for none)
  QuantScheme scheme;     // what it stores (unused by none)
  uint32_t covers;        // component_bit()s of the weights it quantizes
  LoadBlockRule block_rule;
  int block;          // the rule's block (the preferred one for the row rules)
  DType scale_dtype;  // how the block scales are stored
  // Bytes beyond codes and scales, for the estimate: NF4's double quant keeps
  // an fp32 scale per `nested_block` block scales plus an fp32 offset; NVFP4
  // an fp32 weight_scale_2 per slice (`global_scale_per_slice`): one per
  // expert projection, so two per expert of gate_up_proj (expert_slices).
  int nested_block;
  bool global_scale_per_slice;
};

// Rows in LoadQuantization order (checked in load_formats.cc).
inline constexpr std::array<LoadFormat, 6> kLoadFormats = {{
    {LoadQuantization::kNone, "none", "", QuantScheme::kNF4, 0, LoadBlockRule::kNothing, 0, DType::kF32, 0, false},
    {LoadQuantization::kNf4, "nf4",
     "NF4 + double quant: attention, dense MLP, self-conditioning, experts, vision linears", QuantScheme::kNF4,
     kLinearWeights, LoadBlockRule::kFlat, 64, DType::kU8, 256, false},
    {LoadQuantization::kNvfp4Experts, "nvfp4-experts", "NVFP4, experts only", QuantScheme::kNVFP4,
     component_bit(Component::kExperts), LoadBlockRule::kExpertSlices, 0, DType::kF8_E4M3, 0, true},
    {LoadQuantization::kQ8, "q8", "int8, same weights as nf4", QuantScheme::kInt8, kLinearWeights,
     LoadBlockRule::kRowBlock, 64, DType::kF32, 0, false},
    {LoadQuantization::kFp8, "fp8", "FP8 E4M3, a scale per output channel, same weights as nf4", QuantScheme::kFP8,
     kLinearWeights, LoadBlockRule::kRow, 0, DType::kF32, 0, false},
    {LoadQuantization::kFp8Block, "fp8-block", "FP8 E4M3, a scale per 128 columns", QuantScheme::kFP8, kLinearWeights,
     LoadBlockRule::kRowBlockOrRow, 128, DType::kF32, 0, false},
}};

const LoadFormat& load_format(LoadQuantization mode);

// The block `f` quantizes a weight of logical `shape` (two or more
// dimensions) with; 0 when the mode leaves it as stored.
int load_block(const LoadFormat& f, const std::vector<int64_t>& shape);

// The projections a fused expert weight named `tensor_name` holds, each kept
// as one slice per expert under kExpertSlices (docs/formats.md §3.2): 2 for
// gate_up_proj (gate and up), 1 for any other (down_proj).
int expert_slices(std::string_view tensor_name);

// The bytes a covered float weight `tensor_name` of `shape` takes after
// `mode`: codes (n·bits/8), block scales (one per block, in the row's scale
// dtype) and the row's extras. nullopt when the mode leaves it as stored.
std::optional<uint64_t> load_quantized_bytes(LoadQuantization mode, const std::vector<int64_t>& shape,
                                             std::string_view tensor_name);

}  // namespace dgemma
