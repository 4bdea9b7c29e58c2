// The integer tensor-core kernels (int8_dot_kernels.cu), compiled by the host
// C++ compiler for the emulated device (DGEMMA_CUDA=EMULATE): the same source
// as the nvcc build, with device_builtins.h (its integer wmma included) in
// place of nvcc's device side.
#include "cuda_emulator/device_builtins.h"

#include "backend/cuda/int8_dot_kernels.cu"
