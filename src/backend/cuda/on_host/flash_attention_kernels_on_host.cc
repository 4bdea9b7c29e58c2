// The flash attention kernel (flash_attention_kernels.cu), compiled by the
// host C++ compiler for the emulated device (DGEMMA_CUDA=EMULATE): the same
// source as the nvcc build, with device_builtins.h in place of nvcc's device
// side.
#include "cuda_emulator/device_builtins.h"

#include "backend/cuda/flash_attention_kernels.cu"
