// Weight binding: tied aliases, conflicts and the all-at-once problem report
// (docs/model.md §4, docs/formats.md §0.1).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "dgemma/error.h"
#include "io/tensor_io.h"
#include "model/diffusion_gemma.h"
#include "model/weights.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

namespace fs = std::filesystem;
const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

// Copies golden A to `dir`, letting `edit` rename, drop, reshape or add tensors.
// edit(name, shape, data) returns false to drop the tensor.
using Edit = std::function<bool(std::string& name, std::vector<int64_t>& shape, std::vector<float>& data)>;
std::string copy_golden(const std::string& tag, const Edit& edit,
                        const std::vector<std::pair<std::string, std::vector<float>>>& extra = {}) {
  const std::string dir = dgemma_test_temp_dir("bind_" + tag);
  fs::copy_file(kGolden + "/config.json", dir + "/config.json");
  TensorStore src = TensorStore::open_dir(kGolden);
  SafetensorsWriter w;
  for (const auto& n : src.names()) {
    Tensor t = tensor_from_view(*src.find(n));
    std::string name = n;
    std::vector<int64_t> shape = t.shape;
    if (!edit(name, shape, t.f)) continue;
    w.add_f32(name, shape, t.f.data());
  }
  for (const auto& [name, data] : extra) w.add_f32(name, {int64_t(data.size())}, data.data());
  w.write(dir + "/model.safetensors");
  return dir;
}

std::string bind_error(const std::string& dir) {
  try {
    ModelConfig c = load_model_config(dir + "/config.json");
    TensorStore s = TensorStore::open_dir(dir);
    bind_weights(c, s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WeightBinding, EncoderSideAloneIsAccepted) {
  // A re-saved checkpoint holding only the encoder copy of a tied tensor.
  const std::string dir = copy_golden("encoder_only", [](std::string& n, auto&, auto&) {
    if (n == "model.decoder.layers.1.mlp.up_proj.weight")
      n = "model.encoder.language_model.layers.1.mlp.up_proj.weight";
    if (n == "model.decoder.embed_tokens.weight") n = "lm_head.weight";
    return true;
  });
  EXPECT_EQ(bind_error(dir), "");
  auto a = test::load_on_cpu(kGolden), b = test::load_on_cpu(dir);
  std::vector<int32_t> prompt = {2, 5, 9, 33};
  a->encode(prompt);
  b->encode(prompt);
  std::vector<int32_t> canvas(size_t(a->canvas_length()), 7);
  std::vector<float> la(size_t(a->canvas_length() * a->vocab_size())), lb(la.size());
  a->decode(canvas.data(), nullptr, la.data());
  b->decode(canvas.data(), nullptr, lb.data());
  EXPECT_EQ(la, lb);
}

TEST(WeightBinding, EqualCopiesOnBothSidesAreAccepted) {
  TensorStore src = TensorStore::open_dir(kGolden);
  Tensor norm = tensor_from_view(*src.find("model.decoder.norm.weight"));
  const std::string dir = copy_golden("both_equal", [](auto&, auto&, auto&) { return true; },
                                      {{"model.encoder.language_model.norm.weight", norm.f}});
  EXPECT_EQ(bind_error(dir), "");
}

TEST(WeightBinding, DifferingCopiesAreAnError) {
  TensorStore src = TensorStore::open_dir(kGolden);
  Tensor norm = tensor_from_view(*src.find("model.decoder.norm.weight"));
  norm.f[3] += 1.0f;
  const std::string dir = copy_golden("both_differ", [](auto&, auto&, auto&) { return true; },
                                      {{"model.encoder.language_model.norm.weight", norm.f}});
  const std::string err = bind_error(dir);
  EXPECT_NE(err.find("1 tied copies that differ"), std::string::npos) << err;
  EXPECT_NE(err.find("model.encoder.language_model.norm.weight differs from its tied tensor model.decoder.norm.weight"),
            std::string::npos)
      << err;
}

TEST(WeightBinding, AllProblemsAreReportedAtOnce) {
  const std::string dir =
      copy_golden("many_problems", [](std::string& n, std::vector<int64_t>& shape, std::vector<float>& data) {
        if (n == "model.decoder.layers.0.self_attn.q_proj.weight") return false;      // missing
        if (n == "model.decoder.layers.2.router.scale") return false;                 // missing
        if (n == "model.encoder.language_model.layers.3.layer_scalar") return false;  // missing (not tied)
        if (n == "model.decoder.layers.1.mlp.down_proj.weight") {                     // misshapen
          shape = {int64_t(data.size())};
        }
        if (n == "model.decoder.layers.0.input_layernorm.weight") n = "model.decoder.layers.0.typo_layernorm.weight";
        return true;
      });
  const std::string err = bind_error(dir);
  EXPECT_NE(err.find("4 missing tensor(s)"), std::string::npos) << err;
  EXPECT_NE(err.find("model.decoder.layers.0.self_attn.q_proj.weight [64, 64]"), std::string::npos) << err;
  EXPECT_NE(err.find("model.decoder.layers.2.router.scale [64]"), std::string::npos) << err;
  EXPECT_NE(err.find("model.encoder.language_model.layers.3.layer_scalar [1]"), std::string::npos) << err;
  EXPECT_NE(err.find("model.decoder.layers.0.input_layernorm.weight [64]"), std::string::npos) << err;
  EXPECT_NE(err.find("1 tensor(s) with the wrong shape"), std::string::npos) << err;
  EXPECT_NE(err.find("model.decoder.layers.1.mlp.down_proj.weight has shape [6144], expected [64, 96]"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("1 unexpected tensor(s)"), std::string::npos) << err;
  EXPECT_NE(err.find("model.decoder.layers.0.typo_layernorm.weight"), std::string::npos) << err;
}

TEST(WeightBinding, LayerScalarsStaySeparatePerPass) {
  auto m = test::load_on_cpu(kGolden);
  for (const LayerWeights& L : m->weights().layers) {
    EXPECT_NE(L.encoder_layer_scalar.at(0), L.decoder_layer_scalar.at(0));  // golden A draws them differently
    EXPECT_NE(L.encoder_layer_scalar.name, L.decoder_layer_scalar.name);
  }
}

TEST(WeightBinding, Bf16PrecisionConvertsWeights) {
  ModelOptions o;
  o.precision = WeightPrecision::kBF16;
  auto m = test::load_on_cpu(kGolden, o);
  EXPECT_EQ(m->weights().embed.dtype, DType::kBF16);
  EXPECT_EQ(m->weights().layers[0].experts_gate_up.dtype, DType::kBF16);
}

}  // namespace
}  // namespace dgemma

namespace dgemma {
namespace {

// ModelOptions::load_progress sees every expected tensor: monotone element
// counts that end at the total, with and without quantization at load.
TEST(WeightBinding, LoadProgressReachesTheTotal) {
  for (const LoadQuantization q : {LoadQuantization::kNone, LoadQuantization::kNf4}) {
    std::vector<std::pair<int64_t, int64_t>> calls;
    ModelOptions o;
    o.load_threads = 2;
    o.quantize = q;
    o.load_progress = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
    auto m = test::load_on_cpu(kGolden, o);
    ASSERT_EQ(calls.size(), m->weights().bound.size());
    for (size_t i = 1; i < calls.size(); ++i) {
      EXPECT_GT(calls[i].first, calls[i - 1].first);
      EXPECT_EQ(calls[i].second, calls[0].second);
    }
    EXPECT_EQ(calls.back().first, calls.back().second);
  }
}

}  // namespace
}  // namespace dgemma
