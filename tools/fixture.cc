// dgemma fixture sparse CONFIG OUTDIR [--shards N], fixture gguf DIR OUT.gguf,
// fixture sparse-gguf CONFIG OUT.gguf — test fixtures.
#include <cstdio>

#include "cli.h"
#include "dgemma/error.h"
#include "flags.h"
#include "checkpoint/checkpoint_source.h"
#include "checkpoint/fake_checkpoint.h"
#include "checkpoint/gguf_fixture.h"

namespace dgemma::cli {
namespace {

int run_fixture(const Args& args) {
  int64_t shards = 4;
  bool aliases = false;
  FlagParser p(
      "dgemma fixture sparse CONFIG.json OUTDIR [--shards N] | gguf DIR OUT.gguf | sparse-gguf CONFIG.json "
      "OUT.gguf",
      "sparse: writes a sparse fake checkpoint for CONFIG: the real tensor names, shapes and dtypes\n"
      "(BF16) with the data left as holes in the files (no disk blocks, reads as zeros). For\n"
      "testing loaders, `inspect` and placement on the full-size tensor list without the weights.\n"
      "gguf: writes the weights of checkpoint folder DIR as an F32 GGUF file in the published\n"
      "layout (docs/formats.md §5.3), with a placeholder vocabulary.\n"
      "sparse-gguf: writes the tensor list of CONFIG with the types of the published Q4_K_M file,\n"
      "the data left as holes.");
  p.add_int("--shards", &shards, "number of safetensors shards (1 = single model.safetensors)", 1, 9999);
  p.add_bool("--encoder-aliases", &aliases, "also store the encoder copies of tied tensors");
  if (!p.parse(args)) return 0;
  const std::string kind = p.positional().empty() ? "" : p.positional()[0];
  if (p.positional().size() != 3 || (kind != "sparse" && kind != "gguf" && kind != "sparse-gguf"))
    throw UsageError(
        "fixture: usage: dgemma fixture sparse CONFIG.json OUTDIR | gguf DIR OUT.gguf | sparse-gguf CONFIG.json "
        "OUT.gguf");
  if (kind == "gguf") {
    const CheckpointSource src = open_checkpoint(p.positional()[1]);
    write_gguf_f32(src.config, src.store, p.positional()[2]);
    std::fprintf(stderr, "wrote F32 GGUF to %s\n", p.positional()[2].c_str());
    return 0;
  }
  if (kind == "sparse-gguf") {
    write_sparse_gguf_q4_k_m(load_model_config(p.positional()[1]), p.positional()[2]);
    std::fprintf(stderr, "wrote sparse Q4_K_M GGUF to %s\n", p.positional()[2].c_str());
    return 0;
  }
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
