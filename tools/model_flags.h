#pragma once
// Flags shared by the subcommands that load a model (-m, --precision,
// --threads, --decoder-window, --config).
#include <memory>
#include <string>
#include <vector>

#include "flags.h"
#include "model/diffusion_gemma.h"
#include "placement/stage_transport.h"

namespace dgemma::cli {

// make_backend(spec, threads), except that when a CUDA backend cannot be made
// because the machine has no NVIDIA GPU at all (no /dev/nvidiactl or
// /dev/nvidia0), the error says exactly that instead of the CUDA runtime's
// "driver version is insufficient" (an emulated CUDA device is unaffected: it
// is made without error).
std::unique_ptr<Backend> make_cli_backend(const std::string& spec, int threads);

struct ModelFlags {
  std::string model_dir;
  std::string config;  // optional alternative config.json
  std::string precision = "fp32";
  std::string decoder_window = "reference";
  std::string image_mask;  // the encoder's mask over images: hf (empty), jax, causal (docs/model.md §7.7)
  int64_t threads = 0;
  std::string quantize = "none";  // quantize at load: none, nf4, nvfp4-experts, q8
  std::string plan;               // optional `dgemma plan --json` output: run its stages
  std::string backend = "cpu";    // backend_factory.h name: cpu, cuda, cuda:1, inject:...
  bool debug_device = false;      // device fault guards (CUDA "debug": canaries, NaN fill, launch ring)
  // No progress bar while loading (there is one only on a terminal, and only
  // for a load that takes noticeable time: progress_bar.h). -q sets it too.
  bool no_progress = false;

  // Whether this process should print results (rank 0, or not under MPI).
  bool is_output_rank() const { return output_rank_; }

  void add_to(FlagParser& p);
  ModelOptions options() const;
  // The CPU's (and a CUDA device's) dot modes that --precision asks for.
  bool bf16_dot() const;
  bool int8_dot() const;
  // Loads the model, with a progress bar on stderr unless no_progress.
  std::unique_ptr<DiffusionGemma> load() const;

 private:
  // Kept alive as long as the flags (and the model they configured).
  mutable std::unique_ptr<StageTransport> transport_;
  mutable std::vector<std::unique_ptr<Backend>> stage_backends_;
  mutable std::unique_ptr<Backend> backend_;
  mutable bool output_rank_ = true;
};

}  // namespace dgemma::cli
