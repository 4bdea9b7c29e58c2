#include "model_flags.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "backend/backend_factory.h"
#include "dgemma/error.h"
#include "placement/mpi_transport.h"
#include "progress_bar.h"

namespace dgemma::cli {

std::unique_ptr<Backend> make_cli_backend(const std::string& spec, int threads) {
  try {
    return make_backend(spec, threads);
  } catch (const Error& e) {
    const bool cuda = spec == "cuda" || spec.rfind("cuda:", 0) == 0;
    if (!cuda || std::string(e.what()).find("no CUDA device found") == std::string::npos ||
        std::filesystem::exists("/dev/nvidiactl") || std::filesystem::exists("/dev/nvidia0"))
      throw;
    throw Error("backend '" + spec +
                "': no CUDA device found: this machine has no NVIDIA GPU (no /dev/nvidia0 "
                "or /dev/nvidiactl: is the NVIDIA driver loaded?); use --backend cpu");
  }
}

void ModelFlags::add_to(FlagParser& p) {
  p.add_string("-m,--model", &model_dir,
               "checkpoint folder (config.json + *.safetensors) or GGUF file (any part of a split one)", "DIR|FILE");
  p.add_string("--config", &config, "use this config.json instead of DIR/config.json", "FILE");
  p.add_choice("--precision", &precision,
               "fp32: Transformers in float32 - weights as stored and widened exactly, fp32 activations, "
               "embedding scale and self-conditioning (parity, also on bf16 checkpoints); bf16: Transformers in "
               "bf16 where dgemma rounds - weights converted to bf16, the embedding scale and self-conditioning "
               "rounded to bf16, fp32 activations and accumulation (product path); bf16-dot: bf16 plus GEMM inputs "
               "rounded to bf16, vdpbf16ps (fastest on AVX512_BF16 CPUs); int8-dot: bf16-dot plus GEMMs over quantized "
               "weights (--quantize or a quantized checkpoint) on activations quantized to int8 blocks of 32, integer "
               "dot products; the weights stay the stored codes (CPU backend; CUDA: the integer tensor cores)",
               {"fp32", "bf16", "bf16-dot", "int8-dot"}, "MODE");
  p.add_string("--decoder-window", &decoder_window,
               "committed keys seen by sliding decoder layers: reference (HF, last W-1), static (W), per-query (JAX)",
               "VARIANT");
  p.add_string("--image-mask", &image_mask,
               "the encoder's mask over a prompt with images: hf (Transformers' generate(), the default), jax "
               "(Google's JAX code) or causal (the text mask, as a bare Transformers forward())",
               "RULE");
  p.add_int("-t,--threads", &threads, "CPU threads (0 = all cores)", 0);
  p.add_string("--quantize", &quantize,
               "quantize plain weights at load, nothing written: " + load_quantization_help() +
                   ". Embeddings, norms and router stay as stored",
               "MODE");
  p.add_string("--backend", &backend,
               "where the ops run: cpu, cuda (cuda:N for device N), opencl (opencl:P.D for platform P's device D, as "
               "`dgemma devices` lists them; the sampler needs fp64 there), or "
               "inject:OP:LAYER:PASS:STEP:KIND (the CPU "
               "with one injected fault, for testing). The per-step sampler (temperature, entropy, argmax, draw) "
               "runs there too, where the logits are; only its per-position results come back to the host, which "
               "decides what each step accepts",
               "NAME");
  p.add_bool("--debug-device", &debug_device,
             "device fault guards in a normal run (CUDA, OpenCL): synchronize after every op, canary-padded and "
             "NaN-filled buffers, an output holding NaN or Inf fails its op; CUDA also checks index bounds and "
             "prints the last launches on a fault");
  p.add_bool("--no-progress", &no_progress,
             "no progress bar on stderr while the model loads (drawn only on a terminal, for a slow load)");
  p.add_string("--plan", &plan,
               "run the stages of a `dgemma plan --json` file on its devices: a device named cuda:N is CUDA "
               "device N, any other a virtual CPU device; the LM head, embedding and sampler inputs run on the "
               "device the plan gives the LM head. Under mpirun one rank per device (bit-identical to one "
               "process)",
               "FILE");
}

bool ModelFlags::bf16_dot() const { return precision == "bf16-dot" || precision == "int8-dot"; }
bool ModelFlags::int8_dot() const { return precision == "int8-dot"; }

ModelOptions ModelFlags::options() const {
  ModelOptions o;
  if (precision == "fp32")
    o.precision = WeightPrecision::kAsStored;
  else if (precision == "bf16" || precision == "bf16-dot" || precision == "int8-dot")
    o.precision = WeightPrecision::kBF16;
  else
    throw UsageError("option --precision: expected fp32, bf16, bf16-dot or int8-dot, got '" + precision + "'");
  if (threads < 0) throw UsageError("option --threads: expected an integer >= 0, got " + std::to_string(threads));
  o.load_threads = int(threads);
  o.decoder_window = parse_flag_value("--decoder-window", [&] { return parse_decoder_window(decoder_window); });
  if (!image_mask.empty())
    o.image_mask = parse_flag_value("--image-mask", [&] { return parse_image_mask(image_mask); });
  std::optional<LoadQuantization> q = parse_load_quantization(quantize);
  if (!q)
    throw UsageError(std::string("option --quantize: expected ") + load_quantization_names() + ", got '" + quantize +
                     "'");
  o.quantize = *q;
  return o;
}

namespace {

bool is_cuda_device(const std::string& name) { return name == "cuda" || name.rfind("cuda:", 0) == 0; }
bool is_opencl_device(const std::string& name) { return name == "opencl" || name.rfind("opencl:", 0) == 0; }
// A device with buffers of its own (CUDA or OpenCL), as opposed to a virtual CPU device.
bool is_gpu_device(const std::string& name) { return is_cuda_device(name) || is_opencl_device(name); }

}  // namespace

std::unique_ptr<DiffusionGemma> ModelFlags::load() const {
  if (model_dir.empty()) throw UsageError("no model given: use -m DIR");
  ModelOptions o = options();
  ProgressBarOptions po;
  po.label = "loading";
  po.enabled = !no_progress;
  ProgressBar bar(stderr, po);
  if (bar.active())
    o.load_progress = [&bar](int64_t done, int64_t total) { bar.update(uint64_t(done), uint64_t(total)); };
  // The model's own backend: the CPU, in the run's dot modes (also the host
  // pool of generate()'s per-row work); a device or plan below routes the
  // ops elsewhere.
  auto cpu = [this] { return make_cpu_backend(int(threads), bf16_dot(), int8_dot()); };
  auto model =
      config.empty() ? DiffusionGemma::load(model_dir, cpu(), o) : DiffusionGemma::load(model_dir, config, cpu(), o);
  bar.finish();  // erased before anything else is printed (also when the load throws: the destructor)
  if (!plan.empty() && backend != "cpu")
    throw UsageError("--backend: not combinable with --plan (a plan names its devices)");
  if (int8_dot() && backend != "cpu" && !is_cuda_device(backend))
    throw UsageError(
        "--precision int8-dot: a mode of the CPU and CUDA backends; use --backend cpu, cuda or another "
        "precision for '" +
        backend + "'");
  // A device backend's spec with the fault guards of --debug-device.
  auto device_spec = [this](const std::string& name) {
    return debug_device ? with_device_option(name, "debug") : name;
  };
  // A CUDA device in the dot mode runs its bf16 products on the tensor cores,
  // in int8-dot its products over quantized weights on the integer ones.
  auto precision_spec = [this](const std::string& spec) {
    if (!is_cuda_device(spec)) return spec;
    if (int8_dot()) return with_device_option(spec, "int8-dot");
    return bf16_dot() ? with_device_option(spec, "bf16-dot") : spec;
  };
  if (plan.empty()) {
    if (backend != "cpu" || debug_device) {
      const std::string spec = device_spec(backend);
      if (debug_device && spec == backend)
        throw UsageError("--debug-device: backend '" + backend +
                         "' has no device buffers to guard (use --backend cuda or opencl)");
      backend_ = make_cli_backend(precision_spec(spec), int(threads));
      model->set_backend(*backend_);
    }
    return model;
  }
  const PlanLayout layout = read_plan_layout(plan, model->config().num_layers);
  if (debug_device && std::none_of(layout.devices.begin(), layout.devices.end(), is_gpu_device))
    throw Error("--debug-device: the plan " + plan + " has no CUDA or OpenCL device whose buffers could be guarded");
  // The backend of one device of the plan: cuda:N, opencl:P.D (docs/opencl.md §2), else a virtual CPU device.
  auto device_backend = [&](const std::string& name) -> std::unique_ptr<Backend> {
    if (is_gpu_device(name)) return make_cli_backend(precision_spec(device_spec(name)), int(threads));
    return make_cpu_backend(int(threads), bf16_dot(), int8_dot());
  };
  if (launched_under_mpi()) {
    // Every rank computes the model-level ops (embedding, LM head, sampler
    // inputs) itself, so all ranks must compute them alike: one device kind.
    auto kind = [](const std::string& name) { return is_cuda_device(name) ? 1 : is_opencl_device(name) ? 2 : 0; };
    for (const std::string& name : layout.devices)
      if (kind(name) != kind(layout.devices.front()))
        throw Error("--plan " + plan +
                    ": under mpirun the devices must be all CUDA, all OpenCL or all CPU (every rank computes "
                    "the LM head and sampler inputs itself); run a mixed plan in one process instead");
    transport_ = make_mpi_transport(layout.owners);
    model->set_stage_transport(transport_.get());
    output_rank_ = transport_->rank() == 0;
    if (size_t(transport_->rank()) >= layout.devices.size())
      throw Error("--plan " + plan + ": MPI rank " + std::to_string(transport_->rank()) +
                  " has no device (the plan has " + std::to_string(layout.devices.size()) + "): run mpirun -np " +
                  std::to_string(layout.devices.size()));
    // This rank's layers (and its copy of the model-level work) run on its device.
    const std::string& mine = layout.devices[size_t(transport_->rank())];
    if (is_gpu_device(mine)) {
      backend_ = device_backend(mine);
      model->set_backend(*backend_);
    }
    // Every rank runs the same program; only rank 0 prints results.
    if (!output_rank_ && !std::freopen("/dev/null", "w", stdout))
      throw Error("cannot silence stdout on rank " + std::to_string(transport_->rank()));
    return model;
  }
  // One process: one backend per device of the plan (a virtual CPU device
  // has its own backend and thread pool).
  for (const std::string& name : layout.devices) stage_backends_.push_back(device_backend(name));
  std::vector<Backend*> per_layer;
  for (int o : layout.owners) per_layer.push_back(stage_backends_[size_t(o)].get());
  model->set_layer_backends(per_layer);
  const auto head = std::find(layout.devices.begin(), layout.devices.end(), layout.model_device);
  if (head != layout.devices.end()) model->set_backend(*stage_backends_[size_t(head - layout.devices.begin())]);
  return model;
}

}  // namespace dgemma::cli
