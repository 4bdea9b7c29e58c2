#include "server/service.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

#include "dgemma/error.h"
#include "generate/draws.h"
#include "generate/generate.h"
#include "generate/rng.h"
#include "server/api_error.h"
#include "tokenizer/tool_markup.h"

namespace dgemma::server {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

uint64_t longest_token_bytes(const Tokenizer& tokenizer) {
  size_t longest = 1;
  for (size_t id = 0; id < tokenizer.vocab_size(); ++id)
    longest = std::max(longest, tokenizer.id_to_piece(int32_t(id)).size());
  return longest;
}

// The bytes of text a request asks to tokenize (token-id prompts: none).
uint64_t prompt_text_bytes(const CompletionRequest& req) {
  uint64_t n = req.prompt.size();
  for (const ChatMessage& m : req.messages) {
    n += m.content.size();
    if (m.parts)
      for (const ChatContentPart& p : *m.parts) n += p.text.size();
    for (const ChatToolCall& c : m.tool_calls) n += c.name.size() + json::dump(c.arguments).size();
  }
  for (const json::Value& t : req.tools) n += json::dump(t).size();
  return n;
}

// Whether the prompt offers the request's tools and the answer is read for
// calls (docs/server.md §7.3: tool_choice "none" offers none).
bool offers_tools(const CompletionRequest& req) {
  return req.endpoint == Endpoint::kChat && !req.tools.empty() && req.tool_choice != ToolChoice::kNone;
}

// The call text the prompt ends with, so that the answer is a call:
// tool_choice "required" opens a call, a named function opens its arguments.
std::string tool_prefill(const CompletionRequest& req) {
  if (!offers_tools(req)) return {};
  if (req.tool_choice == ToolChoice::kRequired) return std::string(kToolCallBegin) + "call:";
  if (req.tool_choice == ToolChoice::kFunction)
    return std::string(kToolCallBegin) + "call:" + req.tool_choice_function + "{";
  return {};
}

}  // namespace

ActiveRequest::ActiveRequest(const Tokenizer& tokenizer, Metrics& metrics, Setup setup)
    : tokenizer_(tokenizer), metrics_(metrics), setup_(std::move(setup)) {}

