#pragma once
// `dgemma bench vision` (tools/bench_vision.cc): the speed of the vision
// tower on one synthetic image, on the CPU backend.
#include "cli.h"

namespace dgemma::cli {

// Runs `dgemma bench vision` with the arguments after "vision"; returns the
// exit code.
int run_bench_vision(const Args& args);

}  // namespace dgemma::cli
