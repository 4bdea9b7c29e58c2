#pragma once
// StageTransport over MPI ranks (Debian's OpenMPI): rank r owns the layers
// the plan gives its r-th device. Available when built with MPI
// (DGEMMA_HAVE_MPI); otherwise make_mpi_transport throws.
#include <memory>
#include <string>
#include <vector>

#include "placement/stage_transport.h"

namespace dgemma {

// Whether this process was started by mpirun (OMPI/PMI environment).
bool launched_under_mpi();

// Initializes MPI (once per process) and builds a transport whose layer
// owners are `owners` (one rank per layer). The number of stages in `owners`
// must equal the MPI world size (every rank throws otherwise).
std::unique_ptr<StageTransport> make_mpi_transport(const std::vector<int>& owners);

// The layer placement of a `dgemma plan --json` file: the owner device index
// per layer (device order = rank order), the device names in that order
// ("cuda:0", "cpu:1", ...) and the device holding the LM head with its tied
// embedding (where the model-level ops run; "" if the plan does not say).
struct PlanLayout {
  std::vector<int> owners;
  std::vector<std::string> devices;
  std::string model_device;
};
PlanLayout read_plan_layout(const std::string& plan_path, int num_layers);

}  // namespace dgemma
