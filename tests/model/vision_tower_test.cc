// The vision tower against the Transformers reference on golden config V
// (tests/data/golden_v, docs/model.md §7): every vision.* tap of the three
// vision cases on the real rows, on the scalar reference kernels and on the
// CPU's fast level; golden A's one-layer tower (no standardization) loads
// and runs; malformed images are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/tensor_io.h"
#include "model/tap_recorder.h"
#include "model/vision_parity.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

const std::string kData = DGEMMA_TEST_DATA;
const std::string kV = kData + "/golden_v";

// The bound for vision tensors: |Δ| <= 5e-4 + 1e-4·|ref|.
constexpr double kAtol = 5e-4, kRtol = 1e-4;

struct Errors {
  double max_abs = 0, max_excess = -1e30;  // max |Δ| and max (|Δ| − bound)
  int64_t compared = 0, outside = 0;
};

// Compares rows [0, rows) of expected (any leading shape, rows on the
// second-to-last axis) with `got` [rows, W].
Errors compare_rows(const Tensor& expected, const Tensor& got, int64_t rows) {
  Errors e;
  const int64_t w = expected.shape.back();
  EXPECT_EQ(got.shape.back(), w);
  EXPECT_EQ(got.rows(), rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < w; ++c) {
      const double ref = expected.f[size_t(r * w + c)], x = got.f[size_t(r * w + c)];
      const double d = std::fabs(ref - x), bound = kAtol + kRtol * std::fabs(ref);
      e.max_abs = std::max(e.max_abs, d);
      e.max_excess = std::max(e.max_excess, d - bound);
      ++e.compared;
      e.outside += !(d <= bound);
    }
  return e;
}

struct Level {
  const char* name;
  CpuIsa isa;
};

class VisionGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionGolden, EveryTapMatchesTheReferenceOnTheRealRows) {
  const std::string file = kV + "/cases/" + GetParam() + ".safetensors";
  const TensorStore golden = TensorStore::open_file(file);
  for (const Level level : {Level{"scalar", CpuIsa::kScalar}, Level{"fast", default_isa()}}) {
    SCOPED_TRACE(level.name);
    ModelOptions opt;
    opt.load_threads = 2;
    CpuBackendOptions cpu;
    cpu.isa = level.isa;
    auto model = test::load_on_cpu(kV, opt, cpu);
    ASSERT_TRUE(model->has_vision_tower());
    const int k = model->config().vision.pooling_kernel_size;
    std::vector<VisionInput> images = vision_inputs_from_case(golden, file, k);
    ASSERT_EQ(images.size(), 1u);
    const VisionInput& im = images[0];
    TapRecorder rec;
    model->set_observer(&rec);
    const Tensor soft = model->image_soft_tokens(im);
    model->set_observer(nullptr);
    EXPECT_EQ(soft.shape, (std::vector<int64_t>{im.n_soft, 64}));

    const int64_t n = im.pixel_values.dim(0);
    int checked = 0;
    for (const std::string& name : golden.names()) {
      if (name.rfind("vision.", 0) != 0) continue;
      const Tensor expected = tensor_from_view(*golden.find(name));
      if (name == "vision.pooled_mask") {  // exact: the first n_soft cells are real
        for (int64_t c = 0; c < expected.numel(); ++c) EXPECT_EQ(expected.i[size_t(c)], c < im.n_soft ? 1 : 0) << c;
        ++checked;
        continue;
      }
      const Tensor* got = rec.find(name);
      ASSERT_NE(got, nullptr) << "no tap " << name;
      const bool cells = name == "vision.pooled" || name == "vision.standardized" || name == "vision.soft_tokens";
      const int64_t rows = cells ? im.n_soft : n;
      const Errors e = compare_rows(expected, *got, rows);
      EXPECT_EQ(e.outside, 0) << name << ": " << e.outside << " of " << e.compared << " values beyond 5e-4 + 1e-4·|ref|"
                              << " (max |err| " << e.max_abs << ")";
      std::printf("[%s %s] %-26s max |err| %.3g\n", GetParam().c_str(), level.name, name.c_str(), e.max_abs);
      // The reference zeroes the pooled padding cells.
      if (name == "vision.pooled") {
        for (size_t k2 = size_t(im.n_soft * expected.shape.back()); k2 < expected.f.size(); ++k2)
          ASSERT_EQ(expected.f[k2], 0.0f);
      }
      ++checked;
    }
    // patch_embeddings, layer_out.0/1, pooled, pooled_mask, standardized, soft_tokens.
    EXPECT_EQ(checked, 7);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, VisionGolden, ::testing::Values("vision_png_up", "vision_jpeg_exif", "vision_wide"));

TEST(VisionGolden, TheSameTokensThroughTheParityTool) {
  auto model = test::load_on_cpu(kV);
  const std::string file = kV + "/cases/vision_wide.safetensors";
  const NamedTensors out = run_vision_case(*model, file);
  const TensorStore golden = TensorStore::open_file(file);
  for (const std::string& name : golden.names()) {
    if (name.rfind("vision.", 0) != 0) continue;
    ASSERT_TRUE(out.count(name)) << name;
    EXPECT_EQ(out.at(name).shape, golden.find(name)->shape()) << name;
  }
  // Rows past the real patches are zero, the pooled mask holds 66 real cells.
  const Tensor& pe = out.at("vision.patch_embeddings");
  EXPECT_EQ(pe.f[size_t(594 * 32)], 0.0f);
  EXPECT_NE(pe.f[size_t(593 * 32)], 0.0f);
  int real = 0;
  for (int32_t m : out.at("vision.pooled_mask").i) real += m;
  EXPECT_EQ(real, 66);
}

// A VisionInput for `grid_h` x `grid_w` patches of width 3·p², values in [0, 1).
VisionInput synthetic_image(int64_t grid_h, int64_t grid_w, int p, int k) {
  VisionInput im;
  const int64_t n = grid_h * grid_w;
  im.pixel_values = Tensor::f32({n, 3 * p * p});
  for (size_t i = 0; i < im.pixel_values.f.size(); ++i) im.pixel_values.f[i] = float((i * 37) % 255) / 255.0f;
  im.positions = Tensor::i32({n, 2});
  for (int64_t r = 0; r < n; ++r) {
    im.positions.i[size_t(2 * r)] = int32_t(r % grid_w);
    im.positions.i[size_t(2 * r + 1)] = int32_t(r / grid_w);
  }
  im.grid_h = grid_h;
  im.grid_w = grid_w;
  im.n_soft = (grid_h / k) * (grid_w / k);
  return im;
}

TEST(VisionTower, GoldenATowerLoadsAndRuns) {
  auto model = test::load_on_cpu(kData + "/golden_a");
  ASSERT_TRUE(model->has_vision_tower());
  const VisionConfig& v = model->config().vision;
  EXPECT_EQ(v.hidden_size, 8);
  EXPECT_EQ(v.num_layers, 1);
  EXPECT_EQ(v.patch_size, 2);
  EXPECT_EQ(v.pooling_kernel_size, 2);
  EXPECT_FALSE(*v.standardize);
  EXPECT_TRUE(model->weights().vision.std_bias.empty());
  EXPECT_TRUE(model->weights().skipped.empty());
  TapRecorder rec;
  model->set_observer(&rec);
  const Tensor soft = model->image_soft_tokens(synthetic_image(4, 6, 2, 2));
  model->set_observer(nullptr);
  EXPECT_EQ(soft.shape, (std::vector<int64_t>{6, 64}));
  EXPECT_EQ(rec.find("vision.standardized"), nullptr);  // no standardization in this tower
  ASSERT_NE(rec.find("vision.pooled"), nullptr);
  for (float x : soft.f) EXPECT_TRUE(std::isfinite(x));
}

// The max |Δ| of the soft tokens of vision_png_up against the reference,
// for a model loaded with `opt`.
double soft_token_error(const ModelOptions& opt, DiffusionGemma** keep = nullptr) {
  static std::unique_ptr<DiffusionGemma> model;
  model = test::load_on_cpu(kV, opt);
  if (keep) *keep = model.get();
  const std::string file = kV + "/cases/vision_png_up.safetensors";
  const TensorStore golden = TensorStore::open_file(file);
  const VisionInput im = vision_inputs_from_case(golden, file, 3)[0];
  const Tensor soft = model->image_soft_tokens(im);
  const Tensor ref = tensor_from_view(*golden.find("vision.soft_tokens"));
  double m = 0;
  for (size_t k = 0; k < ref.f.size(); ++k) m = std::max(m, double(std::fabs(ref.f[k] - soft.f[k])));
  return m;
}

// --precision bf16 holds the tower's weights in bf16 and --quantize covers
// its linears like the text model's (docs/model.md §7.8); the position
// table, norms and standardization vectors stay plain. The soft tokens
// (std about 0.8, |value| up to 3.5) then move by the weights' rounding:
// a few hundredths (bf16 0.03, int8 0.06), bounded here at 0.15.
TEST(VisionTower, Bf16AndQuantizedTowers) {
  DiffusionGemma* m = nullptr;
  ModelOptions bf16;
  bf16.precision = WeightPrecision::kBF16;
  const double e_bf16 = soft_token_error(bf16, &m);
  EXPECT_EQ(m->weights().vision.layers[0].q_proj.dtype, DType::kBF16);
  EXPECT_EQ(m->weights().vision.position_x.dtype, DType::kBF16);
  EXPECT_GT(e_bf16, 0.0);
  EXPECT_LT(e_bf16, 0.15);
  ModelOptions q8;
  q8.quantize = LoadQuantization::kQ8;
  const double e_q8 = soft_token_error(q8, &m);
  const VisionWeights& w = m->weights().vision;
  EXPECT_NE(w.layers[1].mlp_down.quant, nullptr);
  EXPECT_NE(w.embed_projection.quant, nullptr);
  EXPECT_EQ(w.position_table.quant, nullptr);
  EXPECT_EQ(w.std_scale.quant, nullptr);
  EXPECT_EQ(w.layers[0].q_norm.quant, nullptr);
  EXPECT_GT(e_q8, 0.0);
  EXPECT_LT(e_q8, 0.15);
  std::printf("soft tokens max |err|: bf16 weights %.3g, q8 weights %.3g\n", e_bf16, e_q8);
}

TEST(VisionTower, RefusesImagesThatDoNotFit) {
  auto model = test::load_on_cpu(kV);
  auto error_of = [&](const VisionInput& im) -> std::string {
    try {
      model->image_soft_tokens(im);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  VisionInput wrong_patch = synthetic_image(3, 3, 2, 3);  // 12 values per patch, the tower takes 48
  EXPECT_NE(error_of(wrong_patch).find("pixel_values must be F32 [n, 48]"), std::string::npos) << error_of(wrong_patch);
  VisionInput ragged = synthetic_image(3, 4, 4, 3);  // 4 columns: not a multiple of the 3x3 pooling
  ragged.n_soft = 1;
  EXPECT_NE(error_of(ragged).find("not a multiple of the pooling kernel 3"), std::string::npos);
  VisionInput count = synthetic_image(3, 6, 4, 3);
  count.n_soft = 3;
  EXPECT_NE(error_of(count).find("n_soft 3 is not"), std::string::npos);
  VisionInput far = synthetic_image(3, 3, 4, 3);
  far.positions.i[0] = 5;  // column 5 in a 3-wide grid
  EXPECT_NE(error_of(far).find("outside the 3x3 grid"), std::string::npos);
  VisionInput beyond = synthetic_image(3, 258, 4, 3);  // columns up to 257: the table has 256 rows
  EXPECT_NE(error_of(beyond).find("beyond the 256 rows of the position table"), std::string::npos);
}

TEST(VisionTower, TextOnlyModelRefusesImages) {
  // Golden A's config without its vision_config: the stored tower is skipped.
  json::Value root = json::parse(read_text_file(kData + "/golden_a/config.json"));
  json::Object kept;
  for (auto& [key, value] : root.as_object())
    if (key != "vision_config") kept.emplace_back(key, value);
  const std::string dir = dgemma_test_temp_dir("text_only_config");
  const std::string config = dir + "/config.json";
  write_file_atomically(config, json::dump(json::Value(kept)));
  auto model = test::load_on_cpu(kData + "/golden_a", config, {});
  EXPECT_FALSE(model->has_vision_tower());
  EXPECT_EQ(model->weights().skipped.size(), 16u);
  try {
    model->image_soft_tokens(synthetic_image(2, 2, 2, 2));
    ADD_FAILURE() << "a model without a tower took an image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no vision_config"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dgemma