void ActiveRequest::push(StreamEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  // A slow reader gets the latest draft, not a backlog of stale ones.
  if (event.kind == StreamEvent::Kind::kDraft && !events_.empty() && events_.back().kind == StreamEvent::Kind::kDraft) {
    events_.back() = std::move(event);
  } else {
    if (event.kind == StreamEvent::Kind::kDone || event.kind == StreamEvent::Kind::kError) closed_ = true;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

bool ActiveRequest::next(StreamEvent& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool ActiveRequest::wait_started(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return started_.load() || closed_; });
}

void ActiveRequest::dropped() {
  metrics_.count_generation("cancelled");
  StreamEvent e;
  e.kind = StreamEvent::Kind::kError;
  e.text = "the request was cancelled before it started";
  push(std::move(e));
}

void ActiveRequest::run(DiffusionModel& sequence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
    cv_.notify_all();
  }
  const Clock::time_point started = Clock::now();
  const double queue_seconds = seconds_between(queued_at, started);
  metrics_.observe_queue_wait(queue_seconds);

  // With tools the tool-format markers stay in the text, for the tool-call
  // reader (docs/server.md §7).
  std::vector<int32_t> kept;
  if (setup_.tools)
    for (const std::string_view marker : {kToolCallBegin, kToolCallEnd, kToolQuote})
      if (const int32_t id = tokenizer_.token_id(marker); id >= 0) kept.push_back(id);
  CompletionText text(tokenizer_, setup_.config.eos_token_ids, setup_.max_tokens, setup_.stop, std::move(kept));
  ToolCallText calls(setup_.tool_prefill, setup_.max_tool_calls);
  std::optional<Clock::time_point> first_text;
  int64_t canvases = 0, steps = 0;

  struct Observer final : GenerationObserver {
    ActiveRequest& self;
    CompletionText& text;
    ToolCallText& calls;
    std::optional<Clock::time_point>& first_text;
    int64_t& canvases;
    int64_t& steps;
    Clock::time_point last;
    bool last_stop = false;  // the stop flag of the last step (the canvas converged)
    // logprobs: the last step's per-position log-probabilities of the canvas
    // being denoised, then those of every committed canvas, of which the
    // first `sent` have gone out with text.
    std::vector<PositionLogprobs> last_step;
    std::vector<PositionLogprobs> committed;
    size_t sent = 0;
    size_t vocab = 0;  // the model's (a processed-logits row)

    Observer(ActiveRequest& s, CompletionText& t, ToolCallText& k, std::optional<Clock::time_point>& f, int64_t& c,
             int64_t& st)
        : self(s), text(t), calls(k), first_text(f), canvases(c), steps(st), last(Clock::now()) {}

    // A committed canvas is the argmax of its last step (docs/model.md §3.2):
    // that step's z holds the distribution its tokens come from.
    bool wants_processed_logits(const StepEvent& e) override {
      return self.setup_.logprobs && (e.stop || e.cur_step == 1);
    }
    void on_step(const StepEvent& e) override {
      if (e.processed_logits != nullptr) {
        last_step.clear();
        for (size_t p = 0; p < e.argmax.size(); ++p)
          last_step.push_back(position_logprobs(std::span<const float>(e.processed_logits + p * vocab, vocab),
                                                e.argmax[p], self.setup_.top_logprobs));
      }
      const Clock::time_point now = Clock::now();
      self.metrics_.add_step(seconds_between(last, now));
      last = now;
      ++steps;
      last_stop = e.stop;
      if (!self.setup_.drafts) return;
      StreamEvent d;
      d.kind = StreamEvent::Kind::kDraft;
      d.canvas = e.canvas;
      d.step = e.step;
      d.max_steps = self.setup_.config.max_denoising_steps;
      d.accepted = e.n_accepted;
      d.canvas_length = int64_t(e.argmax.size());
      d.mean_entropy = e.mean_entropy;
      d.mask.reserve(e.accepted.size());
      for (const uint8_t a : e.accepted) d.mask += a != 0 ? '1' : '0';
      d.text = text.draft(e.argmax);
      self.push(std::move(d));
    }
    void on_canvas(const CanvasEvent& e) override {
      self.metrics_.add_canvas(last_stop);
      ++canvases;
      committed.insert(committed.end(), last_step.begin(), last_step.end());
      std::string delta = text.push(e.committed);
      if (self.setup_.tools) delta = calls.push(delta);
      if (delta.empty()) return;
      if (!first_text) {
        first_text = Clock::now();
        self.metrics_.observe_ttft(seconds_between(self.setup_.arrived, *first_text));
      }
      StreamEvent t;
      t.kind = StreamEvent::Kind::kText;
      t.text = std::move(delta);
      take_logprobs(t);
      self.push(std::move(t));
    }
    // The log-probabilities of the tokens the text covers so far and that
    // have not gone out yet.
    void take_logprobs(StreamEvent& t) {
      if (!self.setup_.logprobs) return;
      const size_t covered = std::min(size_t(text.completion_tokens()), committed.size());
      for (; sent < covered; ++sent) t.logprobs.push_back(answer_token(self.tokenizer_, committed[sent]));
    }
    // The client went away, or the answer is complete (EOS, max_tokens, a
    // stop string): no further canvas is needed.
    bool cancelled() override { return self.cancelled() || text.finished(); }
  } observer(*this, text, calls, first_text, canvases, steps);
  observer.vocab = size_t(sequence.vocab_size());

  try {
    RandomDraws draws(setup_.seed);
    generate(sequence, setup_.prompt, setup_.config, draws, &observer, {},
             setup_.images ? std::span<const VisionInput>(*setup_.images) : std::span<const VisionInput>());
  } catch (const std::exception& e) {
    metrics_.count_generation("error");
    StreamEvent err;
    err.kind = StreamEvent::Kind::kError;
    err.text = std::string("generation failed: ") + e.what();
    push(std::move(err));
    return;
  }
  if (cancelled()) {
    metrics_.count_generation("cancelled");
    StreamEvent err;
    err.kind = StreamEvent::Kind::kError;
    err.text = "the request was cancelled";
    push(std::move(err));
    return;
  }
  {
    StreamEvent t;
    t.kind = StreamEvent::Kind::kText;
    t.text = text.finished() ? std::string() : text.finish();
    if (setup_.tools) {
      t.text = calls.push(t.text);
      t.text += calls.finish(setup_.tool_call_id);
    }
    observer.take_logprobs(t);
    if (!t.text.empty() || !t.logprobs.empty()) push(std::move(t));
  }
  const Clock::time_point end = Clock::now();
  if (!first_text) {
    first_text = end;
    metrics_.observe_ttft(seconds_between(setup_.arrived, end));
  }
  StreamEvent done;
  done.kind = StreamEvent::Kind::kDone;
  done.finish = text.reason();
  done.tool_calls = calls.calls();
  if (!done.tool_calls.empty()) done.finish = FinishReason::kToolCalls;
  done.prompt_tokens = prompt_tokens();
  done.completion_tokens = text.completion_tokens();
  done.canvases = canvases;
  done.steps = steps;
  done.queue_seconds = queue_seconds;
  done.ttft_seconds = seconds_between(setup_.arrived, *first_text);
  done.total_seconds = seconds_between(setup_.arrived, end);
  metrics_.add_tokens(done.prompt_tokens, done.completion_tokens);
  metrics_.count_generation(finish_reason_name(done.finish));
  metrics_.observe_latency(done.total_seconds);
  push(std::move(done));
}

