// dgemma inspect DIR [--context N] [--json]
#include <cstdio>

#include "cli.h"
#include "dgemma/error.h"
#include "flags.h"
#include "model/inspect.h"

namespace dgemma::cli {
namespace {

int run_inspect(const Args& args) {
  int64_t context = 4096;
  bool as_json = false;
  FlagParser p("dgemma inspect DIR|FILE.gguf [--context N] [--json]",
               "Reads a DiffusionGemma checkpoint folder (config.json + safetensors, sharded or not) or GGUF\n"
               "file (whole or any part of a split one) without\n"
               "copying weights and prints its architecture, parameter counts and bytes by component and dtype,\n"
               "tie groups, skipped vision/audio tensors and a memory estimate at the given context length.");
  p.add_int("--context", &context, "committed context length for the KV-cache estimate", 0);
  p.add_bool("--json", &as_json, "print one JSON object instead of the table");
  if (!p.parse(args)) return 0;
  if (p.positional().size() != 1)
    throw UsageError("inspect: expected exactly one checkpoint folder or GGUF file (see --help)");
  CheckpointReport r = inspect_checkpoint(p.positional()[0], context);
  if (as_json)
    std::printf("%s\n", json::dump(report_to_json(r), 2).c_str());
  else
    std::fputs(report_to_text(r).c_str(), stdout);
  return 0;
}

const Subcommand kInspect("inspect", "summarize a checkpoint folder (architecture, parameters, ties, memory)",
                          run_inspect);

}  // namespace
}  // namespace dgemma::cli
