// The vision vocabulary on the OpenCL backend (ops/op.h; docs/opencl.md §3):
// rope with 2-D positions, affine, pool_cells, scatter_rows, the image-block
// attention masks and the vision tower's attention (mask none, head dims 72
// and 8), each against its formula (ops/vision_ops_formula.h); and the
// tower's ops chained with their activations left on the device. On PoCL in
// CI; skipped on a machine without an OpenCL device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/vision_ops_formula.h"
#include "support/test_rng.h"

#if DGEMMA_HAVE_OPENCL
#include "backend/opencl/opencl_backend.h"
#include "opencl/opencl_test_support.h"
#endif

namespace dgemma {
namespace {

#if DGEMMA_HAVE_OPENCL

using testing::AttentionShape;
using testing::VisionCase;

// A backend on the test device, or a skip.
#define REQUIRE_OPENCL_BACKEND(cl)                                          \
  std::unique_ptr<OpenClBackend> cl##_owner = testing::make_test_backend(); \
  if (!cl##_owner) GTEST_SKIP() << "no OpenCL device here";                 \
  OpenClBackend& cl = *cl##_owner

TEST(OpenClVisionOps, RopeWithTwoDimensionalPositions) {
  REQUIRE_OPENCL_BACKEND(cl);
  testing::expect_case(cl, testing::rope_2d_case(1, 5, 3, 8, 2, 100.0));
  testing::expect_case(cl, testing::rope_2d_case(2, 7, 2, 72, 18, 100.0));
  testing::expect_case(cl, testing::rope_2d_case(3, 4, 2, 16, 2, 10000.0));  // fewer pairs than d/4
}

TEST(OpenClVisionOps, Affine) {
  REQUIRE_OPENCL_BACKEND(cl);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    testing::expect_case(cl, testing::affine_case(10, 3, 5, dt));
    testing::expect_case(cl, testing::affine_case(11, 9, 1152, dt));
  }
}

TEST(OpenClVisionOps, PoolCells) {
  REQUIRE_OPENCL_BACKEND(cl);
  testing::expect_case(cl, testing::pool_cells_case(20, 90, 40, 12, 1.0f / 3.0f));
  testing::expect_case(cl, testing::pool_cells_case(21, 1, 300, 1, 1.0f));
  testing::expect_case(cl, testing::pool_cells_case(22, 0, 7, 3, 1.0f));  // no rows: zeros
}

TEST(OpenClVisionOps, ScatterRows) {
  REQUIRE_OPENCL_BACKEND(cl);
  testing::expect_case(cl, testing::scatter_rows_case(30, 20, 7, 33));
  testing::expect_case(cl, testing::scatter_rows_case(31, 5, 5, 300));
  testing::expect_case(cl, testing::scatter_rows_case(32, 6, 0, 4));  // nothing to place: the base
}

TEST(OpenClVisionOps, ImageBlockMasks) {
  REQUIRE_OPENCL_BACKEND(cl);
  uint32_t seed = 40;
  for (const AttentionShape& a : testing::block_mask_shapes())
    testing::expect_case(cl, testing::attention_case(seed++, a));
}

// The tower's attention: no mask, no cache, head dims 72 and 8 (the tiny
// golden model's).
TEST(OpenClVisionOps, VisionAttention) {
  REQUIRE_OPENCL_BACKEND(cl);
  for (int64_t d : {72, 8}) {
    AttentionShape a;
    a.M = 90;  // several of the kernels' query (16, 32 rows) and key (32) tiles
    a.Hq = a.Hk = 2;
    a.d = d;
    testing::expect_case(cl, testing::attention_case(uint32_t(50 + d), a));
  }
}

// affine → pool_cells → scatter_rows with every activation left on the device
// (docs/opencl.md §1): nothing comes back to the host until the result is
// read, and the result is the formulas'.
TEST(OpenClVisionOps, TheTowerOpsChainOnTheDevice) {
  REQUIRE_OPENCL_BACKEND(cl);
  testing::TowerOpsChain chain;
  cl.reset_traffic();
  chain.run(cl);
  EXPECT_EQ(cl.device_traffic()->d2h_bytes, 0) << "an activation came back to the host between the ops";
  EXPECT_TRUE(chain.outputs_on_device());
  chain.expect_result();
}

#else

TEST(OpenClVisionOps, NotBuilt) { GTEST_SKIP() << "this build has no OpenCL backend"; }

#endif

}  // namespace
}  // namespace dgemma
