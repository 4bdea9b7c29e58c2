// Entry point of the `dgemma` CLI: dispatches to a registered subcommand.
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>

#include "cli.h"
#include "dgemma/error.h"
#include "flags.h"
#include "output.h"
#include "suggest.h"
#include "version.h"

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
               "dgemma %s — native inference engine for DiffusionGemma\n\n"
               "usage: dgemma <command> [options]   (dgemma <command> --help for details)\n"
               "       dgemma --version | -V\n\n"
               "Exit status: 0 success, 1 error, 2 usage error (unknown option or command, missing, malformed or\n"
               "out-of-range value), 130 interrupted (Ctrl-C). A failed write to stdout is an error.\n\n"
               "commands:\n",
               dgemma::cli::version_string());
  std::map<std::string, std::string> sorted;
  for (const auto& e : dgemma::cli::registry()) sorted[e.name] = e.summary;
  for (const auto& [name, summary] : sorted) std::fprintf(out, "  %-10s %s\n", name.c_str(), summary.c_str());
}

// Runs one subcommand; maps exceptions to exit codes (usage errors 2, others
// 1) and turns a failed write to stdout into an error.
static int dispatch(const dgemma::cli::Entry& e, const dgemma::cli::Args& args) {
  int rc = 1;
  try {
    rc = e.handler(args);
  } catch (const dgemma::cli::UsageError& err) {
    std::fprintf(stderr, "error: %s\n", err.what());
    return 2;
  } catch (const std::exception& err) {
    std::fprintf(stderr, "error: %s\n", err.what());  // a failed write to stdout included
    return 1;
  }
  const std::string failure = dgemma::cli::stdout_failure();
  if (!failure.empty()) {
    std::fprintf(stderr, "error: %s\n", failure.c_str());
    return rc == 0 ? 1 : rc;
  }
  return rc;
}

static int finish_plain(int rc) {
  const std::string failure = dgemma::cli::stdout_failure();
  if (failure.empty()) return rc;
  std::fprintf(stderr, "error: %s\n", failure.c_str());
  return rc == 0 ? 1 : rc;
}

int main(int argc, char** argv) {
  dgemma::cli::guard_stdout();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return finish_plain(0);
  }
  if (cmd == "--version" || cmd == "-V") {
    std::printf("dgemma %s\n", dgemma::cli::version_string());
    return finish_plain(0);
  }
  std::vector<std::string> names = {"--help", "--version"};
  for (const auto& e : dgemma::cli::registry()) {
    names.push_back(e.name);
    if (e.name == cmd) return dispatch(e, dgemma::cli::Args(argv + 2, argv + argc));
  }
  const std::string hint = dgemma::cli::did_you_mean(cmd, names);
  if (cmd.size() > 1 && cmd[0] == '-' && hint.empty())
    std::fprintf(stderr, "error: unknown option '%s'%s: give a command first\n\n", argv[1], hint.c_str());
  else
    std::fprintf(stderr, "error: unknown %s '%s'%s\n\n", cmd[0] == '-' ? "option" : "command", argv[1], hint.c_str());
  usage(stderr);
  return 2;
}
