#pragma once
// `dgemma bench step` (tools/bench_step.cc): the speed of whole denoising
// steps and commits of a checkpoint, on the CPU or any other backend.
#include "backend/cpu/cpu_bench.h"
#include "cli.h"
#include "core/json.h"

namespace dgemma::cli {

// Runs `dgemma bench step` with the arguments after "step"; returns the
// exit code.
int run_bench_step(const Args& args);

// The per-op seconds, GFLOP and GFLOP/s of a profile, by op name (the JSON of
// `bench step` and `bench vision`).
json::Value op_profile_json(const cpu::OpProfile& prof);

}  // namespace dgemma::cli
