#include "server/http_server.h"

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "dgemma/error.h"
#include "server/api_error.h"
#include "server/choice_set.h"
#include "server/http_connection_stream.h"
#include "server/http_listener.h"
#include "server/openai_format.h"
#include "server/request.h"
#include "server/utility_routes.h"

namespace dgemma::server {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);         // how often a waiting handler checks its client
constexpr auto kHeartbeat = std::chrono::milliseconds(1000);  // SSE comment when nothing else was sent

// The socket of the request this worker thread answers, so that a handler
// can notice a client that goes away while its request waits or generates.
thread_local int t_connection_fd = -1;

// True once the client closed or reset the connection (never blocks).
bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, short(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
  if ((p.revents & POLLIN) != 0) {
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

// ---- helpers -------------------------------------------------------------------

int64_t unix_now() { return int64_t(std::time(nullptr)); }

// Metrics label of a path: known routes only, so that random paths do not
// create one time series each.
std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize",
                            "/detokenize", "/props"})
    if (path == known) return known;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// Seconds a client should wait before retrying a 429 (queue full).
constexpr const char* kRetryAfterSeconds = "1";

void set_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 429) res.set_header("Retry-After", kRetryAfterSeconds);
  res.set_content(error_body(e), "application/json");
}

// ---- the request log line ------------------------------------------------------
// A request is handled on one worker thread from routing to the logger call
// (streams included), so its log fields live in thread-local storage.
struct RequestLog {
  Clock::time_point start{};
  bool timed = false;
  int64_t prompt_tokens = -1, completion_tokens = -1;
};
thread_local RequestLog t_log;

// Client-controlled text for one log line: no control bytes, bounded length.
std::string printable(const std::string& s, size_t max) {
  std::string out = s.substr(0, max);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

void log_request(const httplib::Request& req, const httplib::Response& res) {
  const RequestLog l = t_log;
  t_log = RequestLog{};
  char ms[32] = "-";
  if (l.timed)
    std::snprintf(ms, sizeof ms, "%.0f", std::chrono::duration<double, std::milli>(Clock::now() - l.start).count());
  const std::string tokens = l.prompt_tokens >= 0 ? std::to_string(l.prompt_tokens) + "+" +
                                                        std::to_string(std::max<int64_t>(l.completion_tokens, 0))
                                                  : "-";
  std::fprintf(stderr, "dgemma serve: %s %s %s %d tokens=%s ms=%s\n", printable(req.remote_addr, 64).c_str(),
               printable(req.method, 16).c_str(), printable(req.path, 200).c_str(), res.status, tokens.c_str(), ms);
}

// Constant-time comparison of the Authorization header with "Bearer KEY".
bool bearer_matches(const std::string& header, const std::string& key) {
  const std::string want = "Bearer " + key;
  unsigned diff = header.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(i < header.size() ? header[i] : 0) ^ unsigned(want[i]);
  return diff == 0;
}

// Counts a completion request from its handler until its response object is
// gone (for a stream: after the last chunk), for HttpServer::idle().
struct OpenRequest {
  std::atomic<int64_t>& open;
  explicit OpenRequest(std::atomic<int64_t>& n) : open(n) { ++open; }
  ~OpenRequest() { --open; }
  OpenRequest(const OpenRequest&) = delete;
  OpenRequest& operator=(const OpenRequest&) = delete;
};

struct StreamState {
  explicit StreamState(ChoiceSet c) : choices(std::move(c)), token_text_bytes(choices.size(), 0) {}
  ChoiceSet choices;
  std::vector<int64_t> token_text_bytes;  // per choice, for logprobs' text_offset
  ResponseContext ctx;
  int fd = -1;
  bool include_usage = false;
  bool started = false;
  bool finished = false;  // every choice done, or one failed
  Clock::time_point last_write = Clock::now();
};

// process_request (one request from a Stream) is protected in cpp-httplib;
// the listener feeds it whole requests. svr_sock_ tells the library's stream
// writers whether the server still runs (INVALID_SOCKET: shutting down).
struct Router : httplib::Server {
  using httplib::Server::process_request;
  using httplib::Server::svr_sock_;
};

// A connection answers at most this many requests, then is closed (a client
// that keeps one connection forever still gets rebalanced).
constexpr int64_t kMaxRequestsPerConnection = 1000;

const char* status_text(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// The whole HTTP response for a refusal decided before routing.
std::string refusal_response(int status, const std::string& message) {
  const ApiError e = connection_error(status, message);
  const std::string body = error_body(e);
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) + "\r\n";
  out += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\nAccess-Control-Allow-Origin: *\r\n";
  if (status == 429 || status == 503) out += std::string("Retry-After: ") + kRetryAfterSeconds + "\r\n";
  return out + "\r\n" + body;
}

}  // namespace