CompletionService::CompletionService(SharedModel& model, const Tokenizer& tokenizer, ServiceOptions options,
                                     Metrics& metrics)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      metrics_(metrics),
      vocab_size_(model.model().vocab_size()),
      canvas_length_(model.model().canvas_length()),
      max_token_bytes_(longest_token_bytes(tokenizer)),
      scheduler_(model, options_.slots, options_.max_queue, &metrics),
      rng_(std::random_device{}()) {
  validate_generation_config(options_.defaults, "server generation defaults");
  if (options_.default_max_tokens < 1 || options_.default_max_tokens > options_.max_tokens_limit)
    throw Error("server: the default max_tokens " + std::to_string(options_.default_max_tokens) +
                " must be in [1, max_tokens_limit = " + std::to_string(options_.max_tokens_limit) + "]");
  if (options_.max_prompt_tokens < 1)
    throw Error("server: max_prompt_tokens must be at least 1, got " + std::to_string(options_.max_prompt_tokens));
}

CompletionService::~CompletionService() { shutdown(); }

void CompletionService::drain() { scheduler_.close(); }

void CompletionService::shutdown() { scheduler_.shutdown(); }

RequestLimits CompletionService::request_limits() const {
  RequestLimits l;
  l.model_name = options_.model_name;
  l.max_tokens_limit = options_.max_tokens_limit;
  l.max_choices = std::min<int64_t>(16, options_.slots + options_.max_queue);
  return l;
}

std::string CompletionService::new_id(const char* prefix) {
  std::lock_guard<std::mutex> lock(rng_mu_);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%016llx%08llx", prefix, (unsigned long long)rng_(),
                (unsigned long long)(++id_counter_ & 0xffffffffULL));
  return buf;
}

