// A bf16 checkpoint run in the fp32 mode is the Transformers reference with
// dtype=float32: the weights are upcast exactly and everything else — the
// embedding scale √H and the self-conditioning softmax (docs/model.md §1.3, §3.3) — is
// float32. So the fp32 mode on a bf16 checkpoint must give the same numbers
// as the fp32 mode on the same weights stored as F32 (which golden_forward_test
// ties to the reference), and the same generate() trajectory. The bf16 modes
// are the reference in bf16: √H and the self-conditioning inputs rounded to
// bf16, whatever the checkpoint's storage dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "generate/draws.h"
#include "generate/generate.h"
#include "generate/generation_config.h"
#include "io/safetensors.h"
#include "io/tensor_io.h"
#include "model/diffusion_gemma.h"
#include "model/parity.h"
#include "checkpoint/tensor_names.h"
#include "random_checkpoint.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

namespace fs = std::filesystem;
const std::string kGoldenA = std::string(DGEMMA_TEST_DATA) + "/golden_a";

// Copies checkpoint `src` into a new folder with every float tensor stored as
// `dtype` (F32 -> BF16 rounds to nearest even; BF16 -> F32 is exact).
std::string converted_copy(const std::string& src, const std::string& tag, DType dtype) {
  const std::string dir = dgemma_test_temp_dir(tag);
  for (const char* f : {"config.json", "generation_config.json"})
    if (fs::exists(src + "/" + f)) fs::copy_file(src + "/" + f, dir + "/" + f, fs::copy_options::overwrite_existing);
  auto file = SafetensorsFile::open(src + "/model.safetensors");
  SafetensorsWriter w;
  for (const TensorInfo& info : file->tensors()) {
    const TensorView v = file->view(info);
    std::vector<float> x(size_t(v.numel()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = v.at_f32(i);
    if (dtype == DType::kBF16) {
      std::vector<uint16_t> b(x.size());
      for (size_t i = 0; i < x.size(); ++i) b[i] = f32_to_bf16(x[i]);
      w.add(info.name, DType::kBF16, info.shape, b.data());
    } else {
      w.add_f32(info.name, info.shape, x.data());
    }
  }
  w.write(dir + "/model.safetensors");
  return dir;
}

std::unique_ptr<DiffusionGemma> load(const std::string& dir, WeightPrecision precision) {
  ModelOptions o;
  o.load_threads = 2;
  o.precision = precision;
  return test::load_on_cpu(dir, o);
}

// Max |a - b| over every tensor the parity tool writes for the golden cases.
double max_parity_difference(DiffusionGemma& a, DiffusionGemma& b, const std::vector<std::string>& cases) {
  const NamedTensors ta = run_parity_inputs(a, cases), tb = run_parity_inputs(b, cases);
  EXPECT_EQ(ta.size(), tb.size());
  double worst = 0;
  for (const auto& [name, t] : ta) {
    auto it = tb.find(name);
    if (it == tb.end()) {
      ADD_FAILURE() << "missing " << name;
      continue;
    }
    const CompareResult r = compare_tensors(t, it->second, 0.0, 0.0);
    worst = std::max(worst, r.max_abs);
    EXPECT_LE(r.max_abs, 1e-5) << name;
  }
  return worst;
}

std::vector<std::vector<std::string>> golden_case_sets() {
  const std::string c = kGoldenA + "/cases/";
  std::vector<std::vector<std::string>> sets;
  for (const char* size : {"short", "long"}) {
    sets.push_back({c + "encoder_" + size + ".safetensors", c + "decoder_first_" + size + ".safetensors"});
    sets.push_back({c + "encoder_" + size + ".safetensors", c + "decoder_selfcond_" + size + ".safetensors"});
  }
  return sets;
}

class Bf16Checkpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bf16_dir_ = new std::string(converted_copy(kGoldenA, "golden_a_bf16", DType::kBF16));
    f32_dir_ = new std::string(converted_copy(*bf16_dir_, "golden_a_bf16_as_f32", DType::kF32));
  }
  static void TearDownTestSuite() {
    delete bf16_dir_;
    delete f32_dir_;
  }
  static std::string* bf16_dir_;
  static std::string* f32_dir_;
};
std::string* Bf16Checkpoint::bf16_dir_ = nullptr;
std::string* Bf16Checkpoint::f32_dir_ = nullptr;

