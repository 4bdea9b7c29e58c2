#pragma once
// `dgemma --version`: the CMake project version, plus `git describe` when the
// build was configured from a git checkout (CMakeLists.txt sets DGEMMA_VERSION).
namespace dgemma::cli {
const char* version_string();
}  // namespace dgemma::cli
