// dgemma run [-m DIR] -p "text" [--raw] [-n N] [--seed N] [--visualize | --json] ...
// Text in, text out: chat template (docs/model.md §3.6), block-diffusion generation
// (docs/model.md §3.2), text streamed as canvases commit, summary on stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>

#include "cli.h"
#include "dgemma/error.h"
#include "generate/generate.h"
#include "generation_flags.h"
#include "image_inputs.h"
#include "interrupt.h"
#include "model_flags.h"
#include "model_source.h"
#include "prompt_file.h"
#include "quiet_input.h"
#include "stream_printer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::cli {
namespace {

int run_run(const Args& args) {
  ModelFlags mf;
  GenerationFlags gf;
  ImageFlags imf;
  std::string prompt, prompt_file, system, tokenizer_flag, template_name = "auto";
  bool raw = false, thinking = false, visualize = false, as_json = false, special = false, quiet = false;
  FlagParser p(
      "dgemma run [-m DIR] -p \"text\" [--image FILE]... [-n N] [--seed N] [--visualize | --json]",
      std::string("Generates a reply to one prompt. The prompt goes through the model's chat template\n"
                  "(Gemma 4: <bos><|turn>user\\n...<turn|>\\n<|turn>model\\n plus the empty thought\n"
                  "channel unless --thinking); --raw encodes the text as is, with the tokenizer's BOS.\n"
                  "The reply is printed as each canvas commits; it ends at the first EOS and has at most\n"
                  "-n tokens (whole canvases are generated; the output is trimmed). A summary (prompt\n"
                  "tokens, canvases, steps per canvas, positions/s, tokens/s, time to the first\n"
                  "committed token, peak memory) goes to stderr.\n"
                  "--visualize: on a terminal the canvas is redrawn in place at every denoising step\n"
                  "(accepted tokens bold green, noise dimmed, step counter and mean entropy); when stdout\n"
                  "is not a terminal it prints one line per step instead (accepted tokens in place, '_'\n"
                  "for noise) and then the final text.\n"
                  "(the last frame of a canvas shows its argmax: what it commits). NO_COLOR drops the\n"
                  "colours (noise shows as '_'); TERM=dumb prints only the text.\n"
                  "--json: JSON lines {\"event\":\"step\",...,\"argmax\",\"final\"} per step,\n"
                  "{\"event\":\"canvas\",...,\"text\":...} per canvas and a final {\"event\":\"done\",...}\n"
                  "with the text, tokens and timings.\n"
                  "The prompt plus the whole canvases for -n must fit in the context size (-c, default the\n"
                  "model's max_position_embeddings); a request that does not is refused before the model\n"
                  "loads. Ctrl-C stops generation: the text so far and the summary are printed and the exit\n"
                  "status is 130 (a second Ctrl-C exits at once).\n"
                  "--image FILE (PNG, JPEG or WebP; repeatable) puts pictures before the text of the user\n"
                  "turn, each expanded to its soft tokens; the model needs a vision tower (docs/image.md).\n\n") +
          kDefaultModelHelp);
  mf.add_to(p);
  p.add_string("--tokenizer", &tokenizer_flag, "tokenizer.json (default: DIR/tokenizer.json)", "FILE");
  p.add_string("-p,--prompt", &prompt, "the prompt ('-' reads it from stdin)", "TEXT");
  p.add_string("-f,--file", &prompt_file,
               "read the prompt from FILE ('-': stdin), without its final line breaks; instead of -p", "FILE");
  p.add_string("--system", &system, "system message", "TEXT");
  p.add_bool("--thinking", &thinking, "enable thinking (Gemma 4 <|think|> system turn)");
  p.add_bool("--raw", &raw, "no chat template: encode the prompt as is (BOS per the tokenizer)");
  p.add_string("--chat-template", &template_name, "auto, gemma4 or gemma3", "NAME");
  imf.add_to(p);
  gf.add_to(p);
  p.add_bool("--visualize", &visualize, "show the denoising of every canvas");
  p.add_bool("--json", &as_json, "JSON lines of step/canvas/done events on stdout");
  p.add_bool("--special", &special, "keep special tokens in the printed text");
  p.add_bool("-q,--quiet", &quiet, "no notes or summary on stderr");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw UsageError("run: unexpected argument '" + p.positional()[0] + "'");
  if (p.given("-p") && p.given("-f")) throw UsageError("run: give the prompt with -p or -f, not both");
  if (!p.given("-p") && !p.given("-f")) throw UsageError("run: give a prompt with -p TEXT or -f FILE");
  if (visualize && as_json) throw UsageError("run: --visualize and --json exclude each other");
  if (raw && (!system.empty() || thinking)) throw UsageError("run: --raw excludes --system and --thinking");
  if (raw && !imf.files.empty()) throw UsageError("run: --image needs the chat template, not --raw");
  if (p.given("-f"))
    prompt = read_prompt_file(prompt_file);
  else if (prompt == "-")
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (prompt.find_first_not_of(" \t\r\n") == std::string::npos && !quiet)
    std::fprintf(stderr, "warning: the prompt is empty%s\n",
                 raw ? "" : ": the model gets only the chat template's turn markers");

  const auto t0 = std::chrono::steady_clock::now();
  mf.model_dir = resolve_model_dir(mf, quiet);
  const Tokenizer tokenizer = load_model_tokenizer(tokenizer_flag, mf.model_dir);
  const GenerationConfig config = gf.resolve(mf.model_dir, quiet, mf.config);
  // Pictures are decoded before the model loads: a bad file fails at once.
  const std::vector<VisionInput> images =
      imf.files.empty() ? std::vector<VisionInput>()
                        : vision_inputs(load_image_files(imf.files, read_image_processor_config(mf.model_dir),
                                                         imf.limits(), nullptr));
  std::vector<int32_t> ids;
  int64_t image_tokens = 0;  // what the placeholders expand to (BOI, soft tokens, EOI; one placeholder each already)
  if (raw) {
    ids = tokenizer.encode(prompt, true);
  } else {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system, {}});
    std::optional<std::vector<ChatContentPart>> parts;
    if (!images.empty()) {  // the pictures first, then the text (Transformers' examples' order)
      parts.emplace(images.size(), ChatContentPart{"image", "", ""});
      parts->push_back({"text", prompt, ""});
      for (const VisionInput& image : images) image_tokens += image.n_soft + 1;
    }
    messages.push_back({"user", prompt, parts});
    ids = encode_chat(tokenizer, messages, true, thinking, parse_chat_template_kind(template_name));
  }
  // Refuse a request that cannot fit before loading the model.
  check_context_fits(config, int64_t(ids.size()) + image_tokens, 0, model_canvas_length(mf.model_dir, mf.config));
  mf.no_progress = mf.no_progress || quiet;  // -q: no progress bar either
  auto model = mf.load();
  quiet = quiet || !mf.is_output_rank();  // under MPI only rank 0 reports
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!images.empty()) {
    model_image_processor(*model, mf.model_dir);  // the tower exists and agrees with the processor
    std::vector<int64_t> counts;
    for (const VisionInput& image : images) counts.push_back(image.n_soft);
    ids = expand_image_placeholders(ids, counts, model_image_tokens(*model));
  }

  const uint64_t seed = gf.resolve_seed();
  RandomDraws draws(seed);
  StreamOptions so;
  so.mode = as_json ? StreamMode::kJson : visualize ? StreamMode::kVisualize : StreamMode::kText;
  so.terminal = terminal_caps(stdout);
  so.interruptible = true;
  so.special = special;
  so.max_tokens = config.max_new_tokens;
  so.eos_token_ids = config.eos_token_ids;
  so.max_denoising_steps = config.max_denoising_steps;
  StreamPrinter printer(tokenizer, stdout, so);
  const InterruptHandler interrupts;
  const QuietInput quiet_keys(STDIN_FILENO);  // keys typed meanwhile: not echoed into the reply (quiet_input.h)
  printer.start();
  const GenerationResult result = generate(*model, ids, config, draws, &printer, {}, images);
  json::Object extra;
  extra.emplace_back("seed", json::Value(seed));
  const GenerationStats stats = printer.finish(result, model->canvas_length(), extra);
  if (result.cancelled) std::fprintf(stderr, "dgemma: interrupted (Ctrl-C): generation stopped\n");
  if (!quiet)
    std::fprintf(stderr, "%s\nload time         %.2f s (model, tokenizer)\nseed              %llu\n",
                 format_summary(stats).c_str(), load_seconds, (unsigned long long)seed);
  return result.cancelled ? kInterruptedExitCode : 0;
}

const Subcommand kRun("run", "generate text from a prompt (default model: random weights, no download)", run_run);

}  // namespace
}  // namespace dgemma::cli
