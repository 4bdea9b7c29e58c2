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
#include <cstdlib>
#include <ctime>

#include "dgemma/error.h"
#include "server/api_error.h"
#include "server/openai_format.h"
#include "server/request.h"

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
  for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
    if (path == known) return known;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

void set_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

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
  std::atomic<bool> stopping{false};
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

    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const std::string body = "{\"status\":\"" + std::string(stopping ? "stopping" : "ok") +
                               "\",\"slots\":" + std::to_string(service.scheduler().slots()) +
                               ",\"in_flight\":" + std::to_string(service.scheduler().in_flight()) +
                               ",\"queued\":" + std::to_string(service.scheduler().queued()) + "}";
      res.status = stopping ? 503 : 200;
      res.set_content(body, "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(models_body(service.options().model_name, created), "application/json");
    });
    svr.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
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
        try {
          handle_completion(ep, req, res);
        } catch (const ApiError& e) {
          set_error(res, e);
        }
      });
      svr.Get(path, [](const httplib::Request& req, httplib::Response& res) {
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

  void handle_completion(Endpoint ep, const httplib::Request& req, httplib::Response& res) {
    const Clock::time_point arrived = Clock::now();
    if (stopping) throw error_for_status(503, req.method, req.path);
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

    if (!creq.stream) {
      std::string text;
      StreamEvent ev;
      while (true) {
        if (!active->next(ev, kPoll)) {
          if (stopping || peer_closed(fd)) {
            service.cancel(active);
            // 499 (client closed request, as nginx logs it): nobody reads it,
            // but the metrics and the log show what happened.
            throw stopping ? error_for_status(503, req.method, req.path)
                           : ApiError(499, "the client closed the connection", "invalid_request_error", "",
                                      "client_closed_request");
          }
          continue;
        }
        if (ev.kind == StreamEvent::Kind::kText) {
          text += ev.text;
        } else if (ev.kind == StreamEvent::Kind::kDone) {
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
        [this, state](bool) {
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
      case StreamEvent::Kind::kDraft:
        return write(sse_event(chunk_draft(s.ctx, ev)));
      case StreamEvent::Kind::kText:
        return write(sse_event(chunk_text(s.ctx, ev.text)));
      case StreamEvent::Kind::kDone: {
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
  if (o.port == 0) {
    port = impl_->svr.bind_to_any_port(o.host);
    if (port < 0) throw Error("serve: cannot bind " + o.host + " to a free port");
  } else if (!impl_->svr.bind_to_port(o.host, o.port)) {
    throw Error("serve: cannot bind " + o.host + ":" + std::to_string(o.port) + " (address in use or not local?)");
  }
  impl_->bound = true;
  return port;
}

bool HttpServer::serve() {
  if (!impl_->bound) bind();
  return impl_->svr.listen_after_bind();
}

void HttpServer::stop() {
  impl_->stopping = true;
  impl_->svr.stop();
}

}  // namespace dgemma::server
