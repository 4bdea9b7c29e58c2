// dgemma generate -m DIR --prompt-ids 2,427,... [--replay FILE | --seed N] [--json] ...
// Ids in, ids out: the reference generate() (docs/model.md §3.2) with no tokenizer,
// for replaying recorded Transformers runs and for scripts.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "cli.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "generate/generate.h"
#include "generate/generation_stats.h"
#include "generate/recorded_self_conditioning.h"
#include "generation_flags.h"
#include "image_inputs.h"
#include "model_flags.h"
#include "output.h"

namespace dgemma::cli {
namespace {

json::Value int_array(std::span<const int32_t> ids) {
  json::Array a;
  for (const int32_t t : ids) a.emplace_back(int64_t(t));
  return a;
}

// Only timestamps the first committed canvas for the summary.
class ClockObserver : public GenerationObserver {
 public:
  explicit ClockObserver(StatsClock& clock) : clock_(clock) {}
  void on_canvas(const CanvasEvent&) override { clock_.on_canvas(); }

 private:
  StatsClock& clock_;
};

int run_generate(const Args& args) {
  ModelFlags mf;
  GenerationFlags gf;
  ImageFlags imf;
  std::string prompt_ids, replay;
  bool as_json = false, quiet = false, replay_sc = false;
  FlagParser p(
      "dgemma generate -m DIR --prompt-ids 2,427,... [--image FILE]... [--replay FILE.safetensors | --seed N] "
      "[--json]",
      "Runs block-diffusion generation on token ids (no tokenizer). Parameters come from\n"
      "DIR/generation_config.json (flat or nested keys); the flags below override them.\n"
      "Output: the full sequence as the reference returns it (prompt + whole canvases, pad after\n"
      "the first EOS, not trimmed to --max-new-tokens), as comma-separated ids on one line, or with\n"
      "--json one object {\"sequences\": [[...]], \"steps_per_canvas\": [...], \"tokens_per_forward\": x, ...}.\n"
      "--replay takes the random draws (draw.000, draw.001, ...) recorded from a Transformers run\n"
      "(tests/data/golden_a/cases/generate_*.safetensors) instead of the seeded generator, so the\n"
      "output can be compared token for token. Self-conditioning amplifies float32 rounding\n"
      "differences about tenfold per step, so a free-running replay drifts from the recording after\n"
      "a few steps; --replay-self-conditioning also takes each step's self-conditioning input from\n"
      "the recording (recorded logits / temperature), which keeps the replay exact while the model\n"
      "still computes every pass. A summary goes to stderr.\n"
      "--image FILE (repeatable) fills the prompt's runs of image placeholder ids in order: the ids must\n"
      "already hold each picture's BOI, soft-token placeholders and EOI (what the processor's expansion\n"
      "gives); a run whose length differs from its picture's soft tokens is an error naming both.");
  mf.add_to(p);
  p.add_string("--prompt-ids", &prompt_ids,
               "prompt token ids separated by commas or spaces, or a JSON list: what `dgemma tokenize` prints "
               "(include BOS yourself; '-' reads them from stdin)",
               "IDS");
  p.add_string("--replay", &replay, "replay recorded random draws from this safetensors file", "FILE");
  p.add_bool("--replay-self-conditioning", &replay_sc,
             "with --replay: self-conditioning inputs from the recording too (parity check)");
  imf.add_to(p);
  gf.add_to(p);
  p.add_bool("--json", &as_json, "print one JSON object instead of the id list");
  p.add_bool("-q,--quiet", &quiet, "no summary on stderr");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw UsageError("generate: unexpected argument '" + p.positional()[0] + "'");
  if (prompt_ids.empty()) throw UsageError("generate: give --prompt-ids (e.g. --prompt-ids 2,427,158)");
  if (!replay.empty() && p.given("--seed")) throw UsageError("generate: --replay and --seed exclude each other");
  if (replay_sc && replay.empty()) throw UsageError("generate: --replay-self-conditioning needs --replay FILE");
  if (prompt_ids == "-") prompt_ids.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  const std::vector<int32_t> prompt = parse_token_ids(prompt_ids, "--prompt-ids");
  if (mf.model_dir.empty()) throw UsageError("generate: no model given: use -m DIR");
  // Refuse a request that cannot fit before loading the model.
  check_context_fits(gf.resolve(mf.model_dir, true, mf.config), int64_t(prompt.size()), 0,
                     model_canvas_length(mf.model_dir, mf.config));

  mf.no_progress = mf.no_progress || quiet;  // -q: no progress bar either
  auto model = mf.load();
  quiet = quiet || !mf.is_output_rank();  // under MPI only rank 0 reports
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] >= model->vocab_size())
      throw Error("--prompt-ids: token id " + std::to_string(prompt[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(model->vocab_size()) + ")");
  const GenerationConfig config = gf.resolve(mf.model_dir, quiet, mf.config);
  const std::vector<VisionInput> images =
      imf.files.empty() ? std::vector<VisionInput>()
                        : vision_inputs(load_image_files(imf.files, model_image_processor(*model, mf.model_dir),
                                                         imf.limits(), model->thread_pool()));

  std::unique_ptr<DrawSource> draws;
  ReplayDraws* tape = nullptr;
  uint64_t seed = 0;
  if (!replay.empty()) {
    auto r = std::make_unique<ReplayDraws>(replay);
    tape = r.get();
    draws = std::move(r);
  } else {
    seed = gf.resolve_seed();
    draws = std::make_unique<RandomDraws>(seed);
  }

  StatsClock clock;
  ClockObserver observer(clock);
  clock.start();
  std::unique_ptr<RecordedSelfConditioning> anchored;
  if (replay_sc) anchored = std::make_unique<RecordedSelfConditioning>(*model, replay);
  DiffusionModel& runner = anchored ? static_cast<DiffusionModel&>(*anchored) : *model;
  const GenerationResult result = generate(runner, prompt, config, *draws, &observer, {}, images);
  if (tape != nullptr && tape->consumed() != tape->size() && !quiet)
    std::fprintf(stderr, "warning: used %zu of the %zu recorded draws in %s (the run differs from the recording)\n",
                 tape->consumed(), tape->size(), replay.c_str());

  if (as_json) {
    json::Value v = json::Object{};
    v.set("sequences", json::Array{int_array(result.sequences)});
    json::Array steps;
    for (const int64_t s : result.steps_per_canvas) steps.emplace_back(s);
    v.set("steps_per_canvas", steps);
    v.set("tokens_per_forward", double(result.tokens_per_forward));
    v.set("prompt_length", result.prompt_length);
    v.set("decoder_forwards", result.decoder_forwards);
    v.set("stopped_at_eos", result.stopped_at_eos);
    if (tape == nullptr)
      v.set("seed", seed);
    else
      v.set("replay", replay);
    if (replay_sc) v.set("replay_self_conditioning", true);
    std::printf("%s\n", json::dump(v).c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < result.sequences.size(); ++i) {
      if (i) line += ',';
      line += std::to_string(result.sequences[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  check_output(stdout);  // the ids before the summary, and a failed write is an error
  if (!quiet) {
    int64_t valid = 0;
    for (const int32_t t : result.generated()) valid += t != config.pad_token_id ? 1 : 0;
    GenerationStats stats =
        collect_stats(result, model->canvas_length(), clock, valid, result.stopped_at_eos ? "eos" : "length");
    std::fprintf(stderr, "%s\n", format_summary(stats).c_str());
    if (tape == nullptr) std::fprintf(stderr, "seed              %llu\n", (unsigned long long)seed);
  }
  return 0;
}

const Subcommand kGenerate("generate", "generate token ids from token ids (seeded or replaying recorded draws)",
                           run_generate);

}  // namespace
}  // namespace dgemma::cli
