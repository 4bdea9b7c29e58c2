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

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";
const std::vector<std::string> kCases = {kGolden + "/cases/encoder_short.safetensors",
                                         kGolden + "/cases/decoder_selfcond_short.safetensors"};

std::unique_ptr<DiffusionGemma> load(const std::string& dir, LoadQuantization q) {
  ModelOptions o;
  o.threads = 2;
  o.quantize = q;
  return DiffusionGemma::load(dir, o);
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

}  // namespace
}  // namespace dgemma
