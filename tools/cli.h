#pragma once
// Subcommand registry of the `dgemma` CLI. Each tools/<name>.cc defines one
// subcommand and registers it with a static `Subcommand` object, so adding a
// subcommand touches no other file.
#include <functional>
#include <string>
#include <vector>

namespace dgemma::cli {

using Args = std::vector<std::string>;  // arguments after the subcommand name
// Returns the process exit code. Throwing dgemma::Error prints "error: ..."
// and exits with 1.
using Handler = std::function<int(const Args&)>;

struct Subcommand {
  Subcommand(std::string name, std::string summary, Handler handler);
};

struct Entry {
  std::string name;
  std::string summary;
  Handler handler;
};
const std::vector<Entry>& registry();

}  // namespace dgemma::cli
