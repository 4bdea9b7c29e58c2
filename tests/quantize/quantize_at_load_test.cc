// Quantize at load (ModelOptions::quantize, `--quantize`): the weights are
// quantized in memory with the same quantizers the exporter uses, so loading
// golden A with nf4 / nvfp4-experts gives bit-identical logits to loading its
// `dgemma quantize` export; q8 stays close to the plain model.
#include <gtest/gtest.h>

#include <cmath>

#include "model/diffusion_gemma.h"
#include "model/parity.h"
#include "quant_test_util.h"
#include "quantize/export.h"
#include "quantize/quantized_weight.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";
const std::vector<std::string> kCases = {kGolden + "/cases/encoder_short.safetensors",
                                         kGolden + "/cases/decoder_selfcond_short.safetensors"};

std::unique_ptr<DiffusionGemma> load(const std::string& dir, LoadQuantization q) {
  ModelOptions o;
  o.load_threads = 2;
  o.quantize = q;
  return test::load_on_cpu(dir, o);
}

TEST(QuantizeAtLoad, MatchesLoadingTheExport) {
  for (auto [mode, format] : {std::pair{LoadQuantization::kNf4, ExportFormat::kNf4},
                              std::pair{LoadQuantization::kNvfp4Experts, ExportFormat::kNvfp4Experts}}) {
    qtest::TempDir dir;
    ExportOptions eo;
    eo.format = format;
    export_quantized(kGolden, dir.file("q"), eo);
    auto at_load = load(kGolden, mode);
    auto exported = load(dir.file("q"), LoadQuantization::kNone);
    const LayerWeights& L = at_load->weights().layers[0];
    ASSERT_TRUE(L.experts_gate_up.quant && L.experts_down.quant);
    EXPECT_EQ(bool(L.q_proj.quant), mode == LoadQuantization::kNf4);
    EXPECT_FALSE(at_load->weights().embed.quant);
    EXPECT_FALSE(L.router_proj.quant);
    const NamedTensors a = run_parity_inputs(*at_load, kCases), b = run_parity_inputs(*exported, kCases);
    EXPECT_EQ(a.at("decoder.logits").f, b.at("decoder.logits").f);
    EXPECT_EQ(a.at("encoder.last_hidden_state").f, b.at("encoder.last_hidden_state").f);
  }
}

double rel_rms(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.f.size(); ++i) {
    num += (double(a.f[i]) - double(b.f[i])) * (double(a.f[i]) - double(b.f[i]));
    den += double(b.f[i]) * double(b.f[i]);
  }
  return std::sqrt(num / den);
}

// Quantization error, not rounding: golden A's random weights amplify it
// through the layers (a flipped top-k route moves a token's whole MoE output),
// so compare the first layer's output and int8 against 4-bit.
TEST(QuantizeAtLoad, Int8IsCloseToThePlainModel) {
  const NamedTensors plain = run_parity_inputs(*load(kGolden, LoadQuantization::kNone), kCases);
  auto q8 = load(kGolden, LoadQuantization::kQ8);
  ASSERT_TRUE(q8->weights().layers[0].mlp_gate.quant);
  EXPECT_EQ(q8->weights().layers[0].mlp_gate.quant->scheme, QuantScheme::kInt8);
  const NamedTensors a = run_parity_inputs(*q8, kCases);
  const NamedTensors n = run_parity_inputs(*load(kGolden, LoadQuantization::kNf4), kCases);
  const double q8_first = rel_rms(a.at("decoder.layer_out.0"), plain.at("decoder.layer_out.0"));
  const double q8_logits = rel_rms(a.at("decoder.logits"), plain.at("decoder.logits"));
  const double nf4_logits = rel_rms(n.at("decoder.logits"), plain.at("decoder.logits"));
  std::printf("relative RMS vs plain: q8 layer 0 %.3g, q8 logits %.3g, nf4 logits %.3g\n", q8_first, q8_logits,
              nf4_logits);
  EXPECT_GT(q8_first, 0.0);
  EXPECT_LT(q8_first, 0.03);
  EXPECT_LT(q8_logits, 0.5 * nf4_logits);
}

// FP8 E4M3 keeps 3 mantissa bits (relative error up to 2^-4 per weight; on
// golden A's first layer ≈ 0.1 relative RMS, where int8 gives 0.015 and NF4
// 0.3): well under NF4's error. A scale per 128 columns (fp8-block) is no
// worse than one per row.
TEST(QuantizeAtLoad, Fp8ErrorIsWellUnderNf4s) {
  const NamedTensors plain = run_parity_inputs(*load(kGolden, LoadQuantization::kNone), kCases);
  auto fp8 = load(kGolden, LoadQuantization::kFp8);
  auto fp8_block = load(kGolden, LoadQuantization::kFp8Block);
  const QuantizedWeight& gate = *fp8->weights().layers[0].mlp_gate.quant;
  EXPECT_EQ(gate.scheme, QuantScheme::kFP8);
  EXPECT_EQ(gate.block, gate.cols);  // per output channel
  EXPECT_EQ(fp8_block->weights().layers[0].mlp_gate.quant->scheme, QuantScheme::kFP8);
  EXPECT_EQ(fp8->weights().embed.quant, nullptr);  // the embedding stays as stored
  const NamedTensors a = run_parity_inputs(*fp8, kCases), b = run_parity_inputs(*fp8_block, kCases);
  const NamedTensors n = run_parity_inputs(*load(kGolden, LoadQuantization::kNf4), kCases);
  const double first = rel_rms(a.at("decoder.layer_out.0"), plain.at("decoder.layer_out.0"));
  const double block_first = rel_rms(b.at("decoder.layer_out.0"), plain.at("decoder.layer_out.0"));
  const double nf4_first = rel_rms(n.at("decoder.layer_out.0"), plain.at("decoder.layer_out.0"));
  std::printf("relative RMS vs plain, layer 0: fp8 %.3g, fp8-block %.3g, nf4 %.3g\n", first, block_first, nf4_first);
  EXPECT_GT(first, 0.0);
  EXPECT_LT(first, 0.5 * nf4_first);
  EXPECT_LE(block_first, first * 1.1);
}

}  // namespace
}  // namespace dgemma
