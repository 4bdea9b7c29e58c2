// dgemma doctor -m DIR --backend NAME [--steps N] [--json] ...
#include <cstdio>

#include "backend/backend_factory.h"
#include "doctor/doctor.h"
#include "backend/inject_backend.h"
#include "cli.h"
#include "dgemma/error.h"
#include "flags.h"
#include "model_flags.h"
#include "ops/op.h"
#include "progress_bar.h"

namespace dgemma::cli {
namespace {

int run_doctor_cmd(const Args& args) {
  DoctorOptions o;
  int64_t steps = 2, threads = 0;
  std::string prompt_ids, precision = "fp32", config, quantize = "none";
  bool as_json = false, list_ops = false, sync = false, no_progress = false;
  FlagParser p(
      "dgemma doctor -m DIR --backend NAME [--steps N] [--prompt-ids a,b,...] [--json] | dgemma doctor --list-ops",
      "Differential checker: runs the encoder prefill and N denoising steps with every op executed on\n"
      "the CPU reference and, teacher-forced (same inputs), on the target backend, and names the first\n"
      "op whose output diverges, is NaN, writes out of bounds (canary), throws or crashes — with its\n"
      "layer, pass, step and shapes. The checked run happens in a child process: a crash is reported,\n"
      "not suffered. Backends: cpu; cuda, cuda:N (CUDA device N), with ,sync or ,debug options (a CUDA\n"
      "GPU; built when CMake finds nvcc); opencl, opencl:P.D, with ,debug (built when CMake finds OpenCL;\n"
      "an op it does not run yet is reported as unsupported); inject:OP:LAYER:PASS:STEP:KIND[:SITE][@BACKEND]\n"
      "(KIND value|nan|oob|crash; LAYER may be 'model' for once-per-pass ops; the fault in an op of BACKEND,\n"
      "default cpu, e.g. @opencl:0.0) for testing the checker itself.");
  p.add_string("-m,--model", &o.model_dir, "checkpoint folder or GGUF file", "DIR|FILE");
  p.add_string("--config", &config, "use this config.json instead of DIR/config.json", "FILE");
  p.add_string("--backend", &o.backend, "target backend: cuda, cuda:N, opencl, opencl:P.D, cpu or inject:...", "NAME");
  p.add_int("--steps", &steps, "denoising steps after the prefill", 1, 1000);
  p.add_string("--prompt-ids", &prompt_ids, "prompt token ids (default: a fixed 12-token prompt)", "IDS");
  p.add_choice("--precision", &precision,
               "fp32 or bf16 weights; bf16-dot: bf16 weights with GEMM activations rounded to bf16 (the CPU "
               "reference in its dot mode, a CUDA target on the tensor cores); int8-dot: bf16-dot, and GEMMs "
               "over quantized weights on int8 activation blocks (a CUDA target on the integer tensor cores)",
               {"fp32", "bf16", "bf16-dot", "int8-dot"}, "MODE");
  p.add_string("--quantize", &quantize,
               std::string("quantize weights at load in both runs: ") + load_quantization_names() + " (as for run)",
               "MODE");
  p.add_int("-t,--threads", &threads, "CPU threads (0 = all cores)", 0);
  p.add_double("--atol", &o.tolerance.atol, "absolute tolerance per output");
  p.add_double("--rtol", &o.tolerance.rtol, "tolerance relative to the output's largest |reference| value");
  p.add_double("--min-cosine", &o.tolerance.min_cosine, "minimum cosine similarity per output");
  p.add_bool("--routing-from-reference", &o.routing_from_reference,
             "do not compare router top-k indices (near-tie flips are not kernel bugs); the model always "
             "continues with the reference's routing");
  p.add_bool("--bisect", &o.bisect, "confirm the culprit by re-running prefixes of target-executed ops");
  p.add_bool("--sync", &sync, "synchronize after every launch (device backends; the CPU backends are synchronous)");
  p.add_bool("--json", &as_json, "print the report as JSON (first_failure is null when all ops agree)");
  p.add_bool("--no-progress", &no_progress, "no progress bar on stderr while the model loads (only on a terminal)");
  p.add_bool("--list-ops", &list_ops, "print the op vocabulary: name and scope (layer or model)");
  if (!p.parse(args)) return 0;
  if (list_ops) {
    for (int k = 0; k < kNumOpKinds; ++k)
      std::printf("%s %s\n", std::string(op_name(OpKind(k))).c_str(), std::string(op_scope(OpKind(k))).c_str());
    return 0;
  }
  if (o.model_dir.empty()) throw UsageError("doctor: give -m DIR");
  if (!p.positional().empty()) throw UsageError("doctor: unexpected argument '" + p.positional()[0] + "'");
  o.steps = int(steps);
  o.threads = int(threads);
  o.config_path = config;
  o.precision_bf16 = precision != "fp32";
  o.int8_dot = precision == "int8-dot";
  o.bf16_dot = o.int8_dot || precision == "bf16-dot";
  const std::optional<LoadQuantization> q = parse_load_quantization(quantize);
  if (!q)
    throw UsageError(std::string("option --quantize: expected ") + load_quantization_names() + ", got '" + quantize +
                     "'");
  o.quantize = *q;
  if (!prompt_ids.empty())
    for (int64_t v : parse_int_list(prompt_ids, "--prompt-ids")) {
      if (v < 0 || v > INT32_MAX) throw UsageError("--prompt-ids: id " + std::to_string(v) + " is out of range");
      o.prompt.push_back(int32_t(v));
    }
  // The checked run makes its backend in a child process; making a CUDA one
  // here first (which leaves CUDA uninitialized) turns "no GPU" into a plain
  // error. Other names are only checked: an OpenCL driver started here would
  // not survive the fork (its device is found in the child).
  if (o.backend == "cuda" || o.backend.rfind("cuda:", 0) == 0)
    make_cli_backend(o.backend, 1);
  else
    check_backend_name(o.backend);
  if (sync) o.backend = with_device_option(o.backend, "sync");
  // The model loads in each checked run's child process, which inherits the
  // bar as it is here (fresh): it ends it once all weights are bound.
  ProgressBarOptions po;
  po.enabled = !no_progress;
  ProgressBar bar(stderr, po);
  if (bar.active())
    o.load_progress = [&bar](int64_t done, int64_t total) {
      bar.update(uint64_t(done), uint64_t(total));
      if (done == total) bar.finish();
    };
  DoctorReport r = run_doctor(o);
  if (as_json)
    std::printf("%s\n", json::dump(doctor_report_json(r), 2).c_str());
  else
    std::fputs(doctor_report_text(r).c_str(), stdout);
  return r.first_failure ? 1 : 0;
}

const Subcommand kDoctor("doctor", "differential op-by-op checker: name the first op that diverges or faults",
                         run_doctor_cmd);

}  // namespace
}  // namespace dgemma::cli
