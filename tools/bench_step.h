#pragma once
// `dgemma bench step` (tools/bench_step.cc): the speed of whole denoising
// steps and commits of a checkpoint, on the CPU or any other backend.
#include "cli.h"

namespace dgemma::cli {

// Runs `dgemma bench step` with the arguments after "step"; returns the
// exit code.
int run_bench_step(const Args& args);

}  // namespace dgemma::cli
