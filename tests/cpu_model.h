#pragma once
// Tests: a model whose ops run on a CPU backend of its own (the model takes
// its backend at load; model/diffusion_gemma.h).
#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "model/diffusion_gemma.h"

namespace dgemma::test {

// `cpu.threads` 0 takes the load's thread count (ModelOptions::load_threads).
inline std::unique_ptr<DiffusionGemma> load_on_cpu(const std::string& dir, const ModelOptions& options = {},
                                                   CpuBackendOptions cpu = {}) {
  if (cpu.threads == 0) cpu.threads = options.load_threads;
  return DiffusionGemma::load(dir, std::make_unique<CpuBackend>(cpu), options);
}

inline std::unique_ptr<DiffusionGemma> load_on_cpu(const std::string& dir, const std::string& config_path,
                                                   const ModelOptions& options, CpuBackendOptions cpu = {}) {
  if (cpu.threads == 0) cpu.threads = options.load_threads;
  return DiffusionGemma::load(dir, config_path, std::make_unique<CpuBackend>(cpu), options);
}

}  // namespace dgemma::test
