// A GGUF checkpoint end to end (docs/formats.md §5.3): golden model A written
// as GGUF with ggml block types (the router too), loaded through
// open_checkpoint and the kGgml binding, gives the outputs of the F32
// safetensors checkpoint holding the blocks' decoded values up to the
// summation order of the quantized products; and the
// binding itself: every weight of a block type is a kGgml weight over the
// file's bytes, the router a dense copy, plain tensors F32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "checkpoint/checkpoint_source.h"
#include "checkpoint/gguf_fixture.h"
#include "checkpoint/gguf_names.h"
#include "checkpoint/tensor_names.h"
#include "core/file_io.h"
#include "cpu_model.h"
#include "io/gguf_writer.h"
#include "io/tensor_io.h"
#include "model/parity.h"
#include "quantize/ggml_blocks.h"
#include "quantize/ggml_quantize.h"
#include "quantize/quantized_weight.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

// The type each golden A tensor gets: every block type the published files
// use that fits rows of 32..96 values, and F32 for vectors.
GgmlType type_for(const ExpectedTensor& ex) {
  if (ex.shape.size() == 1) return GgmlType::kF32;
  switch (ex.component) {
    case Component::kEmbedding: return GgmlType::kQ8_0;
    case Component::kAttention: return GgmlType::kQ5_0;
    case Component::kDenseMlp: return GgmlType::kQ4_0;
    case Component::kRouter: return GgmlType::kQ8_0;
    case Component::kExperts: return GgmlType::kQ8_0;
    case Component::kSelfConditioning: return GgmlType::kQ5_0;
    case Component::kNormsScalars: return GgmlType::kF32;
    case Component::kVisionLinear:  // GGUF files carry no vision tower
    case Component::kVisionTable: return GgmlType::kF32;
  }
  return GgmlType::kF32;
}

