// dgemma serve [-m DIR] [--host H] [--port P] — an OpenAI-compatible HTTP
// server (src/server): chat and text completions (JSON or SSE streams, with
// optional per-step drafts), models, health and Prometheus metrics; drains on
// SIGINT/SIGTERM.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cli.h"
#include "dgemma/error.h"
#include "generation_flags.h"
#include "image_inputs.h"
#include "model_flags.h"
#include "model_source.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/service.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::cli {
namespace {

constexpr int kMmapThresholdBytes = 256 * 1024;

void write_port_file(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << port << "\n";
    if (!f) throw Error("--port-file: cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);  // readers never see a partial file
}

std::string default_alias(const std::string& model_flag) {
  if (model_flag.empty()) return "dgemma-default";
  std::filesystem::path p(model_flag);
  if (!p.has_filename()) p = p.parent_path();  // "DIR/"
  const std::string name = p.filename().string();
  return name.empty() || name == "." ? "dgemma" : name;
}

int run_serve(const Args& args) {
  ModelFlags mf;
  GenerationFlags gf;
  std::string host = "127.0.0.1", port_file, alias, tokenizer_flag, template_name = "auto";
  int64_t port = 8080, parallel = 2, max_queue = 64, max_body = 1 << 20, max_prompt_tokens = 8192;
  int64_t max_tokens_limit = 4096, http_threads = 0, drain_timeout = 60;
  int64_t request_timeout = 30, max_connections = 512, max_connections_per_client = 256;
  bool thinking = false, quiet = false, special_tokens_in_content = false, allow_remote_images = false;
  int64_t max_image_bytes = int64_t(server::ImageRequestLimits::kDefaultMaxImageBytes);
  int64_t max_images = server::ImageRequestLimits::kDefaultMaxImages;
  int64_t max_image_pixels = int64_t(ImageLimits::kDefaultMaxPixels);
  std::string api_key;
  FlagParser p(
      "dgemma serve [-m DIR] [--host 127.0.0.1] [--port 8080] [--parallel N] [--max-queue N]",
      std::string(
          "OpenAI-compatible HTTP server. Endpoints:\n"
          "  POST /v1/chat/completions, POST /v1/completions   (\"stream\": true for server-sent events)\n"
          "  GET  /v1/models, /v1/models/{id} (with max_model_len), /health, /metrics (Prometheus text)\n"
          "  POST /tokenize, POST /detokenize, GET /props   (as llama.cpp's server)\n"
          "Request fields: model, messages | prompt, max_tokens (or max_completion_tokens; honoured exactly),\n"
          "temperature (scales the model's t_max..t_min schedule so the first step runs at it) or t_min/t_max,\n"
          "seed, stop (up to 4 strings), n = 1, stream, stream_options {include_usage, include_drafts};\n"
          "extension: max_denoising_steps. include_drafts adds a chunk per denoising step with a\n"
          "\"dgemma_draft\" object (canvas, step, accepted, mask, text) for UIs that show the canvas converging.\n"
          "temperature 0 is greedy (draw B is the argmax) and, without a seed, uses seed 0: repeatable.\n"
          "Other OpenAI fields are accepted only with values that change nothing (top_p 1, n 1, user, ...);\n"
          "anything else gets 400 unsupported_parameter naming it. Chat message content is plain text:\n"
          "control-token text such as \"<turn|>\" in it is not a control token (--special-tokens-in-content).\n"
          "Requests run --parallel sequences at a time, each with its own KV cache. Their denoising steps\n"
          "are batched: the decoder passes the running sequences ask for run as one pass over all their\n"
          "canvases (at most 8 per pass, each sequence getting the logits it would get alone), while encoder\n"
          "passes (prompts, committed canvases) take the model one at a time. Up to --max-queue more wait\n"
          "(then 429 with Retry-After). A client that disconnects cancels its request. prompt + max_tokens\n"
          "(whole canvases) must fit -c/--ctx-size.\n"
          "Images (a model with a vision tower): user message parts {\"type\": \"image_url\", \"image_url\":\n"
          "{\"url\": \"data:image/png;base64,...\"}} (PNG, JPEG, WebP), at most --max-images per request, each at\n"
          "most --max-image-bytes and --max-image-pixels; a bad picture gets 400 naming messages[i].content[j].\n"
          "http(s) URLs are refused unless --allow-remote-images. --max-body-size then defaults to what that\n"
          "many base64 pictures need.\n"
          "SIGINT/SIGTERM drain: new and queued requests get 503, running ones finish (streams end with\n"
          "[DONE]), then the server exits 0; a second signal or --drain-timeout stops at once. Each request\n"
          "is logged on stderr (-q: not). Flags -n, --max-denoising-steps, --t-min, ... set the defaults of\n"
          "every request.\n\n") +
          kDefaultModelHelp);
  mf.add_to(p);
  p.add_string("--tokenizer", &tokenizer_flag, "tokenizer.json (default: DIR/tokenizer.json)", "FILE");
  p.add_string("--chat-template", &template_name, "auto, gemma4 or gemma3", "NAME");
  p.add_bool("--thinking", &thinking, "enable thinking (Gemma 4 <|think|> system turn) in chat prompts");
  gf.add_to(p);
  p.add_string("--host", &host, "address to listen on", "HOST");
  p.add_int("--port", &port, "port to listen on (0: any free port; see --port-file)", 0, 65535);
  p.add_string("--port-file", &port_file, "write the bound port to this file once listening", "FILE");
  p.add_string("-a,--alias", &alias, "model id served (default: the -m folder name, or dgemma-default)", "NAME");
  p.add_int("-np,--parallel", &parallel, "sequences generated at a time (each holds a KV cache and logits buffers)", 1,
            256);
  p.add_int("--max-queue", &max_queue, "requests that may wait for a sequence slot; more get 429", 0, 100000);
  p.add_int("--max-body-size", &max_body,
            "largest request body in bytes; larger get 413 (default 1 MiB, or room for --max-images base64 "
            "pictures when the model takes images)",
            1024);
  p.add_int("--max-images", &max_images, "pictures per chat request; more get 400", 0, 64);
  p.add_int("--max-image-bytes", &max_image_bytes, "bytes of one picture (decoded from base64); more get 400", 1);
  p.add_int("--max-image-pixels", &max_image_pixels,
            "width x height of one picture, checked before decoding; more get 400", 1);
  p.add_bool("--allow-remote-images", &allow_remote_images,
             "fetch http(s) image URLs (no redirects; --max-image-bytes and a 10 s timeout apply); "
             "without it they get 400 asking for a data: URL");
  p.add_int("--max-prompt-tokens", &max_prompt_tokens, "longest prompt in tokens; longer get 400", 1);
  p.add_int("--max-tokens-limit", &max_tokens_limit, "largest max_tokens a request may ask for; more get 400", 1);
  p.add_int("--threads-http", &http_threads, "HTTP worker threads (0: parallel + max-queue + 16, at most 512)", 0,
            4096);
  p.add_int("--request-timeout", &request_timeout,
            "seconds a request may take to arrive whole (request line to last body byte); slower get 408", 1, 3600);
  // The HTTP library refuses descriptors of 1024 and above (FD_SETSIZE); refused
  // connections (up to 64 more) and the model's files hold descriptors too.
  p.add_int("--max-connections", &max_connections, "open connections in total; more get 503", 1, 900);
  p.add_int("--max-connections-per-client", &max_connections_per_client,
            "open connections from one client address; more get 429 (at most --max-connections)", 1, 900);
  p.add_string("--api-key", &api_key,
               "require \"Authorization: Bearer KEY\" (else 401) on every route but /health and /metrics "
               "(default: $DGEMMA_API_KEY)",
               "KEY");
  p.add_bool("--special-tokens-in-content", &special_tokens_in_content,
             "encode control-token text in chat message content (\"<turn|>\") as control tokens, as the "
             "reference template does (lets a user forge turns)");
  p.add_int("--drain-timeout", &drain_timeout,
            "seconds SIGINT/SIGTERM wait for running requests before cutting them (0: no wait)", 0);
  p.add_bool("-q,--quiet", &quiet, "no notes or request log on stderr");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw UsageError("serve: unexpected argument '" + p.positional()[0] + "'");
  if (p.given("--seed")) throw UsageError("serve: --seed is not a server flag; requests give \"seed\"");
  if (!mf.plan.empty()) throw UsageError("serve: --plan is not supported (one model process serves every request)");
  if (max_connections_per_client > max_connections)
    throw UsageError("option --max-connections-per-client: " + std::to_string(max_connections_per_client) +
                     " is more than --max-connections (" + std::to_string(max_connections) + ")");
  if (!p.given("--api-key"))
    if (const char* env = std::getenv("DGEMMA_API_KEY")) api_key = env;
  if (p.given("--api-key") && api_key.empty()) throw UsageError("option --api-key: the key must not be empty");

  // Signals go to one thread that stops the server; every other thread
  // (model thread pool, HTTP workers) inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Request buffers of 256 KiB or more (bodies, prompts, token lists) are
  // mapped and unmapped: without a fixed threshold glibc raises it after the
  // first such free, and every HTTP worker's arena then keeps the largest
  // request it saw for the life of the server (docs/server.md §3).
  mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);

  const std::string model_flag = mf.model_dir;
  mf.model_dir = resolve_model_dir(mf, quiet);
  const Tokenizer tokenizer = load_model_tokenizer(tokenizer_flag, mf.model_dir);
  const GenerationConfig config = gf.resolve(mf.model_dir, quiet);
  mf.no_progress = mf.no_progress || quiet;  // -q: no progress bar either
  auto model = mf.load();

  server::ServiceOptions so;
  so.model_name = alias.empty() ? default_alias(model_flag) : alias;
  so.defaults = config;
  so.template_kind = parse_chat_template_kind(template_name);
  so.thinking = thinking;
  so.max_tokens_limit = max_tokens_limit;
  so.default_max_tokens = std::min(config.max_new_tokens, max_tokens_limit);
  so.max_prompt_tokens = max_prompt_tokens;
  so.special_tokens_in_content = special_tokens_in_content;
  so.slots = int(parallel);
  so.max_queue = max_queue;
  so.trained_context_length = model->config().max_position_embeddings;
  so.vision = model->config().vision_tower;
  if (so.vision) {
    so.image_config = model_image_processor(*model, mf.model_dir);
    so.image_tokens = model_image_tokens(*model);
  }
  so.image_limits.max_image_bytes = uint64_t(max_image_bytes);
  so.image_limits.max_images = max_images;
  so.image_limits.max_image_pixels = uint64_t(max_image_pixels);
  so.image_limits.allow_remote = allow_remote_images;
  if (so.vision && !p.given("--max-body-size"))
    max_body = std::max(max_body, server::body_size_for_images(so.image_limits));
  server::Metrics metrics;
  server::SharedModel shared(*model);
  server::CompletionService service(shared, tokenizer, so, metrics);
  server::HttpOptions ho;
  ho.host = host;
  ho.port = int(port);
  ho.max_body_bytes = max_body;
  ho.threads = int(http_threads);
  ho.request_timeout_seconds = int(request_timeout);
  ho.max_connections = int(max_connections);
  ho.max_connections_per_client = int(max_connections_per_client);
  ho.api_key = api_key;
  ho.log_requests = !quiet;
  server::HttpServer http(service, metrics, ho);
  const int bound = http.bind();
  if (!port_file.empty()) write_port_file(port_file, bound);
  if (!quiet)
    std::fprintf(stderr,
                 "dgemma serve: listening on http://%s:%d (model \"%s\", %lld sequence slots, queue %lld, "
                 "canvas %lld)\n",
                 host.c_str(), bound, so.model_name.c_str(), (long long)parallel, (long long)max_queue,
                 (long long)model->canvas_length());

  std::atomic<bool> done{false};
  std::atomic<int> caught{0};
  std::thread signal_thread([&] {
    const timespec tick{0, 100 * 1000 * 1000};
    const auto wait_signal = [&] { return sigtimedwait(&stop_signals, nullptr, &tick); };
    int sig = 0;
    while (!done && (sig = wait_signal()) <= 0) {
    }
    if (sig <= 0) return;
    caught = sig;
    // Drain: refuse new and queued requests, let running ones finish.
    http.drain();
    if (!quiet)
      std::fprintf(stderr,
                   "dgemma serve: signal %d: draining (%lld running; new requests get 503; up to %llds, "
                   "a second signal stops at once)\n",
                   sig, (long long)service.scheduler().in_flight(), (long long)drain_timeout);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(drain_timeout);
    while (!http.idle()) {
      if (wait_signal() > 0) {
        if (!quiet) std::fprintf(stderr, "dgemma serve: second signal: stopping now\n");
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        if (!quiet) std::fprintf(stderr, "dgemma serve: --drain-timeout reached: cutting the running requests\n");
        break;
      }
    }
    http.stop();
  });
  const bool served = http.serve();
  done = true;
  signal_thread.join();
  service.shutdown();
  if (!quiet) {
    if (caught != 0)
      std::fprintf(stderr, "dgemma serve: stopped by signal %d\n", caught.load());
    else
      std::fprintf(stderr, "dgemma serve: stopped\n");
  }
  return served || caught != 0 ? 0 : 1;
}

const Subcommand kServe("serve", "OpenAI-compatible HTTP server (chat/completions, streaming, metrics)", run_serve);

}  // namespace
}  // namespace dgemma::cli