struct HttpServer::Impl {
  CompletionService& service;
  Metrics& metrics;
  HttpOptions options;
  Router svr;
  std::unique_ptr<HttpListener> listener;
  FramingLimits framing;
  std::atomic<bool> stopping{false};  // stop(): streams are cut, waiting requests get 503
  std::atomic<bool> draining{false};  // drain(): new requests get 503, running ones finish
  std::atomic<int64_t> open{0};       // completion requests not yet fully answered
  int64_t created = unix_now();
  bool bound = false;

  Impl(CompletionService& s, Metrics& m, HttpOptions o) : service(s), metrics(m), options(std::move(o)) {
    const ServiceOptions& so = service.options();
    // One thread per admissible request (a stream holds its thread) plus a
    // few for health, metrics and bad requests; capped, since connections
    // beyond it only wait to be accepted.
    const int threads =
        options.threads > 0 ? options.threads : int(std::min<int64_t>(so.slots + so.max_queue + 16, 512));
    ListenerOptions lo;
    lo.host = options.host;
    lo.port = options.port;
    lo.workers = threads;
    lo.max_connections = options.max_connections;
    lo.max_connections_per_client = options.max_connections_per_client;
    lo.request_timeout = std::chrono::seconds(options.request_timeout_seconds);
    lo.keep_alive_timeout = std::chrono::seconds(options.keep_alive_seconds);
    lo.framing.max_body_bytes = options.max_body_bytes;
    framing = lo.framing;
    listener = std::make_unique<HttpListener>(
        lo, [this](Connection& c) { return serve_connection(c); },
        [this](int status, const std::string& message) {
          metrics.count_request("other", status);
          if (options.log_requests)
            std::fprintf(stderr, "dgemma serve: refused a connection: %d %s\n", status, message.c_str());
          return refusal_response(status, message);
        });
    // The listener refuses larger bodies before they are read; this is the
    // library's own check behind it.
    svr.set_payload_max_length(size_t(options.max_body_bytes));
    // Only what the Keep-Alive response header announces; the listener
    // enforces both.
    svr.set_keep_alive_max_count(size_t(kMaxRequestsPerConnection));
    svr.set_keep_alive_timeout(options.keep_alive_seconds);
    svr.set_default_headers({{"Access-Control-Allow-Origin", "*"}});

    // Every request is counted once it has been answered (errors from the
    // library included).
    svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.count_request(endpoint_label(req.path), res.status);
      if (options.log_requests)
        log_request(req, res);
      else
        t_log = RequestLog{};
    });
    svr.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
      t_log = RequestLog{};
      t_log.start = Clock::now();
      t_log.timed = true;
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // Only SO_REUSEADDR (restart while old connections linger in TIME_WAIT);
    // the library's default also sets SO_REUSEPORT, which lets a second
    // server bind a busy port and split the requests with the first.
    svr.set_socket_options([](int sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    // Statuses >= 400 without a body of ours (unknown route, body over the
    // limit, malformed HTTP) get the JSON error body every client expects.
    svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (res.body.empty()) set_error(res, error_for_status(res.status, req.method, req.path));
      return httplib::Server::HandlerResponse::Handled;
    }));
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal server error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what += std::string(": ") + e.what();
      } catch (...) {
      }
      set_error(res, ApiError(500, what, "server_error", "", "internal_error"));
    });
    // /v1/models, /v1/models/{id}, /tokenize, /detokenize and /props.
    add_utility_routes(svr, service,
                       {options.max_body_bytes, created,
                        [this](const httplib::Request& req, httplib::Response& res) { return authorized(req, res); }});

    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool down = stopping || draining;
      const std::string body = "{\"status\":\"" + std::string(down ? "stopping" : "ok") +
                               "\",\"slots\":" + std::to_string(service.scheduler().slots()) +
                               ",\"in_flight\":" + std::to_string(service.scheduler().in_flight()) +
                               ",\"queued\":" + std::to_string(service.scheduler().queued()) + "}";
      res.status = down ? 503 : 200;
      res.set_content(body, "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    for (const auto& [path, endpoint] :
         {std::pair{"/v1/chat/completions", Endpoint::kChat}, std::pair{"/v1/completions", Endpoint::kCompletion}}) {
      const Endpoint ep = endpoint;
      svr.Post(path, [this, ep](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, res)) return;
        auto guard = std::make_shared<OpenRequest>(open);
        try {
          handle_completion(ep, req, res, guard);
        } catch (const ApiError& e) {
          set_error(res, e);
        }
      });
      svr.Get(path, [this](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, res)) return;
        res.set_header("Allow", "POST");
        set_error(res, error_for_status(405, req.method, req.path));
      });
    }
    // CORS preflight, for browser UIs.
    svr.Options(".*", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Content-Type, Authorization");
    });
  }

  // --api-key: every route but /health, /metrics and CORS preflights needs
  // "Authorization: Bearer KEY"; otherwise 401 (and false).
  bool authorized(const httplib::Request& req, httplib::Response& res) const {
    if (options.api_key.empty() || bearer_matches(req.get_header_value("Authorization"), options.api_key)) return true;
    res.set_header("WWW-Authenticate", "Bearer");
    set_error(res, ApiError(401,
                            req.has_header("Authorization")
                                ? "invalid API key (the Authorization header must be \"Bearer KEY\", --api-key)"
                                : "missing API key: send \"Authorization: Bearer KEY\" (this server has --api-key)",
                            "invalid_request_error", "", "invalid_api_key"));
    return false;
  }

  // Answers the whole requests buffered on `c` in order (pipelining); true
  // keeps the connection for the next one.
  bool serve_connection(Connection& c) {
    t_connection_fd = c.fd;
    while (true) {
      ConnectionStream stream(c);
      const bool last = stopping || c.requests + 1 >= kMaxRequestsPerConnection;
      bool closed = false;
      const bool ok = svr.process_request(stream, last, closed, nullptr);
      ++c.requests;
      c.buffer.erase(0, c.request_bytes);
      c.request_bytes = 0;
      if (!ok || closed || last) return false;
      const Framing next = frame_request(c.buffer, framing);
      if (next.state != Framing::State::kComplete) {
        // A large body's buffer is not kept while the connection idles.
        if (c.buffer.capacity() > (size_t(64) << 10)) c.buffer.shrink_to_fit();
        return true;
      }
      c.request_bytes = next.request_bytes;
    }
  }

  ApiError shutting_down() const {
    return ApiError(503, "the server is shutting down; it takes no new requests", "server_error", "",
                    "server_shutting_down");
  }

  // Waits (watching the client) until `active` runs on a sequence. Streams
  // wait here before answering, so a request that never starts (dropped by
  // a drain) gets a plain 503, not a 200 stream that fails.
  void wait_until_started(ActiveRequest& active, int fd) {
    while (!active.wait_started(kPoll)) {
      if (stopping || peer_closed(fd)) {
        throw stopping
            ? shutting_down()
            : ApiError(499, "the client closed the connection", "invalid_request_error", "", "client_closed_request");
      }
    }
    if (active.started()) return;
    StreamEvent ev;
    if (active.next(ev, std::chrono::milliseconds(0)) && ev.kind == StreamEvent::Kind::kError) {
      if (draining || stopping) throw shutting_down();
      throw ApiError(500, ev.text, "server_error", "", "generation_failed");
    }
    throw ApiError(500, "the request ended before it started", "server_error", "", "generation_failed");
  }

  void handle_completion(Endpoint ep, const httplib::Request& req, httplib::Response& res,
                         const std::shared_ptr<OpenRequest>& guard) {
    const Clock::time_point arrived = Clock::now();
    if (stopping || draining) throw shutting_down();
    if (int64_t(req.body.size()) > options.max_body_bytes) throw error_for_status(413, req.method, req.path);
    const CompletionRequest creq = parse_request(ep, req.body, service.request_limits());
    ChoiceSet choices(service.submit_choices(creq, arrived));
    ResponseContext ctx;
    ctx.endpoint = ep;
    ctx.id = service.new_id(ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
    ctx.created = unix_now();
    ctx.model = service.options().model_name;
    ctx.seed = choices.first().seed();
    ctx.logprobs = creq.logprobs;
    const int fd = t_connection_fd;
    try {
      wait_until_started(choices.first(), fd);
    } catch (const ApiError&) {
      choices.cancel_unfinished(service);
      throw;
    }

    if (!creq.stream) {
      std::vector<std::string> texts(choices.size());
      std::vector<std::vector<AnswerToken>> logprobs(choices.size());
      StreamEvent ev;
      size_t which = 0;
      while (!choices.all_done()) {
        if (!choices.next(ev, which, kPoll)) {
          if (stopping || peer_closed(fd)) {
            choices.cancel_unfinished(service);
            // 499 (client closed request, as nginx logs it): nobody reads it,
            // but the metrics and the log show what happened.
            throw stopping ? shutting_down()
                           : ApiError(499, "the client closed the connection", "invalid_request_error", "",
                                      "client_closed_request");
          }
          continue;
        }
        if (ev.kind == StreamEvent::Kind::kText) {
          texts[which] += ev.text;
          for (AnswerToken& t : ev.logprobs) logprobs[which].push_back(std::move(t));
        } else if (ev.kind == StreamEvent::Kind::kError) {
          choices.cancel_unfinished(service);
          throw ApiError(stopping ? 503 : 500, ev.text, "server_error", "", "generation_failed");
        }
      }
      std::vector<ChoiceOutcome> outcomes;
      for (size_t i = 0; i < texts.size(); ++i)
        outcomes.push_back({std::move(texts[i]), choices.dones()[i], std::move(logprobs[i])});
      const StreamEvent total = combine_done(choices.dones());
      t_log.prompt_tokens = total.prompt_tokens;
      t_log.completion_tokens = total.completion_tokens;
      res.set_content(completion_body(ctx, outcomes), "application/json");
      return;
    }

    auto state = std::make_shared<StreamState>(std::move(choices));
    state->ctx = std::move(ctx);
    state->fd = fd;
    state->include_usage = creq.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [this, state](size_t, httplib::DataSink& sink) { return pump(*state, sink); },
        // Runs when the stream ends for any reason: a stream that did not
        // finish (client gone, write failure, server stopping) is cancelled.
        // The guard keeps the request counted open until then.
        [this, state, guard](bool) {
          (void)guard;
          if (!state->finished) state->choices.cancel_unfinished(service);
        });
  }

  // One step of an SSE stream; false ends it (httplib then closes the connection).
  // Chunks of several choices interleave, each with its "index".
  bool pump(StreamState& s, httplib::DataSink& sink) {
    const auto write = [&](const std::string& data) {
      s.last_write = Clock::now();
      return sink.write(data.data(), data.size());
    };
    if (!s.started) {
      s.started = true;
      if (s.ctx.endpoint != Endpoint::kChat) return true;
      std::string out;
      for (size_t i = 0; i < s.choices.size(); ++i) {
        s.ctx.choice = int64_t(i);
        out += sse_event(chunk_start(s.ctx));
      }
      return write(out);
    }
    StreamEvent ev;
    size_t which = 0;
    if (!s.choices.next(ev, which, kPoll)) {
      if (stopping || peer_closed(s.fd)) return false;
      // A comment line keeps proxies from timing out and makes a vanished
      // client show up as a failed write even where the socket was not found.
      if (Clock::now() - s.last_write >= kHeartbeat) return write(": keep-alive\n\n");
      return true;
    }
    s.ctx.choice = int64_t(which);
    switch (ev.kind) {
      case StreamEvent::Kind::kDraft: return write(sse_event(chunk_draft(s.ctx, ev)));
      case StreamEvent::Kind::kText: {
        // text_offset of completions' logprobs: bytes of token text sent before.
        int64_t& offset = s.token_text_bytes[which];
        const std::string chunk = chunk_text(s.ctx, ev.text, ev.logprobs, offset);
        for (const AnswerToken& t : ev.logprobs) offset += int64_t(t.token.text.size());
        return write(sse_event(chunk));
      }
      case StreamEvent::Kind::kDone: {
        std::string out = sse_event(chunk_finish(s.ctx, ev));
        if (!s.choices.all_done()) return write(out);
        const StreamEvent total = combine_done(s.choices.dones());
        t_log.prompt_tokens = total.prompt_tokens;
        t_log.completion_tokens = total.completion_tokens;
        if (s.include_usage) out += sse_event(chunk_usage(s.ctx, total));
        out += kSseDone;
        s.finished = true;
        const bool ok = write(out);
        sink.done();
        return ok;
      }
      case StreamEvent::Kind::kError: {
        // OpenAI clients raise an error for a data event holding "error".
        s.choices.cancel_unfinished(service);
        s.finished = true;
        const bool ok = write(sse_event(error_body(ApiError(500, ev.text, "server_error", "", "generation_failed"))));
        sink.done();
        return ok;
      }
    }
    return false;
  }
};

HttpServer::HttpServer(CompletionService& service, Metrics& metrics, HttpOptions options)
    : impl_(std::make_unique<Impl>(service, metrics, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const int port = impl_->listener->bind();
  impl_->svr.svr_sock_ = impl_->listener->listening_fd();
  impl_->bound = true;
  return port;
}

bool HttpServer::serve() {
  if (!impl_->bound) bind();
  return impl_->listener->run();
}

void HttpServer::drain() {
  impl_->draining = true;
  impl_->service.drain();
}

bool HttpServer::idle() const { return impl_->open.load() == 0; }

void HttpServer::stop() {
  impl_->stopping = true;
  impl_->svr.svr_sock_ = INVALID_SOCKET;  // the library's stream writers stop
  impl_->listener->stop();
}

}  // namespace dgemma::server
