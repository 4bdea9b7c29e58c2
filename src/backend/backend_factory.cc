#include "backend/backend_factory.h"

#include "backend/inject_backend.h"
#include "dgemma/error.h"
#include "ops/cpu/cpu_backend.h"

namespace dgemma {

std::unique_ptr<Backend> make_backend(const std::string& spec, int threads) {
  if (spec == "cpu") return std::make_unique<CpuBackend>(threads);
  if (spec.rfind("inject:", 0) == 0)
    return std::make_unique<InjectBackend>(std::make_unique<CpuBackend>(threads), parse_inject_spec(spec));
  if (spec == "cuda")
    throw Error("backend 'cuda': this build of dgemma has no CUDA backend yet (available: cpu, "
                "inject:OP:LAYER:PASS:STEP:KIND)");
  throw Error("unknown backend '" + spec + "' (available: cpu, inject:OP:LAYER:PASS:STEP:KIND)");
}

}  // namespace dgemma
