#pragma once
// The HTTP binding of the completion service. Connections are accepted and
// read by HttpListener (http_listener.h: whole requests only, deadlines and
// connection caps); each whole request is parsed, routed and answered by
// cpp-httplib (Debian's libcpp-httplib-dev) on a worker thread. Routes:
//   POST /v1/chat/completions, POST /v1/completions  (JSON or SSE stream)
//   GET  /v1/models, GET /v1/models/{id}, GET /health, GET /metrics
//   POST /tokenize, POST /detokenize, GET /props (llama.cpp's; utility_routes.h)
// Every failure is a JSON error body {"error": {...}} with a 4xx/5xx status,
// including those the HTTP library produces itself (404 unknown route, 413
// body over the limit, 400 malformed HTTP). A client that disconnects while
// its request is queued or generating cancels it: the handler watches the
// connection's socket while it waits, and a failed write ends a stream.
// Pipelined requests are answered in order.
// A stream's headers go out once its request runs on a sequence (not while
// it is queued), so that a request dropped from the queue gets a plain error.
#include <memory>
#include <string>

#include "server/metrics.h"
#include "server/service.h"

namespace dgemma::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (see bind())
  int64_t max_body_bytes = 1 << 20;      // larger bodies get 413
  int threads = 0;                       // HTTP worker threads; 0: slots + max_queue + 16, at most 512
  int keep_alive_seconds = 5;            // an idle connection is closed after this
  int request_timeout_seconds = 30;      // a request must arrive whole within this (else 408)
  int max_connections = 512;             // open connections in total (more: 503)
  int max_connections_per_client = 256;  // open connections from one address (more: 429)
  // Non-empty: requests need "Authorization: Bearer <api_key>", else 401;
  // GET /health, GET /metrics and CORS preflights stay open.
  std::string api_key;
  // One stderr line per request: client, method, path, status, prompt +
  // completion tokens, milliseconds.
  bool log_requests = false;
};

class HttpServer {
 public:
  // `service` and `metrics` must outlive the server.
  HttpServer(CompletionService& service, Metrics& metrics, HttpOptions options);
  ~HttpServer();

  // Binds the listening socket; returns the port (useful with port 0).
  // Throws dgemma::Error when the address cannot be bound.
  int bind();
  // Serves until stop() (blocks). Returns false if it failed to listen.
  bool serve();
  // Graceful stop, first half: new completion requests and those still
  // queued get 503, /health says "stopping"; running generations and live
  // streams go on (final chunk, [DONE]). Call stop() once idle().
  void drain();
  // True when no completion request is being answered.
  bool idle() const;
  // Stops accepting, ends open streams and waiting requests. Thread-safe,
  // callable from any thread (e.g. a signal handler thread).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgemma::server
