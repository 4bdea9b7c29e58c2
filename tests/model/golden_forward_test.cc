// Parity of the CPU forward pass with the Transformers reference on golden
// config A (tests/data/golden_a, docs/model.md §5.4 items 2-4): encoder hidden states,
// router choices and KV cache; decoder passes without and with
// self-conditioning, for a prompt shorter and one longer than the window.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "io/tensor_io.h"
#include "model/diffusion_gemma.h"
#include "model/parity.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

const std::string kDir = std::string(DGEMMA_TEST_DATA) + "/golden_a";
std::string case_file(const std::string& name) { return kDir + "/cases/" + name + ".safetensors"; }

// Tolerances of golden/README.md "Tolerances observed".
double tolerance_for(const std::string& name) {
  if (name.find(".top_k_index") != std::string::npos) return 0.0;
  if (name.rfind("cache.", 0) == 0 || name.find(".embeddings") != std::string::npos ||
      name.find("layer_in.0") != std::string::npos || name.find("layer_out.0") != std::string::npos ||
      name.find("self_conditioning_out") != std::string::npos || name.find("router.0.") != std::string::npos)
    return 1e-4;
  return 1e-3;
}

std::string family(const std::string& name) {
  std::string f = name;
  for (char& c : f)
    if (c >= '0' && c <= '9') c = '#';
  return f;
}

struct Summary {
  std::map<std::string, double> max_err;
};

void check_against(const NamedTensors& got, const std::vector<std::string>& golden_files, Summary& summary) {
  int compared = 0;
  for (const auto& gf : golden_files) {
    TensorStore expected = TensorStore::open_file(gf);
    for (const auto& name : expected.names()) {
      if (name == "input_ids" || name == "position_ids" || name == "decoder_input_ids" ||
          name == "decoder_position_ids" || name == "self_conditioning_logits")
        continue;
      auto it = got.find(name);
      ASSERT_NE(it, got.end()) << "dgemma produced no tensor " << name << " (" << gf << ")";
      Tensor e = tensor_from_view(*expected.find(name));
      const Tensor& a = it->second;
      ASSERT_EQ(e.shape, a.shape) << name;
      const double tol = tolerance_for(name);
      CompareResult r = compare_tensors(e, a, tol, 0.0);
      EXPECT_EQ(r.mismatches, 0) << name << ": max abs error " << r.max_abs << " > " << tol;
      if (name == "decoder.logits") {
        EXPECT_EQ(r.argmax_disagree, 0) << "logits argmax differs";
      }
      double& m = summary.max_err[family(name)];
      m = std::max(m, r.max_abs);
      ++compared;
    }
  }
  EXPECT_GE(compared, 20);
}

class GoldenForward : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenForward, MatchesReference) {
  const std::string size = GetParam();
  for (const std::string config : {"config.json", "config_flat_global_keys.json"}) {
    SCOPED_TRACE(config);
    ModelOptions opt;
    opt.load_threads = 2;
    auto model = test::load_on_cpu(kDir, kDir + "/" + config, opt);
    Summary summary;
    NamedTensors first = run_parity_inputs(*model, {case_file("encoder_" + size), case_file("decoder_first_" + size)});
    check_against(first, {case_file("encoder_" + size), case_file("decoder_first_" + size)}, summary);
    // The self-conditioned case reuses the same encoder cache.
    NamedTensors sc = run_parity_inputs(*model, {case_file("encoder_" + size), case_file("decoder_selfcond_" + size)});
    check_against(sc, {case_file("decoder_selfcond_" + size)}, summary);
    for (const auto& [fam, err] : summary.max_err)
      std::printf("[%s %s] max |err| %-40s %.3g\n", size.c_str(), config.c_str(), fam.c_str(), err);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenForward, ::testing::Values("short", "long"));

}  // namespace
}  // namespace dgemma