std::vector<int32_t> CompletionService::build_prompt(const CompletionRequest& req, const std::string& prefill,
                                                     std::span<const VisionInput> images) const {
  const char* param = req.endpoint == Endpoint::kChat ? "messages" : "prompt";
  // A token stands for at most max_token_bytes_ bytes of the text (the chat
  // template only adds tokens), so a text this long is over the limit
  // whatever it holds: refused before the tokenizer spends time and memory on it.
  const uint64_t text_bytes = prompt_text_bytes(req);
  if (text_bytes > uint64_t(options_.max_prompt_tokens) * max_token_bytes_)
    throw invalid_request("the prompt text is " + std::to_string(text_bytes) + " bytes, at least " +
                              std::to_string((text_bytes + max_token_bytes_ - 1) / max_token_bytes_) +
                              " tokens (no token covers more than " + std::to_string(max_token_bytes_) +
                              " bytes); this server accepts at most " + std::to_string(options_.max_prompt_tokens) +
                              " (--max-prompt-tokens)",
                          param, "context_length_exceeded");
  std::vector<int32_t> ids;
  try {
    if (req.endpoint == Endpoint::kChat) {
      const std::span<const json::Value> tools =
          offers_tools(req) ? std::span<const json::Value>(req.tools) : std::span<const json::Value>();
      ids = encode_chat(tokenizer_, req.messages, true, options_.thinking, options_.template_kind,
                        options_.special_tokens_in_content ? ChatContent::kSpecialTokens : ChatContent::kPlainText,
                        tools);
      if (!prefill.empty()) {
        // The marker as its control token, the rest (a function name the
        // request declared) as plain text.
        const std::vector<Tokenizer::TextPiece> pieces = {
            {std::string_view(prefill).substr(0, kToolCallBegin.size()), true},
            {std::string_view(prefill).substr(kToolCallBegin.size()), false}};
        const std::vector<int32_t> tail = tokenizer_.encode_pieces(pieces, false);
        ids.insert(ids.end(), tail.begin(), tail.end());
      }
      if (!images.empty()) {  // the processor's expansion (docs/model.md §7.6)
        std::vector<int64_t> counts;
        for (const VisionInput& image : images) counts.push_back(image.n_soft);
        ids = expand_image_placeholders(ids, counts, options_.image_tokens);
      }
    } else if (req.prompt_ids) {
      ids = *req.prompt_ids;
      for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] >= vocab_size_)
          throw invalid_request("'prompt[" + std::to_string(i) + "]' = " + std::to_string(ids[i]) +
                                    " is outside the vocabulary [0, " + std::to_string(vocab_size_) + ")",
                                "prompt", "invalid_value");
    } else {
      ids = tokenizer_.encode(req.prompt, true);
    }
  } catch (const Error& e) {
    throw invalid_request(std::string("cannot build the prompt: ") + e.what(), param, "invalid_value");
  }
  if (int64_t(ids.size()) > options_.max_prompt_tokens)
    throw invalid_request("the prompt has " + std::to_string(ids.size()) + " tokens; this server accepts at most " +
                              std::to_string(options_.max_prompt_tokens) + " (--max-prompt-tokens)",
                          param, "context_length_exceeded");
  return ids;
}

GenerationConfig CompletionService::build_config(const CompletionRequest& req, int64_t max_tokens) const {
  GenerationConfig c = options_.defaults;
  c.max_new_tokens = max_tokens;
  c.max_length = 0;  // max_tokens is explicit here (docs/model.md §3.4)
  if (req.max_denoising_steps) c.max_denoising_steps = *req.max_denoising_steps;
  try {
    // 0: greedy (draw B is the argmax); t > 0 keeps the model's schedule
    // shape (docs/model.md §3.1) and scales it so that the first step runs at t.
    if (req.temperature) apply_temperature_override(c, *req.temperature, "request");
    if (req.t_min || req.t_max) c.greedy = false;  // an explicit schedule samples
    if (req.t_min) c.t_min = *req.t_min;
    if (req.t_max) c.t_max = *req.t_max;
    // Sampling controls (docs/model.md §3.7); parse_request checked their ranges.
    if (req.top_k) c.top_k = *req.top_k;
    if (req.top_p) c.top_p = *req.top_p;
    if (req.min_p) c.min_p = *req.min_p;
    if (req.presence_penalty) c.presence_penalty = *req.presence_penalty;
    if (req.frequency_penalty) c.frequency_penalty = *req.frequency_penalty;
    if (req.repeat_penalty) c.repeat_penalty = *req.repeat_penalty;
    validate_generation_config(c, "request");
  } catch (const Error& e) {
    throw invalid_request(std::string("invalid generation parameters: ") + e.what(),
                          req.t_min || req.t_max ? "t_min" : "temperature", "invalid_value");
  }
  return c;
}

