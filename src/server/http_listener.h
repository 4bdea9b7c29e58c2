#pragma once
// The server's connections (docs/server.md §2): one thread accepts and reads
// every connection with epoll, and hands a connection to a worker thread only
// once a whole request has arrived (request_framing.h). A client that sends
// slowly, or sends nothing, holds a file descriptor and a buffer, never a
// worker, so health checks and other clients are answered while it dawdles.
// Limits enforced here, before any worker sees the request:
//   * a deadline for the whole request (request line to last body byte): 408;
//   * idle keep-alive connections are closed after keep_alive_timeout;
//   * connections in total and per client address: 503 / 429;
//   * header and body sizes (Content-Length, chunked): 431 / 413 / 400,
//     answered at once, before the body is read.
// A refused connection gets its answer, then its unread input is drained for
// a short while before it is closed, so that the client reads the answer
// instead of a connection reset.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/request_framing.h"

namespace dgemma::server {

struct ListenerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  int workers = 8;  // threads that run complete requests
  int max_connections = 512;
  int max_connections_per_client = 256;
  std::chrono::milliseconds request_timeout{30'000};    // whole request, first byte to last
  std::chrono::milliseconds keep_alive_timeout{5'000};  // idle between requests
  std::chrono::milliseconds write_timeout{10'000};      // one blocked write of a response
  FramingLimits framing;
};

// One client connection. A worker owns it while it runs a request; the
// reader owns it otherwise.
struct Connection {
  int fd = -1;
  std::string peer_host, local_host;
  int peer_port = 0, local_port = 0;
  std::string buffer;        // bytes read and not yet consumed; starts at a request
  size_t request_bytes = 0;  // size of the whole request at the front of `buffer`
  int64_t requests = 0;      // requests answered on this connection
  std::chrono::milliseconds write_timeout{10'000};
};

// A refusal decided by the reader (status and message), rendered as a whole
// HTTP response by the server (it owns the error body format).
using RefusalRenderer = std::function<std::string(int status, const std::string& message)>;
// Runs the complete request at the front of conn.buffer (conn.request_bytes
// long) and any further complete requests pipelined behind it; returns true
// to keep the connection open for more. Called on a worker thread.
using ConnectionHandler = std::function<bool(Connection& conn)>;

class HttpListener {
 public:
  HttpListener(ListenerOptions options, ConnectionHandler handler, RefusalRenderer refusal);
  ~HttpListener();

  // Binds and listens; returns the port. Throws dgemma::Error.
  int bind();
  // The listening socket (-1 before bind()).
  int listening_fd() const;
  // Accepts and reads until stop(), then waits for the workers to finish the
  // requests they run. Returns false if it was never bound.
  bool run();
  // Thread-safe: stops accepting and reading, closes idle connections.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgemma::server
