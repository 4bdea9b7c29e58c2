#pragma once
// The first line of every device test: skipped, with the reason, on a
// machine without a CUDA device (a CUDA build without a GPU; an emulated
// build always has its device).
#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"

#define REQUIRE_CUDA_DEVICE()                                                                                          \
  do {                                                                                                                 \
    if (!::dgemma::cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << ::dgemma::cuda_unavailable_reason(); \
  } while (0)
