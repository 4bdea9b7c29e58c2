#pragma once
// The CPU reference backend: the scalar kernels of ops/cpu, threaded over rows.
#include <memory>

#include "core/thread_pool.h"
#include "ops/backend.h"

namespace dgemma {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads = 0) : pool_(std::make_unique<ThreadPool>(threads)) {}
  std::string name() const override { return "cpu"; }
  void run(const OpCall& call) override;
  ThreadPool& pool() { return *pool_; }

 private:
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace dgemma
