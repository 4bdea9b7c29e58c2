#pragma once
// Tests and benchmarks only (the installed binary never reads the source
// tree; its run-time data: core/data_dir.h). Where the source tree (bundled data such as the tokenizer and golden
// files) is at run time. Kept out of compile definitions so that object files do not depend on the checkout's location
// and ccache hits across clones.
#include <string>

namespace dgemma {

// $DGEMMA_SOURCE_DIR, else the tree this binary was built from (if it still
// exists), else two levels above the executable (build/<flavour>/dgemma).
std::string source_dir();

}  // namespace dgemma
