// dgemma plan -m DIR --devices cuda:0=80GiB,... [--strategy] [--json]
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli.h"
#include "backend/backend_factory.h"
#include "checkpoint/checkpoint_source.h"
#include "dgemma/error.h"
#include "flags.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "placement/planner.h"
#include "quantized_size.h"

namespace dgemma::cli {
namespace {

int run_plan(const Args& args) {
  std::string dir, devices, strategy = "sequential", margin = "512MiB", kv_dtype = "bf16", quantize = "none";
  int64_t max_batch = 1, context = 4096, image_tokens = 280;
  double utilization = 0.9;
  bool as_json = false, replicate = false;
  FlagParser p("dgemma plan -m DIR --devices NAME=SIZE[,NAME=SIZE...] [--strategy S] [--json]",
               "Tie-aware placement plan from metadata alone: layer pairs (encoder i + decoder i) stay whole and\n"
               "contiguous, tied aliases go with their canonical tensor, the embedding table lives with the LM head\n"
               "and sampler (or is replicated read-only with --replicate-embedding, counted), one device is preferred\n"
               "when the model fits, and nothing is offloaded silently: if it does not fit, the error states the\n"
               "minimum memory per device. Strategies: single, sequential (fill in order), balanced (even load).\n"
               "Sizes take binary units K/KiB, M/MiB, G/GiB, T/TiB (24G = 24GiB) or decimal KB, MB, GB, TB.\n"
               "--quantize MODE plans with the weights as `--quantize MODE` would hold them after loading\n"
               "(estimated from the shapes: codes + scales), answering \"would it fit if quantized?\".");
  p.add_string("-m,--model", &dir, "checkpoint folder", "DIR");
  p.add_string("--devices", &devices,
               "devices and capacities, e.g. cuda:0=80GiB,cuda:1=80GiB or opencl:0.0=16GiB; an OpenCL or CUDA device "
               "without =SIZE is sized by the memory it reports",
               "LIST");
  p.add_string("--strategy", &strategy, "single, sequential or balanced", "S");
  p.add_int("--max-batch", &max_batch, "sequences in flight (KV cache and workspace are sized for it)", 1);
  p.add_int("--image-tokens", &image_tokens,
            "soft tokens of the largest picture the vision tower's workspace is sized for (0: text only)", 0, 1120);
  p.add_int("--context", &context, "maximum committed context per sequence", 1);
  p.add_choice("--kv-dtype", &kv_dtype, "KV-cache element type: bf16 or fp32", {"bf16", "fp32"}, "T");
  p.add_double("--utilization", &utilization, "fraction of each device's capacity the plan may use");
  p.add_string("--margin", &margin, "reserved bytes per device", "SIZE");
  p.add_string("--quantize", &quantize, std::string("plan for weights quantized at load: ") + load_quantization_names(),
               "MODE");
  p.add_bool("--replicate-embedding", &replicate, "replicate the embedding read-only on the last device");
  p.add_bool("--json", &as_json, "print the plan (or the error) as JSON");
  if (!p.parse(args)) return 0;
  if (dir.empty()) throw UsageError("plan: give -m DIR");
  if (!(utilization > 0 && utilization <= 1))
    throw UsageError("option --utilization: expected a fraction in (0, 1], got " + std::to_string(utilization));
  const std::optional<LoadQuantization> mode = parse_load_quantization(quantize);
  if (!mode)
    throw UsageError(std::string("option --quantize: expected ") + load_quantization_names() + ", got '" + quantize +
                     "'");
  PlanRequest r;
  // A device given without a size (opencl:0.0, cuda:1) is sized by its own memory.
  r.devices = parse_flag_value("--devices", [&] { return parse_device_list(devices, device_memory_bytes); });
  r.strategy = parse_flag_value("--strategy", [&] { return parse_strategy(strategy); });
  r.max_batch = max_batch;
  r.vision_max_soft_tokens = image_tokens;
  r.max_context = context;
  r.utilization = utilization;
  r.margin_bytes = parse_flag_value("--margin", [&] { return parse_bytes(margin); });
  r.replicate_embedding = replicate;
  r.kv_bytes_per_element = kv_dtype == "fp32" ? 4 : 2;
  const CheckpointSource src = open_checkpoint(dir);
  const ModelConfig& config = src.config;
  const TensorStore& store = src.store;
  BindOptions bo;
  bo.verify_tied_copies = false;
  ModelWeights w = bind_weights(config, store, bo);
  std::map<std::string, uint64_t> bytes;
  for (const auto& b : w.bound) {
    uint64_t& n = bytes[b.expected.name];
    n = quantized_bytes(b, *mode);
    // A quantized embedding table is also expanded once to bf16 for the soft
    // embedding, which multiplies with the whole table (docs/model.md §6.3
    // pitfall 10); that copy lives where the embedding does.
    const bool quantized = b.storage != dtype_name(b.dtype) || n != b.nbytes;
    if (b.expected.component == Component::kEmbedding && quantized) {
      uint64_t elems = 1;
      for (const int64_t d : b.expected.shape) elems *= uint64_t(d);
      n += elems * 2;
    }
  }
  try {
    Plan plan = make_plan(config, bytes, r);
    if (as_json) {
      json::Value v = plan_to_json(plan);
      if (*mode != LoadQuantization::kNone) v.set("quantize", quantize);
      std::printf("%s\n", json::dump(v, 2).c_str());
    } else {
      if (*mode != LoadQuantization::kNone)
        std::printf("weights as quantized at load with --quantize %s (estimated from the shapes)\n", quantize.c_str());
      std::fputs(plan_to_text(plan).c_str(), stdout);
    }
    return 0;
  } catch (const PlanError& e) {
    if (!as_json && *mode == LoadQuantization::kNone) throw;
    if (!as_json) throw Error("with --quantize " + quantize + ": " + e.what());
    json::Value o = json::Object{};
    o.set("error", std::string(e.what()));
    o.set("min_bytes_per_device", e.min_bytes_per_device);  // includes the margin below
    o.set("margin_bytes", r.margin_bytes);
    std::printf("%s\n", json::dump(o, 2).c_str());
    return 1;
  }
}

const Subcommand kPlan("plan", "tie-aware multi-device placement plan (layer ranges, budgets, ties, edges)", run_plan);

}  // namespace
}  // namespace dgemma::cli