// Writes golden A as a GGUF (quantized per type_for) to `gguf` and the
// decoded values as an F32 checkpoint folder `dir`.
void write_pair(const std::string& gguf, const std::string& dir) {
  const CheckpointSource src = open_checkpoint(kGolden);
  const ModelConfig& c = src.config;
  GgufStreamWriter w;
  add_gguf_model_keys(w, c, 7);
  const std::vector<ExpectedTensor> expected = expected_tensors(c);
  for (const ExpectedTensor& ex : expected)
    w.declare(*canonical_to_gguf(ex.name), type_for(ex), {ex.shape.rbegin(), ex.shape.rend()});
  const std::vector<float> freqs =
      gguf_rope_freq_factors(c.global_head_dim, c.rope_full.rotated_pairs(c.global_head_dim));
  w.declare(std::string(kGgufRopeFreqsName), GgmlType::kF32, {int64_t(freqs.size())});
  w.begin(gguf);
  w.write(std::string(kGgufRopeFreqsName), freqs.data(), freqs.size() * 4);
  std::filesystem::create_directories(dir);
  SafetensorsWriter st;
  for (const ExpectedTensor& ex : expected) {
    const TensorView* v = src.store.find(ex.name);
    for (size_t i = 0; !v; ++i) v = src.store.find(ex.aliases.at(i));
    std::vector<float> x(size_t(v->numel()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = v->at_f32(i);
    const GgmlType t = type_for(ex);
    const int64_t cols = ex.shape.back(), rows = int64_t(x.size()) / cols;
    if (t == GgmlType::kF32) {
      w.write(*canonical_to_gguf(ex.name), x.data(), x.size() * 4);
    } else {
      std::vector<uint8_t> blocks(size_t(rows * int64_t(ggml_row_bytes(t, cols))));
      quant::ggml_quantize_rows(t, x.data(), rows, cols, blocks.data());
      w.write(*canonical_to_gguf(ex.name), blocks.data(), blocks.size());
      for (int64_t r = 0; r < rows; ++r)
        quant::ggml_decode_row(t, blocks.data() + r * int64_t(ggml_row_bytes(t, cols)), 0, cols, x.data() + r * cols);
    }
    st.add_f32(ex.name, ex.shape, x.data());
  }
  w.finish();
  st.write(dir + "/model.safetensors");
  std::filesystem::copy_file(kGolden + "/config.json", dir + "/config.json");
}

TEST(GgufCheckpoint, BlockTypesBindInPlaceAndMatchTheirDecodedF32Copy) {
  const std::string tmp = dgemma_test_temp_dir("gguf_checkpoint");
  write_pair(tmp + "/a.gguf", tmp + "/decoded");

  ModelOptions mo;
  mo.load_threads = 2;
  auto mg = test::load_on_cpu(tmp + "/a.gguf", mo);
  auto md = test::load_on_cpu(tmp + "/decoded", mo);
  const ModelWeights& w = mg->weights();
  ASSERT_TRUE(w.embed.quant);
  EXPECT_EQ(w.embed.quant->scheme, QuantScheme::kGgml);
  EXPECT_EQ(w.embed.quant->ggml_type, GgmlType::kQ8_0);
  for (const LayerWeights& L : w.layers) {
    ASSERT_TRUE(L.q_proj.quant && L.experts_gate_up.quant && L.mlp_down.quant);
    EXPECT_EQ(L.q_proj.quant->ggml_type, GgmlType::kQ5_0);
    EXPECT_EQ(L.mlp_down.quant->ggml_type, GgmlType::kQ4_0);
    EXPECT_EQ(L.experts_gate_up.quant->rows, L.experts_gate_up.shape[0] * L.experts_gate_up.shape[1]);
    // The router has no quantized path: a dense fp32 copy of the decoded rows.
    ASSERT_TRUE(L.router_proj.quant);
    EXPECT_TRUE(L.router_proj.quant->bound_dense);
    EXPECT_EQ(L.router_proj.dtype, DType::kF32);
    EXPECT_FALSE(L.input_layernorm.quant);
    EXPECT_EQ(L.input_layernorm.dtype, DType::kF32);
  }

  for (const char* dec : {"decoder_first_short", "decoder_selfcond_long"}) {
    SCOPED_TRACE(dec);
    const std::string size = std::string(dec).find("long") != std::string::npos ? "long" : "short";
    const std::vector<std::string> files = {kGolden + "/cases/encoder_" + size + ".safetensors",
                                            kGolden + "/cases/" + dec + ".safetensors"};
    NamedTensors a = run_parity_inputs(*mg, files);
    NamedTensors b = run_parity_inputs(*md, files);
    ASSERT_EQ(a.size(), b.size());
    int compared = 0;
    for (const auto& [name, want] : b) {
      const Tensor& got = a.at(name);
      ASSERT_EQ(got.shape, want.shape) << name;
      // The same weights; the quantized products sum in their own order
      // (as every quantized format's do), so the outputs agree to fp32
      // rounding noise relative to the tensor's scale, and the logits'
      // argmax exactly.
      double scale = 0, diff = 0;
      for (size_t i = 0; i < want.f.size(); ++i) {
        scale = std::max(scale, std::fabs(double(want.f[i])));
        diff = std::max(diff, std::fabs(double(want.f[i]) - double(got.f[i])));
      }
      EXPECT_LE(diff, 2e-5 * scale) << name << ": max |diff| " << diff << " at scale " << scale;
      if (name == "decoder.logits") {
        EXPECT_EQ(compare_tensors(want, got, 1e-3, 0.0).argmax_disagree, 0);
      }
      ++compared;
    }
    EXPECT_GE(compared, 10);
  }
}

TEST(GgufCheckpoint, TheConfigAndTheF32TensorsAreTheFolders) {
  const std::string tmp = dgemma_test_temp_dir("gguf_f32");
  const CheckpointSource folder = open_checkpoint(kGolden);
  write_gguf_f32(folder.config, folder.store, tmp + "/a.gguf");
  CheckpointSource g = open_checkpoint(tmp + "/a.gguf");
  EXPECT_TRUE(g.is_gguf());
  EXPECT_FALSE(folder.is_gguf());
  EXPECT_EQ(g.config.num_layers, folder.config.num_layers);
  EXPECT_EQ(g.config.layer(3).head_dim, 32);
  EXPECT_EQ(g.config.layer(3).num_kv_heads, 1);
  EXPECT_EQ(g.config.rope_full.partial_rotary_factor, folder.config.rope_full.partial_rotary_factor);
  EXPECT_EQ(g.config.layer(3).rope, &g.config.rope_full);
  for (const ExpectedTensor& ex : expected_tensors(folder.config)) {
    const TensorView* a = g.store.find(ex.name);
    const TensorView* b = folder.store.find(ex.name);
    for (size_t i = 0; !b; ++i) b = folder.store.find(ex.aliases.at(i));
    ASSERT_TRUE(a) << ex.name;
    ASSERT_EQ(a->shape(), b->shape()) << ex.name;
    ASSERT_EQ(a->nbytes(), b->nbytes()) << ex.name;
    EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes()), 0) << ex.name;
  }
  // A moved source keeps its layers' RoPE pointers on itself.
  CheckpointSource moved = std::move(g);
  EXPECT_EQ(moved.config.layer(0).rope, &moved.config.rope_sliding);
}

}  // namespace
}  // namespace dgemma
