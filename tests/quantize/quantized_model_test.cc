// End to end on the tiny golden model A: `dgemma quantize`'s writer exports
// it in each format, the model is loaded from the export (through the
// quantized readers and kernels) and from a plain F32 copy of the same
// dequantized weights, and the two must give the same encoder states and
// decoder logits (with self-conditioning, which multiplies with the whole
// embedding table) up to fp32 summation order. The export must also
// round-trip: dequantized weights within the format's error of the originals,
// unquantized tensors bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io/tensor_io.h"
#include "model/diffusion_gemma.h"
#include "model/parity.h"
#include "quant_test_util.h"
#include "quantize/export.h"
#include "quantize/quantized_weight.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

std::vector<std::string> case_files(const std::string& decoder_case) {
  return {kGolden + "/cases/encoder_short.safetensors", kGolden + "/cases/" + decoder_case + ".safetensors"};
}

struct Variant {
  const char* label;
  ExportFormat format;
  bool embeddings = false, router = false;
};

class QuantizedGolden : public ::testing::TestWithParam<Variant> {};

TEST_P(QuantizedGolden, LogitsMatchDequantizedCopy) {
  const Variant v = GetParam();
  qtest::TempDir dir;
  const std::string qdir = dir.file("q"), ddir = dir.file("d");
  ExportOptions eo;
  eo.format = v.format;
  eo.quantize_embeddings = v.embeddings;
  eo.quantize_router = v.router;
  const ExportReport rep = export_quantized(kGolden, qdir, eo);
  EXPECT_GT(rep.quantized, 0);
  EXPECT_LT(rep.output_bytes, rep.input_bytes);
  export_dequantized(qdir, ddir);

  ModelOptions mo;
  mo.load_threads = 2;
  auto mq = test::load_on_cpu(qdir, mo);
  auto md = test::load_on_cpu(ddir, mo);
  const ModelWeights& w = mq->weights();
  for (const LayerWeights& L : w.layers) {
    EXPECT_TRUE(L.experts_gate_up.quant && L.experts_down.quant);
    // The export format's row names the scheme its file is read back as.
    if (L.experts_gate_up.quant) {
      EXPECT_EQ(L.experts_gate_up.quant->scheme, export_format_info(v.format).scheme);
    }
    EXPECT_EQ(bool(L.q_proj.quant), v.format != ExportFormat::kNvfp4Experts);
    EXPECT_EQ(bool(L.router_proj.quant), v.router);
  }
  EXPECT_EQ(bool(w.embed.quant), v.embeddings);
  EXPECT_EQ(bool(w.sc_gate.quant), v.format != ExportFormat::kNvfp4Experts);
  EXPECT_FALSE(md->weights().layers[0].q_proj.quant);

  for (const char* dec : {"decoder_first_short", "decoder_selfcond_short"}) {
    SCOPED_TRACE(dec);
    NamedTensors a = run_parity_inputs(*mq, case_files(dec));
    NamedTensors b = run_parity_inputs(*md, case_files(dec));
    int compared = 0;
    for (const char* name : {"decoder.logits", "encoder.last_hidden_state", "decoder.self_conditioning_out"}) {
      auto ia = a.find(name), ib = b.find(name);
      if (ia == a.end() || ib == b.end()) continue;
      // Same weights, different fp32 summation order (the quantized GEMM
      // versus the dense path): differences are rounding noise, amplified by
      // the layers like any other reordering (golden A's fp32 parity with
      // Transformers is 1e-4..1e-3). Bound them relative to the tensor's scale.
      const Tensor &want = ib->second, &got = ia->second;
      ASSERT_EQ(want.shape, got.shape);
      double scale = 0, diff = 0;
      for (size_t i = 0; i < want.f.size(); ++i) {
        scale = std::max(scale, std::fabs(double(want.f[i])));
        diff = std::max(diff, std::fabs(double(want.f[i]) - double(got.f[i])));
      }
      EXPECT_LE(diff, 2e-5 * scale) << name << ": max |diff| " << diff << " at scale " << scale;
      if (std::string(name) == "decoder.logits") {
        EXPECT_EQ(compare_tensors(want, got, 1e-3, 0.0).argmax_disagree, 0);
      }
      std::printf("[%s %s] %s max |diff| %.3g (scale %.3g)\n", v.label, dec, name, diff, scale);
      ++compared;
    }
    EXPECT_GE(compared, 1);
  }

  // Round trip against the original weights.
  TensorStore orig = TensorStore::open_dir(kGolden), deq = TensorStore::open_dir(ddir);
  for (const std::string& n : deq.names()) {
    const TensorView* o = orig.find(n);
    ASSERT_TRUE(o) << n;
    const TensorView& d = *deq.find(n);
    double num = 0, den = 0;
    for (int64_t i = 0; i < d.numel(); ++i) {
      const double e = double(d.at_f32(size_t(i))) - double(o->at_f32(size_t(i)));
      num += e * e;
      den += double(o->at_f32(size_t(i))) * double(o->at_f32(size_t(i)));
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    EXPECT_LT(rel, 0.15) << n;  // 4-bit formats; 8-bit and plain tensors are far below
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedGolden,
                         ::testing::Values(Variant{"nf4", ExportFormat::kNf4},
                                           Variant{"nf4_embed_router", ExportFormat::kNf4, true, true},
                                           Variant{"nvfp4_experts", ExportFormat::kNvfp4Experts},
                                           Variant{"mlx4", ExportFormat::kMlx4},
                                           Variant{"mlx4_embed_router", ExportFormat::kMlx4, true, true}),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.label; });

TEST(QuantizedExport, RefusesQuantizedInputAndBadOptions) {
  qtest::TempDir dir;
  ExportOptions eo;
  eo.format = ExportFormat::kNf4;
  export_quantized(kGolden, dir.file("q"), eo);
  qtest::expect_error([&] { export_quantized(dir.file("q"), dir.file("q2"), eo); },
                      {"already quantized", "bitsandbytes-nf4"});
  eo.format = ExportFormat::kNvfp4Experts;
  eo.quantize_router = true;
  qtest::expect_error([&] { export_quantized(kGolden, dir.file("q3"), eo); }, {"nvfp4-experts", "experts only"});
}

}  // namespace
}  // namespace dgemma