int64_t CompletionService::fit_max_tokens(const CompletionRequest& req, int64_t prompt_tokens) const {
  const int64_t wanted = req.max_tokens.value_or(options_.default_max_tokens);
  const int64_t limit = options_.defaults.context_size;
  if (limit <= 0) return wanted;
  const char* param = req.endpoint == Endpoint::kChat ? "messages" : "prompt";
  const std::string where = "the context size " + std::to_string(limit) + " (-c/--ctx-size)";
  if (prompt_tokens >= limit)
    throw invalid_request(
        "the prompt has " + std::to_string(prompt_tokens) + " tokens; with the answer it exceeds " + where, param,
        "context_length_exceeded");
  // Whole canvases are generated (docs/model.md §3.4): max_tokens occupies
  // ceil(max_tokens / L) * L positions after the prompt.
  const int64_t L = canvas_length_;
  const int64_t room = (limit - prompt_tokens) / L * L;  // new positions that fit, in whole canvases
  const int64_t needed = reply_positions(wanted, L);
  if (needed <= room) return wanted;
  // The server default shrinks to what fits; a max_tokens the client asked
  // for is an error.
  if (!req.max_tokens && room > 0) return room;
  throw invalid_request("the prompt (" + std::to_string(prompt_tokens) + " tokens) plus " +
                            (req.max_tokens ? "max_tokens " : "the default max_tokens ") + std::to_string(wanted) +
                            " (generated as " + std::to_string(needed / L) + " whole canvases of " + std::to_string(L) +
                            " tokens) needs " + std::to_string(prompt_tokens + needed) + " positions, over " + where +
                            "; at most " + std::to_string(room) + " new tokens fit after this prompt",
                        req.max_tokens ? "max_tokens" : param, "context_length_exceeded");
}

std::shared_ptr<ActiveRequest> CompletionService::submit(const CompletionRequest& req, Clock::time_point arrived) {
  if (req.n != 1)
    throw Error("CompletionService::submit: a request of " + std::to_string(req.n) + " choices needs submit_choices");
  return submit_choices(req, arrived).front();
}

std::vector<std::shared_ptr<ActiveRequest>> CompletionService::submit_choices(const CompletionRequest& req,
                                                                              Clock::time_point arrived) {
  ActiveRequest::Setup s;
  s.tools = offers_tools(req);
  s.tool_prefill = tool_prefill(req);
  s.max_tool_calls = req.parallel_tool_calls ? 0 : 1;
  if (s.tools) s.tool_call_id = new_id("call_");
  // Decoded here, in the request's worker, before the request waits for the
  // model: a bad picture is a 400 and costs the model nothing.
  if (req.endpoint == Endpoint::kChat && count_request_images(req.messages) > 0)
    s.images = std::make_shared<const std::vector<VisionInput>>(
        load_request_images(req.messages, options_.vision, options_.image_config, options_.image_limits, nullptr));
  s.prompt = build_prompt(req, s.tool_prefill,
                          s.images ? std::span<const VisionInput>(*s.images) : std::span<const VisionInput>());
  s.max_tokens = fit_max_tokens(req, int64_t(s.prompt.size()));
  s.config = build_config(req, s.max_tokens);
  s.stop = req.stop;
  s.drafts = req.stream && req.include_drafts;
  s.logprobs = req.logprobs;
  s.top_logprobs = req.top_logprobs;
  s.arrived = arrived;
  // The seed every answer reports. Chosen ones stay below 2^53 (with room
  // for the choices' seed + i) so that they survive JavaScript numbers;
  // greedy requests without a seed use 0 (the initial canvas and the renoise
  // draws still come from the seed), so equal greedy requests give equal
  // answers; a negative seed asks for a chosen one.
  if (req.seed)
    s.seed = *req.seed;
  else if (s.config.greedy && !req.random_seed)
    s.seed = 0;
  else
    s.seed = random_seed() % (kMaxExactJsonSeed + 1 - uint64_t(req.n));
  std::vector<std::shared_ptr<ActiveRequest>> choices;
  for (int64_t i = 0; i < req.n; ++i) {
    ActiveRequest::Setup one = s;
    one.seed = s.seed + uint64_t(i);
    auto active = std::make_shared<ActiveRequest>(tokenizer_, metrics_, std::move(one));
    if (!scheduler_.submit(active)) {
      // All choices or none.
      for (const auto& queued : choices) scheduler_.cancel(queued);
      if (scheduler_.closed())
        throw ApiError(503, "the server is shutting down; it takes no new requests", "server_error", "",
                       "server_shutting_down");
      throw ApiError(
          429,
          "the server is busy: " + std::to_string(options_.max_queue) + " requests are already waiting (--max-queue)" +
              (req.n > 1 ? "; the " + std::to_string(req.n) + " choices need a place each" : "") + "; retry later",
          "rate_limit_error", "", "queue_full");
    }
    choices.push_back(std::move(active));
  }
  return choices;
}

void CompletionService::cancel(const std::shared_ptr<ActiveRequest>& request) { scheduler_.cancel(request); }

}  // namespace dgemma::server
