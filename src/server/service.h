#pragma once
// The completion service behind the HTTP endpoints, free of sockets: it turns
// a validated CompletionRequest into a prompt (chat template or raw text),
// checks the server limits, queues a job on the scheduler and delivers what
// the job produces as a sequence of events (drafts, text, done/error) that
// the HTTP layer formats as one JSON answer or as SSE chunks.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/vision_input.h"
#include "image/image_processor_config.h"

#include "generate/generation_config.h"
#include "server/completion_text.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/request_images.h"
#include "server/scheduler.h"
#include "server/token_logprobs.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/image_placeholders.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::server {

using Clock = std::chrono::steady_clock;

struct ServiceOptions {
  std::string model_name = "dgemma";
  GenerationConfig defaults;  // generation_config.json + server flags
  ChatTemplateKind template_kind = ChatTemplateKind::kAuto;
  bool thinking = false;             // Gemma 4 <|think|> system turn
  int64_t default_max_tokens = 256;  // when a request gives none
  int64_t max_tokens_limit = 4096;   // largest max_tokens accepted
  // Longer prompts get 400 context_length_exceeded. So does a prompt whose
  // max_tokens, rounded up to whole canvases, does not fit
  // defaults.context_size (> 0); a request without max_tokens gets the
  // default shrunk to what fits instead.
  int64_t max_prompt_tokens = 8192;
  // true: control-token text in chat message content ("<turn|>") becomes
  // control ids, as in the reference; false (default): content is plain text.
  bool special_tokens_in_content = false;
  int slots = 1;           // in-flight sequences
  int64_t max_queue = 64;  // waiting requests beyond the slots; more get 429
  // The model's max_position_embeddings (0: unknown), which /v1/models and
  // /props report beside the context size in force (defaults.context_size).
  int64_t trained_context_length = 0;
  // Images (docs/server.md §8): whether the model has a vision tower, how
  // its processor prepares a picture, the placeholder ids the prompt's image
  // parts expand to, and what a request may send.
  bool vision = false;
  ImageProcessorConfig image_config;
  ImageTokenIds image_tokens;
  ImageRequestLimits image_limits;
};

struct StreamEvent {
  enum class Kind { kDraft, kText, kDone, kError };
  Kind kind = Kind::kText;
  std::string text;  // kText: new committed text; kDraft: the canvas's draft; kError: the message
  // kText with logprobs asked for: the answer tokens this text completes
  // (their text may arrive with a later event when it could begin a stop string).
  std::vector<AnswerToken> logprobs;

  // kDraft: one denoising step of the canvas being generated.
  int64_t canvas = 0, step = 0, max_steps = 0, accepted = 0, canvas_length = 0;
  float mean_entropy = 0;
  std::string mask;  // per position '1' accepted / '0' noise

  // kDone
  FinishReason finish = FinishReason::kNone;  // kToolCalls when tool_calls is not empty
  std::vector<ToolCall> tool_calls;
  int64_t prompt_tokens = 0, completion_tokens = 0, canvases = 0, steps = 0;
  double queue_seconds = 0, ttft_seconds = 0, total_seconds = 0;
};

// One admitted request: a scheduler job and the channel its events go through.
class ActiveRequest final : public Job {
 public:
  struct Setup {
    std::vector<int32_t> prompt;
    GenerationConfig config;
    int64_t max_tokens = 0;
    std::vector<std::string> stop;
    uint64_t seed = 0;
    // The prompt's pictures, in order (shared by a request's choices).
    std::shared_ptr<const std::vector<VisionInput>> images;
    bool drafts = false;
    bool logprobs = false;     // per answer token (docs/server.md §5)
    int64_t top_logprobs = 0;  // alternatives per token
    Clock::time_point arrived;
    // Tool calling (docs/server.md §7): the answer is read for
    // tool calls; `tool_prefill` is the call text the prompt ends with
    // ("required" or a named tool_choice); max_tool_calls 1 when
    // parallel_tool_calls is false.
    bool tools = false;
    std::string tool_prefill;
    int max_tool_calls = 0;
    std::string tool_call_id;  // "call_...", the id (prefix) of the calls
  };
  ActiveRequest(const Tokenizer& tokenizer, Metrics& metrics, Setup setup);

