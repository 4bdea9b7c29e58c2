#include "version.h"

#ifndef DGEMMA_VERSION
#define DGEMMA_VERSION "unknown"
#endif

namespace dgemma::cli {
const char* version_string() { return DGEMMA_VERSION; }
}  // namespace dgemma::cli
