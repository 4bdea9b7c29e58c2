#pragma once
// Force-included into every test (see CMakeLists.txt): the test data folder
// is found at run time (ctest sets DGEMMA_TEST_DATA; otherwise it is located
// from the source tree) so that test objects do not embed the checkout path.
#include <cstdlib>
#include <string>

#include "core/paths.h"

inline std::string dgemma_test_data_dir() {
  if (const char* env = std::getenv("DGEMMA_TEST_DATA"); env && *env) return env;
  return dgemma::source_dir() + "/tests/data";
}
#define DGEMMA_TEST_DATA (dgemma_test_data_dir())
