// The CUDA devices' properties that `dgemma devices` lists (cuda_backend.h
// cuda_devices, backend_factory.h cuda_device_list): one entry per device,
// read without initializing CUDA in this process. On a GPU or the emulated
// device of a DGEMMA_CUDA=EMULATE build; skipped without one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend_factory.h"

#if DGEMMA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "cuda/require_device.h"
#endif

namespace dgemma {
namespace {

#if !DGEMMA_HAVE_CUDA

TEST(CudaDevices, NotBuilt) {
  EXPECT_EQ(cuda_devices_in_this_build(), -1);
  EXPECT_TRUE(cuda_device_list().empty());
}

#else

TEST(CudaDevices, EachDeviceWithItsProperties) {
  REQUIRE_CUDA_DEVICE();
  const std::vector<CudaDeviceInfo> devices = cuda_devices();
  ASSERT_EQ(int(devices.size()), std::min(cuda_device_count(), 16));
  EXPECT_FALSE(cuda_initialized_in_this_process()) << "the properties come from the probe's child process";
  const std::vector<CudaDeviceSummary> listed = cuda_device_list();
  ASSERT_EQ(listed.size(), devices.size());
  for (size_t k = 0; k < devices.size(); ++k) {
    const CudaDeviceInfo& d = devices[k];
    EXPECT_EQ(d.index, int(k));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.memory_bytes, uint64_t(1) << 30) << d.name;
    EXPECT_GE(d.cc_major, 5) << d.name;
    EXPECT_GT(d.multiprocessors, 0) << d.name;
    EXPECT_EQ(listed[k].backend, "cuda:" + std::to_string(k));
    EXPECT_EQ(listed[k].name, d.name);
    EXPECT_EQ(listed[k].memory_bytes, d.memory_bytes);
    EXPECT_EQ(listed[k].compute_capability, std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
    // A plan's device without a size is sized by this memory.
    EXPECT_EQ(device_memory_bytes(listed[k].backend), d.memory_bytes);
  }
}

#endif

}  // namespace
}  // namespace dgemma
