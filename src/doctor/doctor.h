#pragma once
// `dgemma doctor`: runs the encoder prefill (with a synthetic image through
// the vision tower when the model has one) and N denoising steps with every
// op executed on the CPU reference and, teacher-forced, on a target backend;
// reports the first op whose output diverges, is NaN, writes out of bounds,
// throws, or crashes the process. The run happens in a child process so that
// a faulting target cannot take the checker down (docs/placement.md
// §1.3: isolate, attribute, bisect).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/differential_backend.h"
#include "core/json.h"
#include "quantize/load_quantize.h"

namespace dgemma {

struct DoctorOptions {
  std::string model_dir;
  std::string config_path;  // optional
  std::string backend = "cpu";
  int steps = 2;
  std::vector<int32_t> prompt;  // empty: a fixed 12-token prompt
  bool routing_from_reference = false;
  bool bisect = false;
  bool precision_bf16 = false;
  // --precision bf16-dot: the reference in the CPU's dot mode, the target in
  // its own (a CUDA target gets the "bf16-dot" option).
  bool bf16_dot = false;
  // --precision int8-dot (implies bf16_dot): the reference in the CPU's
  // int8-dot, the target with the "int8-dot" option (a CUDA target: the
  // integer tensor cores, bit-identical products).
  bool int8_dot = false;
  // --quantize: the weights quantized at load, in both runs alike.
  LoadQuantization quantize = LoadQuantization::kNone;
  int threads = 0;
  Tolerance tolerance;
  // Loading progress of each checked run's model (ModelOptions::load_progress),
  // called in the child process; optional.
  std::function<void(int64_t done, int64_t total)> load_progress;
};

struct OpFailure {
  int64_t index = 0;  // position of the op in execution order
  std::string op, site, pass, kind, message;
  int layer = -1;
  int step = 0;
  // NaN when either output holds a NaN (always a failure of kind "nan"); the
  // JSON report writes a NaN or infinite measure as null, the text as nan/inf.
  double max_abs = 0, max_rel = 0, cosine = 1;
  std::string inputs, outputs;  // shapes
};

struct OpStats {
  int64_t count = 0;                                // calls compared
  int64_t unsupported = 0;                          // calls the target refused (not compared, not in the measures)
  double max_abs = 0, max_rel = 0, min_cosine = 1;  // NaN once any output of the op held a NaN
};

struct DoctorReport {
  std::string backend;
  int64_t ops_compared = 0;  // the calls the target refused not counted
  int64_t ops_unsupported = 0;
  int64_t vision_ops_compared = 0;  // of ops_compared, those of the vision pass
  std::optional<OpFailure> first_failure;
  std::map<std::string, OpStats> per_op;
  std::string child_status;  // "exited 0", "killed by signal 11 (Segmentation fault)", ...
  bool bisected = false;
  int bisect_runs = 0;
};

DoctorReport run_doctor(const DoctorOptions& options);
json::Value doctor_report_json(const DoctorReport& report);
std::string doctor_report_text(const DoctorReport& report);

}  // namespace dgemma
