// The reference generate() runs of golden A replayed with the model on the
// CUDA backend in its device-resident mode (the requirement: "the golden generate()
// replays (with recorded self-conditioning) agree on the device backend").
// Same check as tests/generate/real_model_replay_test.cc on the CPU: the
// recorded draws and each step's recorded self-conditioning input; every
// canvas, acceptance and stop decision and the committed canvases are ours.
// On a GPU or the emulated device of a DGEMMA_CUDA=EMULATE build; skipped
// without one.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../generate/golden_case.h"
#include "../generate/step_recorder.h"
#include "generate/generate.h"
#include "generate/recorded_self_conditioning.h"
#include "model/diffusion_gemma.h"
#include "cpu_model.h"

#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "cuda/require_device.h"
#endif

namespace dgemma {
namespace {

#if !DGEMMA_HAVE_CUDA

TEST(CudaReplay, NotBuilt) { GTEST_SKIP() << "this build has no CUDA backend (nvcc not found or DGEMMA_CUDA=OFF)"; }

#else

using testing::GoldenCase;

class CudaReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaReplay, MatchesReference) {
  REQUIRE_CUDA_DEVICE();
  const GoldenCase golden(GetParam());
  const GenerationConfig config = testing::effective_config(golden);
  auto model = test::load_on_cpu(testing::golden_a_dir());
  CudaBackend gpu;
  model->set_backend(gpu);
  RecordedSelfConditioning anchored(*model, golden.tensors_path());
  ReplayDraws draws(golden.tensors_path());
  testing::StepRecorder recorder;
  const GenerationResult result = generate(anchored, golden.ints32("input_ids"), config, draws, &recorder);
  EXPECT_NO_THROW(draws.expect_exhausted());
  EXPECT_EQ(result.sequences, golden.ints32("output.sequences"));
  // The activations stayed on the device: the weights went up once, and a
  // step moved far less than one copy of every op's output would.
  EXPECT_GT(gpu.traffic().weight_h2d_bytes, 0);
  EXPECT_GT(gpu.traffic().kernel_launches, 0);

  testing::expect_run_matches(result, recorder, golden, 1e-3);
}

// generate_long (three canvases) is left to the CPU replay: on the emulated
// device under the sanitizers each case takes about 40 s of CI time.
INSTANTIATE_TEST_SUITE_P(GoldenA, CudaReplay, ::testing::Values("generate_short", "generate_eos"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

#endif  // DGEMMA_HAVE_CUDA

}  // namespace
}  // namespace dgemma
