// dgemma chat [-m DIR] — multi-turn REPL on stdin lines, reusing the KV cache
// of earlier turns (docs/model.md §3.6 "Multi-turn with cache reuse").
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "dgemma/error.h"
#include "generate/chat_session.h"
#include "generate/generate.h"
#include "generation_flags.h"
#include "image_inputs.h"
#include "interrupt.h"
#include "line_reader.h"
#include "model_flags.h"
#include "model_source.h"
#include "prompt_file.h"
#include "quiet_input.h"
#include "stream_printer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::cli {
namespace {

// The slash commands of a chat session, for /help and the help text.
struct ChatCommand {
  const char* name;
  const char* help;
};
constexpr ChatCommand kChatCommands[] = {
    {"/help", "list these commands"},
    {"/image", "PATH: a picture (PNG, JPEG, WebP) for the next message; repeat for several"},
    {"/reset", "start a new conversation (drops the KV cache)"},
    {"/quit", "exit (also /exit or end of input)"},
};

std::string command_list(const char* indent) {
  std::string out;
  for (const ChatCommand& c : kChatCommands) {
    char line[128];
    std::snprintf(line, sizeof line, "%s%-8s %s\n", indent, c.name, c.help);
    out += line;
  }
  return out;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

int run_chat(const Args& args) {
  ModelFlags mf;
  GenerationFlags gf;
  ImageFlags imf;
  std::string system, tokenizer_flag, template_name = "auto", first_file;
  bool thinking = false, special = false, verbose = false, quiet = false;
  FlagParser p(
      "dgemma chat [-m DIR] [--system TEXT] [-f FILE] [--image FILE]... [-n N] [--seed N] [--verbose]",
      std::string("Multi-turn chat: each line read from stdin is a user turn; the reply is printed as\n"
                  "its canvases commit. Works with a pipe as well as a terminal. -f FILE makes the file's\n"
                  "text (all its lines) the first user turn. Commands:\n") +
          command_list("  ") +
          std::string("The KV cache of earlier turns is reused: each turn encodes only the tokens the cache\n"
                      "does not hold yet (the previous reply's last canvas, which generation never encodes,\n"
                      "plus the new user turn). The conversation keeps each reply as generated (up to its\n"
                      "EOS, at most -n tokens), closed with the template's end-of-turn. Turn t uses seed\n"
                      "--seed + t. --verbose prints the cache reuse and a summary per turn on stderr.\n"
                      "Context: when the conversation plus the next reply (whole canvases for -n) would exceed\n"
                      "the context size (-c, default the model's max_position_embeddings), the oldest turns are\n"
                      "dropped (the system prompt stays) and a note on stderr says so.\n"
                      "Ctrl-C during a reply stops it: the part already shown stays in the conversation (closed\n"
                      "as a finished reply) and the session goes on. Ctrl-C at the prompt abandons the line; a\n"
                      "second one there (or two in quick succession during a reply) exits with status 130.\n"
                      "On a terminal the input line can be edited (arrows, Home/End, Ctrl-A/E/K/U/W, Up/Down\n"
                      "for this session's history); from a pipe, lines are read as they are.\n"
                      "Pictures (a model with a vision tower): --image FILE goes with the first message, /image PATH\n"
                      "with the next one; each is shown to the model before the message's text.\n\n") +
          kDefaultModelHelp);
  mf.add_to(p);
  p.add_string("--tokenizer", &tokenizer_flag, "tokenizer.json (default: DIR/tokenizer.json)", "FILE");
  p.add_string("--system", &system, "system message of every conversation", "TEXT");
  p.add_string("-f,--file", &first_file, "the first user turn: the text of FILE (all its lines)", "FILE");
  p.add_bool("--thinking", &thinking, "enable thinking (Gemma 4 <|think|> system turn)");
  p.add_string("--chat-template", &template_name, "auto, gemma4 or gemma3", "NAME");
  imf.add_to(p);
  gf.add_to(p);
  p.add_bool("--special", &special, "keep special tokens in the printed text");
  p.add_bool("-v,--verbose", &verbose, "per-turn cache reuse and summary on stderr");
  p.add_bool("-q,--quiet", &quiet, "no notes on stderr");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw UsageError("chat: unexpected argument '" + p.positional()[0] + "'");
  if (p.given("-f") && first_file == "-")
    throw UsageError("chat: -f - would read all of stdin, where chat reads its turns; give a file");
  // Read before the model loads, so that a missing file fails at once.
  std::string first_message = p.given("-f") ? trim(read_prompt_file(first_file)) : std::string();
  if (p.given("-f") && first_message.empty()) throw Error("-f/--file " + first_file + ": the file holds no text");

  mf.model_dir = resolve_model_dir(mf, quiet);
  const Tokenizer tokenizer = load_model_tokenizer(tokenizer_flag, mf.model_dir);
  const GenerationConfig config = gf.resolve(mf.model_dir, quiet, mf.config);
  const uint64_t seed = gf.resolve_seed();
  mf.no_progress = mf.no_progress || quiet;  // -q: no progress bar either
  auto model = mf.load();
  if (!mf.is_output_rank()) {  // under MPI only rank 0 reports
    quiet = true;
    verbose = false;
  }
  ChatSession session(*model, tokenizer, parse_chat_template_kind(template_name), system, thinking);
  // Pictures waiting for the next message: --image for the first, /image later.
  std::vector<VisionInput> pictures;
  std::optional<ImageProcessorConfig> image_config;
  const auto add_picture = [&](const std::string& path) {
    if (!image_config) {
      image_config = model_image_processor(*model, mf.model_dir);  // throws when there is no tower
      session.set_image_tokens(model_image_tokens(*model));
    }
    for (VisionInput& v : vision_inputs(load_image_files({path}, *image_config, imf.limits(), model->thread_pool())))
      pictures.push_back(std::move(v));
  };
  for (const std::string& f : imf.files) add_picture(f);
  session.set_context_limit(config.context_size, reply_positions(config.max_new_tokens, model->canvas_length()));

  const bool interactive = is_tty(stdin);
  const TerminalCaps out_caps = terminal_caps(stdout);
  if (interactive && !quiet)
    std::fprintf(stderr, "dgemma chat: type a message; /help lists the commands, /reset starts over, /quit exits.\n");
  const InterruptHandler interrupts;
  LineReader reader(interactive && out_caps.cursor && is_tty(stdin));
  std::string line;
  int64_t turn = 0;
  int status = 0;
  bool interrupted_at_prompt = false;
  while (true) {
    std::string text;
    if (!first_message.empty()) {  // -f FILE: the first turn, before any line from stdin (never a command)
      text = std::move(first_message);
      first_message.clear();
      if (!quiet) std::fprintf(stderr, "dgemma: first message from %s\n", first_file.c_str());
    } else {
      const LineReader::Status got = reader.read(interactive ? "> " : "", line);
      if (got == LineReader::Status::kInterrupted) {
        take_interrupt();
        if (interrupted_at_prompt) {
          std::fprintf(stderr, "dgemma: interrupted twice at the prompt: exiting\n");
          return kInterruptedExitCode;
        }
        interrupted_at_prompt = true;
        std::fprintf(stderr, "\ndgemma: (Ctrl-C again to exit, or /quit)\n");
        continue;
      }
      interrupted_at_prompt = false;
      if (got == LineReader::Status::kEof) break;
      text = trim(line);
      if (text.empty()) continue;
      if (text == "/quit" || text == "/exit") break;
      if (text == "/reset") {
        session.reset();
        pictures.clear();
        if (!quiet) std::fprintf(stderr, "dgemma: conversation reset\n");
        continue;
      }
      if (text.rfind("/image", 0) == 0 && (text.size() == 6 || text[6] == ' ')) {
        const std::string path = trim(text.substr(6));
        if (path.empty()) {
          std::fprintf(stderr, "dgemma: /image needs a path: /image photo.jpg\n");
          continue;
        }
        try {
          add_picture(path);
          if (!quiet)
            std::fprintf(stderr, "dgemma: %s (%lld soft tokens) goes with the next message\n", path.c_str(),
                         (long long)pictures.back().n_soft);
        } catch (const Error& e) {
          std::fprintf(stderr, "error: %s\n", e.what());
          status = 1;
        }
        continue;
      }
      if (text == "/help") {
        std::fprintf(stderr, "%s", command_list("").c_str());
        continue;
      }
      if (text[0] == '/') {
        std::fprintf(stderr, "dgemma: unknown command %s (/help lists the commands)\n", text.c_str());
        continue;
      }
    }

    ChatSession::TurnInput in;
    try {
      in = session.begin_turn(text, pictures);
      pictures.clear();
    } catch (const Error& e) {  // does not fit in the context size: skip this message
      std::fprintf(stderr, "error: %s\n", e.what());
      status = 1;
      continue;
    }
    if (in.dropped_turns > 0)
      std::fprintf(stderr, "dgemma: context size %lld (-c/--ctx-size) reached: dropped the %lld oldest turn%s\n",
                   (long long)config.context_size, (long long)in.dropped_turns, in.dropped_turns == 1 ? "" : "s");
    if (verbose)
      std::fprintf(stderr, "dgemma: turn %lld: encoded %lld new tokens, reused %lld cached%s\n", (long long)turn,
                   (long long)in.new_ids.size(), (long long)in.reused, in.cache_reset ? " (cache rebuilt)" : "");
    RandomDraws draws(seed + uint64_t(turn));
    StreamOptions so;
    so.mode = StreamMode::kText;
    so.terminal = out_caps;
    so.interruptible = true;
    so.special = special;
    so.max_tokens = config.max_new_tokens;
    so.eos_token_ids = config.eos_token_ids;
    so.max_denoising_steps = config.max_denoising_steps;
    StreamPrinter printer(tokenizer, stdout, so);
    // Keys typed during the reply are not echoed into it; they wait for the
    // next prompt (quiet_input.h). Its modes are back before the next read.
    std::optional<QuietInput> quiet_keys;
    quiet_keys.emplace(STDIN_FILENO);
    printer.start();
    const GenerationResult result = generate(*model, in.new_ids, config, draws, &printer, {}, in.images);
    GenerationStats stats = printer.finish(result, model->canvas_length());
    quiet_keys.reset();
    session.end_turn(result, printer.tokens());  // a cancelled reply is kept as far as it was shown
    if (result.cancelled) {
      take_interrupt();
      std::fprintf(stderr, "dgemma: reply interrupted (Ctrl-C); the session goes on\n");
    }
    if (verbose) {
      stats.reused_tokens = in.reused;
      std::fprintf(stderr, "%s\n", format_summary(stats).c_str());
    }
    ++turn;
  }
  if (verbose) std::fprintf(stderr, "seed              %llu\n", (unsigned long long)seed);
  return status;
}

const Subcommand kChat("chat", "multi-turn chat on stdin, reusing the KV cache between turns", run_chat);

}  // namespace
}  // namespace dgemma::cli
