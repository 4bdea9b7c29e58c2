#include "server/http_server.h"

#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
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
#include "server/openai_format.h"
#include "server/request.h"
#include "server/utility_routes.h"

namespace dgemma::server {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);         // how often a waiting handler checks its client
constexpr auto kHeartbeat = std::chrono::milliseconds(1000);  // SSE comment when nothing else was sent

// ---- the connection behind a request ----------------------------------------
// cpp-httplib does not hand the socket to handlers. The handler finds it by
// its address pair (unique among the process's live connections) so that it
// can notice a client that goes away while the request waits or generates.

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

std::string host_of(const sockaddr_storage& a, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
    return {};
  return host;
}

int connection_fd(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (port_of(local) != req.local_port) continue;
    if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    if (port_of(peer) != req.remote_port || host_of(peer, peer_len) != req.remote_addr) continue;
    found = int(fd);
    break;
  }
  closedir(dir);
  return found;
}

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
  std::shared_ptr<ActiveRequest> active;
  ResponseContext ctx;
  int fd = -1;
  bool include_usage = false;
  bool started = false;
  bool finished = false;
  Clock::time_point last_write = Clock::now();
};

}  // namespace

struct HttpServer::Impl {
  CompletionService& service;
  Metrics& metrics;
  HttpOptions options;
  httplib::Server svr;
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
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    // The library refuses a body over its limit before reading it and closes
    // the connection; the unread bytes then make the kernel reset it, and the
    // client often sees ECONNRESET instead of the 413. So the library reads
    // (drains) bodies up to 1 MiB past our limit, and the completion handlers
    // answer those with the JSON 413 themselves; only bodies beyond that are
    // cut off early.
    svr.set_payload_max_length(size_t(options.max_body_bytes) + (size_t(1) << 20));
    svr.set_keep_alive_max_count(1000);
    svr.set_tcp_nodelay(true);  // SSE chunks and small answers go out at once (no Nagle + delayed-ACK stalls)
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
    svr.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      res.set_content(models_body(service.options().model_name, created), "application/json");
    });
    svr.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      const std::string id = req.matches[1];
      if (id != service.options().model_name) {
        set_error(res, ApiError(404, "the model '" + id + "' does not exist", "invalid_request_error", "model",
                                "model_not_found"));
        return;
      }
      res.set_content(model_body(id, created), "application/json");
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
    std::shared_ptr<ActiveRequest> active = service.submit(creq, arrived);
    ResponseContext ctx;
    ctx.endpoint = ep;
    ctx.id = service.new_id(ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
    ctx.created = unix_now();
    ctx.model = service.options().model_name;
    ctx.seed = active->seed();
    const int fd = connection_fd(req);
    try {
      wait_until_started(*active, fd);
    } catch (const ApiError&) {
      service.cancel(active);
      throw;
    }

    if (!creq.stream) {
      std::string text;
      StreamEvent ev;
      while (true) {
        if (!active->next(ev, kPoll)) {
          if (stopping || peer_closed(fd)) {
            service.cancel(active);
            // 499 (client closed request, as nginx logs it): nobody reads it,
            // but the metrics and the log show what happened.
            throw stopping ? shutting_down()
                           : ApiError(499, "the client closed the connection", "invalid_request_error", "",
                                      "client_closed_request");
          }
          continue;
        }
        if (ev.kind == StreamEvent::Kind::kText) {
          text += ev.text;
        } else if (ev.kind == StreamEvent::Kind::kDone) {
          t_log.prompt_tokens = ev.prompt_tokens;
          t_log.completion_tokens = ev.completion_tokens;
          res.set_content(completion_body(ctx, text, ev), "application/json");
          return;
        } else if (ev.kind == StreamEvent::Kind::kError) {
          throw ApiError(stopping ? 503 : 500, ev.text, "server_error", "", "generation_failed");
        }
      }
    }

    auto state = std::make_shared<StreamState>();
    state->active = std::move(active);
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
          if (!state->finished) service.cancel(state->active);
        });
  }

  // One step of an SSE stream; false ends it (httplib then closes the connection).
  bool pump(StreamState& s, httplib::DataSink& sink) {
    const auto write = [&](const std::string& data) {
      s.last_write = Clock::now();
      return sink.write(data.data(), data.size());
    };
    if (!s.started) {
      s.started = true;
      if (s.ctx.endpoint == Endpoint::kChat) return write(sse_event(chunk_start(s.ctx)));
    }
    StreamEvent ev;
    if (!s.active->next(ev, kPoll)) {
      if (stopping || peer_closed(s.fd)) return false;
      // A comment line keeps proxies from timing out and makes a vanished
      // client show up as a failed write even where the socket was not found.
      if (Clock::now() - s.last_write >= kHeartbeat) return write(": keep-alive\n\n");
      return true;
    }
    switch (ev.kind) {
      case StreamEvent::Kind::kDraft: return write(sse_event(chunk_draft(s.ctx, ev)));
      case StreamEvent::Kind::kText: return write(sse_event(chunk_text(s.ctx, ev.text)));
      case StreamEvent::Kind::kDone: {
        t_log.prompt_tokens = ev.prompt_tokens;
        t_log.completion_tokens = ev.completion_tokens;
        std::string out = sse_event(chunk_finish(s.ctx, ev));
        if (s.include_usage) out += sse_event(chunk_usage(s.ctx, ev));
        out += kSseDone;
        s.finished = true;
        const bool ok = write(out);
        sink.done();
        return ok;
      }
      case StreamEvent::Kind::kError: {
        // OpenAI clients raise an error for a data event holding "error".
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
  const HttpOptions& o = impl_->options;
  int port = o.port;
  errno = 0;
  if (o.port == 0) {
    port = impl_->svr.bind_to_any_port(o.host);
    if (port < 0)
      throw Error("serve: cannot listen on " + o.host +
                  " (any free port): " + (errno != 0 ? std::strerror(errno) : "the address cannot be bound"));
  } else if (!impl_->svr.bind_to_port(o.host, o.port)) {
    const int err = errno;
    const std::string where = o.host + ":" + std::to_string(o.port);
    if (err == EADDRINUSE)
      throw Error("serve: cannot listen on " + where + ": the address is already in use (another server on port " +
                  std::to_string(o.port) + "?)");
    throw Error("serve: cannot listen on " + where + ": " +
                (err != 0 ? std::string(std::strerror(err)) : std::string("the address cannot be bound")) +
                " (is the host an address of this machine?)");
  }
  impl_->bound = true;
  return port;
}

bool HttpServer::serve() {
  if (!impl_->bound) bind();
  return impl_->svr.listen_after_bind();
}

void HttpServer::drain() {
  impl_->draining = true;
  impl_->service.drain();
}

bool HttpServer::idle() const { return impl_->open.load() == 0; }

void HttpServer::stop() {
  impl_->stopping = true;
  impl_->svr.stop();
}

}  // namespace dgemma::server
