#include "placement/mpi_transport.h"

#include <algorithm>
#include <cstdlib>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

#ifdef DGEMMA_HAVE_MPI
// The C API only: the deprecated C++ bindings need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace dgemma {

bool launched_under_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

PlanLayout read_plan_layout(const std::string& path, int num_layers) {
  json::ParseOptions po;
  po.source = path;
  json::Value plan = json::parse(read_text_file(path), po);
  const json::Value* devices = plan.find("devices");
  if (!devices) throw Error(path + ": not a plan (no \"devices\"; write one with `dgemma plan --json`)");
  PlanLayout layout;
  std::vector<int>& owners = layout.owners;
  owners.assign(size_t(num_layers), -1);
  int rank = 0;
  for (const json::Value& d : devices->as_array(path + ": devices")) {
    const json::Value* name = d.find("name");
    if (!name) throw Error(path + ": device " + std::to_string(rank) + " without \"name\"");
    layout.devices.push_back(name->as_string(path + ": devices[].name"));
    const auto& layers = d.find("layers") ? d.find("layers")->as_array(path + ": devices[].layers")
                                          : throw Error(path + ": device without \"layers\"");
    if (layers.size() != 2) throw Error(path + ": devices[].layers must be [first, last]");
    const int64_t first = layers[0].as_int(path + ": layers[0]"), last = layers[1].as_int(path + ": layers[1]");
    if (first >= 0) {
      if (last < first || last >= num_layers)
        throw Error(path + ": device " + std::to_string(rank) + " has layers [" + std::to_string(first) + ", " +
                    std::to_string(last) + "] outside the model's " + std::to_string(num_layers) + " layers");
      for (int64_t i = first; i <= last; ++i) {
        if (owners[size_t(i)] >= 0) throw Error(path + ": layer " + std::to_string(i) + " is placed twice");
        owners[size_t(i)] = rank;
      }
    }
    ++rank;
  }
  for (int i = 0; i < num_layers; ++i)
    if (owners[size_t(i)] < 0) throw Error(path + ": layer " + std::to_string(i) + " is not placed");
  for (int i = 1; i < num_layers; ++i)
    if (owners[size_t(i)] < owners[size_t(i - 1)])
      throw Error(path + ": layers are not in contiguous ranges in device order");
  if (const json::Value* tensors = plan.find("tensors")) {
    if (const json::Value* head = tensors->find("lm_head.weight")) {
      layout.model_device = head->as_string(path + ": tensors[\"lm_head.weight\"]");
      if (std::find(layout.devices.begin(), layout.devices.end(), layout.model_device) == layout.devices.end())
        throw Error(path + ": lm_head.weight is placed on '" + layout.model_device +
                    "', which is not a device of the plan");
    }
  }
  return layout;
}

#ifdef DGEMMA_HAVE_MPI
namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(std::string("MPI ") + what + " failed: " + std::string(msg, size_t(len)));
  }
}

struct MpiSession {
  MpiSession() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) check(MPI_Init(nullptr, nullptr), "init");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
};

class MpiTransport : public StageTransport {
 public:
  explicit MpiTransport(std::vector<int> owners) : owners_(std::move(owners)) {
    static MpiSession session;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    int needed = 0;
    for (int o : owners_) needed = std::max(needed, o + 1);
    // Exactly one rank per stage, checked alike on every rank, so that all of
    // them stop (an extra rank would leave the others waiting in a broadcast).
    if (needed != size_)
      throw Error("the plan has " + std::to_string(needed) + " stages but mpirun started " + std::to_string(size_) +
                  " ranks (use mpirun -np " + std::to_string(needed) + ")");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int owner_of_layer(int layer) const override { return owners_.at(size_t(layer)); }
  void send(int to, const Tensor& x) override {
    check(MPI_Send(x.f.data(), int(x.f.size()), MPI_FLOAT, to, 0, MPI_COMM_WORLD), "send");
  }
  void recv(int from, Tensor& x) override {
    check(MPI_Recv(x.f.data(), int(x.f.size()), MPI_FLOAT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv");
  }
  void broadcast(int root, Tensor& x) override {
    check(MPI_Bcast(x.f.data(), int(x.f.size()), MPI_FLOAT, root, MPI_COMM_WORLD), "broadcast");
  }

 private:
  std::vector<int> owners_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<StageTransport> make_mpi_transport(const std::vector<int>& owners) {
  return std::make_unique<MpiTransport>(owners);
}
#else
std::unique_ptr<StageTransport> make_mpi_transport(const std::vector<int>&) {
  throw Error("this build of dgemma has no MPI support (install libopenmpi-dev and rebuild)");
}
#endif

}  // namespace dgemma