  // Waits up to `timeout` for the next event; false on timeout. After kDone
  // or kError nothing more comes.
  bool next(StreamEvent& out, std::chrono::milliseconds timeout);

  // Waits up to `timeout` until the job runs on a sequence or ends without
  // running (dropped: an error event waits); false on timeout.
  bool wait_started(std::chrono::milliseconds timeout);
  bool started() const { return started_.load(); }

  int64_t prompt_tokens() const { return int64_t(setup_.prompt.size()); }
  uint64_t seed() const { return setup_.seed; }
  // The generation parameters the request resolved to.
  const GenerationConfig& config() const { return setup_.config; }
  Clock::time_point arrived() const { return setup_.arrived; }

  void run(DiffusionModel& sequence) override;
  void dropped() override;

 private:
  void push(StreamEvent event);

  const Tokenizer& tokenizer_;
  Metrics& metrics_;
  Setup setup_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool closed_ = false;  // kDone or kError pushed
  std::atomic<bool> started_{false};
};

class CompletionService {
 public:
  // `model` and `tokenizer` must outlive the service.
  CompletionService(SharedModel& model, const Tokenizer& tokenizer, ServiceOptions options, Metrics& metrics);
  ~CompletionService();

  // Builds the prompt, checks limits and queues the request. Throws ApiError:
  // 400 (prompt too long or prompt + max_tokens over the context size, token
  // id outside the vocabulary, invalid temperature schedule, template
  // failure), 429 (queue full), 503 (stopping).
  // submit: a request of one choice (n = 1). submit_choices: its n choices
  // (choice i with seed + i), all queued or none (429).
  std::shared_ptr<ActiveRequest> submit(const CompletionRequest& request, Clock::time_point arrived);
  std::vector<std::shared_ptr<ActiveRequest>> submit_choices(const CompletionRequest& request,
                                                             Clock::time_point arrived);
  // The client went away: the request leaves the queue, or its generation
  // ends before the next decoder pass.
  void cancel(const std::shared_ptr<ActiveRequest>& request);
  // Graceful stop: new requests get 503 from now on and queued ones are
  // dropped (their events end with an error); running generations finish.
  void drain();
  bool draining() const { return scheduler_.closed(); }
  // Cancels everything and stops the workers.
  void shutdown();

  const ServiceOptions& options() const { return options_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  int64_t vocab_size() const { return vocab_size_; }
  int64_t canvas_length() const { return canvas_length_; }
  RequestLimits request_limits() const;
  Scheduler& scheduler() { return scheduler_; }
  // A fresh "chatcmpl-..."/"cmpl-..." id.
  std::string new_id(const char* prefix);

 private:
  // `prefill`: tool-call text appended after the chat prompt (tool_choice).
  // `images`: the request's pictures, whose placeholders the prompt expands.
  std::vector<int32_t> build_prompt(const CompletionRequest& request, const std::string& prefill,
                                    std::span<const VisionInput> images) const;
  GenerationConfig build_config(const CompletionRequest& request, int64_t max_tokens) const;
  // max_tokens of `request` checked against the context size (ServiceOptions).
  int64_t fit_max_tokens(const CompletionRequest& request, int64_t prompt_tokens) const;

  const Tokenizer& tokenizer_;
  ServiceOptions options_;
  Metrics& metrics_;
  int64_t vocab_size_;
  int64_t canvas_length_;
  // The longest token text in bytes: no token covers more prompt bytes, so a
  // prompt longer than max_prompt_tokens times this is refused untokenized.
  uint64_t max_token_bytes_;
  Scheduler scheduler_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
  uint64_t id_counter_ = 0;
};

}  // namespace dgemma::server
