// dgemma fixture sparse CONFIG OUTDIR [--shards N] — test fixtures.
#include <cstdio>

#include "cli.h"
#include "dgemma/error.h"
#include "flags.h"
#include "checkpoint/fake_checkpoint.h"

namespace dgemma::cli {
namespace {

int run_fixture(const Args& args) {
  int64_t shards = 4;
  bool aliases = false;
  FlagParser p("dgemma fixture sparse CONFIG.json OUTDIR [--shards N]",
               "Writes a sparse fake checkpoint for CONFIG: the real tensor names, shapes and dtypes\n"
               "(BF16) with the data left as holes in the files (no disk blocks, reads as zeros). For\n"
               "testing loaders, `inspect` and placement on the full-size tensor list without the weights.");
  p.add_int("--shards", &shards, "number of safetensors shards (1 = single model.safetensors)", 1, 9999);
  p.add_bool("--encoder-aliases", &aliases, "also store the encoder copies of tied tensors");
  if (!p.parse(args)) return 0;
  if (p.positional().size() != 3 || p.positional()[0] != "sparse")
    throw UsageError("fixture: usage: dgemma fixture sparse CONFIG.json OUTDIR");
  FakeCheckpointOptions o;
  o.shards = int(shards);
  o.include_encoder_aliases = aliases;
  write_sparse_checkpoint(p.positional()[1], p.positional()[2], o);
  std::fprintf(stderr, "wrote sparse checkpoint to %s\n", p.positional()[2].c_str());
  return 0;
}

const Subcommand kFixture("fixture", "write test fixtures (sparse full-size fake checkpoints)", run_fixture);

}  // namespace
}  // namespace dgemma::cli
