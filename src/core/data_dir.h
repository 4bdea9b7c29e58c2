#pragma once
// Where the binary's run-time data is: the files `cmake --install` puts under
// <prefix>/share/dgemma (the Gemma 3 tokenizer.json the built-in default
// model's tokenizer is derived from). An installed binary needs neither the
// source tree nor the build folder (docs/architecture.md §4).
#include <string>
#include <vector>

namespace dgemma {

// The folders searched for run-time data, in order: $DGEMMA_DATA_DIR if set
// and non-empty (only that one), else <exe>/../share/dgemma (an installed
// binary, <prefix>/bin/dgemma) and <exe>/share/dgemma (a binary in its build
// folder, where the build copies the data).
std::vector<std::string> data_dirs();

// The path of data file `name` (e.g. "tokenizer.json") in the first of
// data_dirs() that holds it. Throws dgemma::Error naming every folder looked
// in, and DGEMMA_DATA_DIR, when none does.
std::string data_file(const std::string& name);

}  // namespace dgemma