TEST_F(Bf16Checkpoint, Fp32ModeEqualsTheWeightsUpcastOnDisk) {
  for (const auto& cases : golden_case_sets()) {
    SCOPED_TRACE(cases.back());
    auto stored_bf16 = load(*bf16_dir_, WeightPrecision::kAsStored);
    auto stored_f32 = load(*f32_dir_, WeightPrecision::kAsStored);
    const double worst = max_parity_difference(*stored_bf16, *stored_f32, cases);
    std::printf("fp32 mode, bf16 vs F32 storage: max |diff| %.3g\n", worst);
  }
}

TEST_F(Bf16Checkpoint, Bf16ModeDoesNotDependOnTheStorageDtype) {
  for (const auto& cases : golden_case_sets()) {
    SCOPED_TRACE(cases.back());
    auto stored_bf16 = load(*bf16_dir_, WeightPrecision::kBF16);
    auto stored_f32 = load(*f32_dir_, WeightPrecision::kBF16);
    max_parity_difference(*stored_bf16, *stored_f32, cases);
  }
}

// The whole generate() trajectory (steps per canvas, every committed token)
// is the same: nothing in the fp32 mode depends on the storage dtype.
TEST_F(Bf16Checkpoint, Fp32ModeGenerationIsTheSame) {
  GenerationConfig config = load_generation_config(kGoldenA).config;
  config.max_new_tokens = 3 * 8;
  std::vector<GenerationResult> results;
  for (const std::string* dir : {bf16_dir_, f32_dir_}) {
    auto model = load(*dir, WeightPrecision::kAsStored);
    RandomDraws draws(11);
    results.push_back(generate(*model, {2, 17, 301, 44, 9}, config, draws));
  }
  EXPECT_EQ(results[0].sequences, results[1].sequences);
  EXPECT_EQ(results[0].steps_per_canvas, results[1].steps_per_canvas);
  EXPECT_GE(results[0].decoder_forwards, 2);
}

// √H is float32 in the fp32 mode and rounded to bf16 in the bf16 modes. At
// H = 96 they differ (9.79796 vs 9.8125); golden A's H = 64 cannot tell.
TEST(EmbeddingScale, FollowsThePrecisionNotTheStorageDtype) {
  testing::RandomSpec spec;
  spec.hidden = 96;
  spec.dtype = DType::kBF16;
  const std::string dir = testing::write_random_checkpoint("scale_h96", spec);
  auto file = SafetensorsFile::open(dir + "/model.safetensors");
  const TensorInfo* info = nullptr;
  for (const ExpectedTensor& t : expected_tensors(load_model_config(dir + "/config.json")))
    if (t.component == Component::kEmbedding) info = file->find(t.name);
  ASSERT_NE(info, nullptr);
  const TensorView table = file->view(*info);
  const int32_t token = 5;
  const float sqrt_h = float(std::sqrt(96.0));
  ASSERT_NE(round_bf16(sqrt_h), sqrt_h);
  for (const WeightPrecision p : {WeightPrecision::kAsStored, WeightPrecision::kBF16}) {
    auto model = load(dir, p);
    struct Tap : OpObserver {
      Tensor embeddings;
      void on_tap(std::string_view name, const Tensor& t) override {
        if (name == "encoder.embeddings") embeddings = t;
      }
    } tap;
    model->set_observer(&tap);
    model->encode({token});
    ASSERT_EQ(tap.embeddings.numel(), 96);
    const float scale = p == WeightPrecision::kBF16 ? round_bf16(sqrt_h) : sqrt_h;
    for (int64_t h = 0; h < 96; ++h)
      ASSERT_EQ(tap.embeddings.f[size_t(h)], table.at_f32(size_t(token * 96 + h)) * scale)
          << "precision " << int(p) << ", h " << h;
  }
}

}  // namespace
}  // namespace dgemma
