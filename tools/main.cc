// Entry point of the `dgemma` CLI: dispatches to a registered subcommand.
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>

#include "cli.h"
#include "dgemma/error.h"

namespace dgemma::cli {
namespace {
std::vector<Entry>& mutable_registry() {
  static std::vector<Entry> r;
  return r;
}
}  // namespace

Subcommand::Subcommand(std::string name, std::string summary, Handler handler) {
  mutable_registry().push_back({std::move(name), std::move(summary), std::move(handler)});
}
const std::vector<Entry>& registry() { return mutable_registry(); }

}  // namespace dgemma::cli

static void usage(FILE* out) {
  std::fprintf(out,
               "dgemma — native inference engine for DiffusionGemma\n\n"
               "usage: dgemma <command> [options]   (dgemma <command> --help for details)\n\ncommands:\n");
  std::map<std::string, std::string> sorted;
  for (const auto& e : dgemma::cli::registry()) sorted[e.name] = e.summary;
  for (const auto& [name, summary] : sorted) std::fprintf(out, "  %-10s %s\n", name.c_str(), summary.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& e : dgemma::cli::registry()) {
    if (e.name != argv[1]) continue;
    dgemma::cli::Args args(argv + 2, argv + argc);
    try {
      return e.handler(args);
    } catch (const dgemma::Error& err) {
      std::fprintf(stderr, "error: %s\n", err.what());
      return 1;
    } catch (const std::exception& err) {
      std::fprintf(stderr, "error: %s\n", err.what());
      return 1;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
