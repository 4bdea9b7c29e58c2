// The vision vocabulary on the CUDA backend (ops/op.h; docs/cuda.md §3):
// rope with 2-D positions, affine, pool_cells, scatter_rows, the image-block
// attention masks in the flash, tensor-core and products kernels, and the
// vision tower's attention (mask none, head dim 72, which the dot mode runs on
// the tensor cores zero-padded to 80), each against its formula
// (ops/vision_ops_formula.h) in every mode; and the tower's ops chained with
// their activations left on the device. On a GPU or the emulated device of a
// DGEMMA_CUDA=EMULATE build (scripts/build.sh asan); skipped without one.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/vision_ops_formula.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "cuda/require_device.h"
#endif

namespace dgemma {
namespace {

#if !DGEMMA_HAVE_CUDA

TEST(CudaVisionOps, NotBuilt) { GTEST_SKIP() << "this build has no CUDA backend (nvcc not found or DGEMMA_CUDA=OFF)"; }

#else

using testing::AttentionShape;
using testing::VisionCase;

class CudaVisionOps : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    backend_ = std::make_unique<CudaBackend>(parse_cuda_spec(GetParam()));
  }
  bool dot() const { return backend_->options().bf16_dot; }
  // Whether a launch after number `after` ran `kernel`.
  bool launched(const std::string& kernel, uint64_t after) const {
    for (const CudaLaunchRecord& r : backend_->recent_launches())
      if (r.kernel == kernel && r.seq > after) return true;
    return false;
  }
  uint64_t last_launch() const {
    const std::vector<CudaLaunchRecord> log = backend_->recent_launches();
    return log.empty() ? 0 : log.back().seq;
  }
  std::unique_ptr<CudaBackend> backend_;
};

TEST_P(CudaVisionOps, RopeWithTwoDimensionalPositions) {
  testing::expect_case(*backend_, testing::rope_2d_case(1, 5, 3, 8, 2, 100.0));
  testing::expect_case(*backend_, testing::rope_2d_case(2, 7, 2, 72, 18, 100.0));
  testing::expect_case(*backend_, testing::rope_2d_case(3, 4, 2, 16, 2, 10000.0));  // fewer pairs than d/4
}

TEST_P(CudaVisionOps, Affine) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    testing::expect_case(*backend_, testing::affine_case(10, 3, 5, dt));
    testing::expect_case(*backend_, testing::affine_case(11, 9, 1152, dt));
  }
}

TEST_P(CudaVisionOps, PoolCells) {
  testing::expect_case(*backend_, testing::pool_cells_case(20, 90, 40, 12, 1.0f / 3.0f));
  testing::expect_case(*backend_, testing::pool_cells_case(21, 1, 300, 1, 1.0f));
  testing::expect_case(*backend_, testing::pool_cells_case(22, 0, 7, 3, 1.0f));  // no rows: zeros
}

TEST_P(CudaVisionOps, ScatterRows) {
  testing::expect_case(*backend_, testing::scatter_rows_case(30, 20, 7, 33));
  testing::expect_case(*backend_, testing::scatter_rows_case(31, 5, 5, 300));
  testing::expect_case(*backend_, testing::scatter_rows_case(32, 6, 0, 4));  // nothing to place: the base
}

// Both block masks, and the kernels that take them: the flash kernel (fp32),
// the tensor-core kernel (the dot mode, head dims 8, 16 and 72) and the
// products path (cublas-attention).
TEST_P(CudaVisionOps, ImageBlockMasks) {
  uint32_t seed = 40;
  for (const AttentionShape& a : testing::block_mask_shapes()) {
    const uint64_t before = last_launch();
    testing::expect_case(*backend_, testing::attention_case(seed++, a, dot()), dot());
    const char* kernel = backend_->options().cublas_attention ? "attention.softmax"
                         : dot()                              ? "attention.tensor_cores"
                                                              : "attention.flash";
    EXPECT_TRUE(launched(kernel, before)) << "d=" << a.d;
  }
}

// The tower's attention: no mask, no cache, head dims 72 and 8 (the tiny
// golden model's), query rows over several of the kernels' tiles.
TEST_P(CudaVisionOps, VisionAttention) {
  for (int64_t d : {72, 8}) {
    AttentionShape a;
    a.M = 90;  // several of the kernels' query (16, 32 rows) and key (32) tiles
    a.Hq = a.Hk = 2;
    a.d = d;
    const uint64_t before = last_launch();
    testing::expect_case(*backend_, testing::attention_case(uint32_t(50 + d), a, dot()), dot());
    const char* kernel = backend_->options().cublas_attention ? "attention.softmax"
                         : dot()                              ? "attention.tensor_cores"
                                                              : "attention.flash";
    EXPECT_TRUE(launched(kernel, before)) << "d=" << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaVisionOps,
                         ::testing::Values("cuda", "cuda:debug", "cuda:bf16-dot", "cuda:debug,bf16-dot",
                                           "cuda:cublas-attention"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// affine → pool_cells → scatter_rows with every activation left on the device
// (docs/cuda.md §1): nothing comes back to the host until the result is read,
// and the result is the formulas'.
TEST(CudaVisionResidency, TheTowerOpsChainOnTheDevice) {
  REQUIRE_CUDA_DEVICE();
  CudaBackend gpu(parse_cuda_spec("cuda"));
  testing::TowerOpsChain chain;
  chain.run(gpu);
  EXPECT_EQ(gpu.device_traffic()->d2h_bytes, 0) << "an activation came back to the host between the ops";
  EXPECT_TRUE(chain.outputs_on_device());
  chain.expect_result();
}

#endif

}  // namespace
}  // namespace dgemma
