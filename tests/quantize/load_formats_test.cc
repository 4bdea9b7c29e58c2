// The format tables (quantize/scheme_traits.h, quantize/load_formats.h,
// export.h): the names the command line accepts, and `dgemma plan`'s byte
// estimate of each `--quantize` mode against what quantize_at_load really
// keeps for a weight.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "quantize/export.h"
#include "quantize/load_formats.h"
#include "quantize/load_quantize.h"
#include "quantize/quant_context.h"
#include "quantize/quantized_weight.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

TEST(FormatTables, NamesAndParsers) {
  EXPECT_STREQ(load_quantization_names(), "none, nf4, nvfp4-experts, q8, fp8 or fp8-block");
  for (const LoadFormat& f : kLoadFormats) EXPECT_EQ(parse_load_quantization(f.name), f.mode) << f.name;
  EXPECT_EQ(parse_load_quantization(""), LoadQuantization::kNone);
  EXPECT_EQ(parse_load_quantization("int8"), std::nullopt);
  EXPECT_EQ(load_quantization_help(),
            "none; nf4 (NF4 + double quant: attention, dense MLP, self-conditioning, experts, vision linears); "
            "nvfp4-experts (NVFP4, "
            "experts only); q8 (int8, same weights as nf4); fp8 (FP8 E4M3, a scale per output channel, same weights "
            "as nf4); fp8-block (FP8 E4M3, a scale per 128 columns)");

  EXPECT_EQ(export_format_names(), "nf4, nvfp4-experts or mlx4");
  for (const ExportFormatInfo& f : kExportFormats) {
    EXPECT_EQ(parse_export_format(f.name), f.format) << f.name;
    EXPECT_EQ(export_format_name(f.format), f.name);
  }
  EXPECT_EQ(parse_export_format("q8"), std::nullopt);

  EXPECT_EQ(quant_scheme_name(QuantScheme::kNF4), "nf4");
  EXPECT_EQ(quant_scheme_name(QuantScheme::kNVFP4), "nvfp4");
  EXPECT_EQ(quant_scheme_name(QuantScheme::kAffine), "affine");
  EXPECT_EQ(quant_scheme_name(QuantScheme::kInt8), "int8");
  EXPECT_EQ(quant_scheme_name(QuantScheme::kFP8), "fp8");
  EXPECT_EQ(checkpoint_quant_name(CheckpointQuant::kNone), "none");
  EXPECT_EQ(checkpoint_quant_name(CheckpointQuant::kBitsAndBytes), "bitsandbytes-nf4");
  EXPECT_EQ(checkpoint_quant_name(CheckpointQuant::kModelOpt), "modelopt-nvfp4");
  EXPECT_EQ(checkpoint_quant_name(CheckpointQuant::kMlx), "mlx-affine");
}

// The bytes a quantized weight keeps: its buffers, plus the fp32 scalars it
// holds as fields (NF4's double-quant offset, an NVFP4 global scale per slice).
uint64_t kept_bytes(const QuantizedWeight& q) {
  uint64_t b = q.stored_bytes;
  if (q.scheme == QuantScheme::kNF4 && q.double_quant) b += 4;
  if (q.scheme == QuantScheme::kNVFP4) b += 4 * uint64_t(q.slices.size());
  return b;
}

struct Case {
  LoadQuantization mode;
  Component component;
  std::string name;
  std::vector<int64_t> shape;
  int block;  // the block quantize_at_load picks; 0: the weight is left as stored
};

std::optional<WeightRef> quantize(const Case& c, const std::vector<float>& values) {
  WeightRef plain;
  plain.name = c.name;
  plain.dtype = DType::kF32;
  plain.shape = c.shape;
  plain.data = values.data();
  const ExpectedTensor ex{c.name, c.shape, c.component, {}};
  return quantize_at_load(plain, ex, c.mode, /*release_source=*/false, /*threads=*/1);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const std::string kQProj = "model.decoder.layers.0.self_attn.q_proj.weight";
const std::string kGateUp = "model.decoder.layers.0.experts.gate_up_proj";
const std::string kDown = "model.decoder.layers.0.experts.down_proj";

TEST(FormatTables, EstimateIsWhatQuantizeAtLoadKeeps) {
  using LQ = LoadQuantization;
  const std::vector<Case> cases = {
      {LQ::kNf4, Component::kAttention, kQProj, {40, 200}, 64},  // 125 blocks, the last one partial
      {LQ::kNf4, Component::kExperts, kGateUp, {2, 64, 96}, 64},
      {LQ::kNvfp4Experts, Component::kExperts, kGateUp, {2, 64, 96}, 16},  // two slices per expert
      {LQ::kNvfp4Experts, Component::kExperts, kDown, {3, 32, 64}, 16},    // one slice per expert
      {LQ::kQ8, Component::kAttention, kQProj, {48, 128}, 64},
      {LQ::kQ8, Component::kDenseMlp, "mlp.up_proj.weight", {48, 96}, 32},
      {LQ::kQ8, Component::kSelfConditioning, "self_conditioning.proj.weight", {8, 48}, 16},
      {LQ::kFp8, Component::kAttention, kQProj, {48, 96}, 96},
      {LQ::kFp8Block, Component::kAttention, kQProj, {48, 256}, 128},
      {LQ::kFp8Block, Component::kExperts, kDown, {2, 48, 96}, 32},
      {LQ::kFp8Block, Component::kAttention, kQProj, {8, 200}, 200},  // no block divides 200: per channel
      // Left as stored: no q8 block divides 200; NVFP4 wants 3-D experts; a component the mode does not cover.
      {LQ::kQ8, Component::kAttention, kQProj, {8, 200}, 0},
      {LQ::kNvfp4Experts, Component::kExperts, kQProj, {32, 64}, 0},
      {LQ::kNf4, Component::kRouter, "router.proj.weight", {4, 64}, 0},
      {LQ::kNone, Component::kAttention, kQProj, {48, 128}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(load_format(c.mode).name) + " " + c.name);
    const std::vector<float> values = normal_values(numel(c.shape), 7, 0.2f);
    const std::optional<WeightRef> q = quantize(c, values);
    ASSERT_EQ(q.has_value(), c.block != 0);
    if (!load_quantization_covers(c.component, c.mode)) continue;  // the caller never asks for an estimate
    const std::optional<uint64_t> estimate = load_quantized_bytes(c.mode, c.shape, c.name);
    ASSERT_EQ(estimate.has_value(), c.block != 0);
    if (!q) continue;
    EXPECT_EQ(q->quant->block, c.block);
    EXPECT_EQ(q->quant->scheme, load_format(c.mode).scheme);
    EXPECT_EQ(*estimate, kept_bytes(*q->quant));
  }
}

}  // namespace
}  // namespace dgemma
