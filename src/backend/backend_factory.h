#pragma once
// Backends by name: "cpu", "inject:OP:LAYER:PASS:STEP:KIND" (the CPU backend
// with one injected fault), "cuda" (when built with CUDA and a device is
// present).
#include <memory>
#include <string>

#include "ops/backend.h"

namespace dgemma {

std::unique_ptr<Backend> make_backend(const std::string& spec, int threads = 0);

}  // namespace dgemma
