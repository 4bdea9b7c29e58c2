#pragma once
// The HTTP library's view of one request on a Connection (docs/server.md §2):
// reads come from the request bytes the reader already buffered (never from
// the socket, so a worker never waits for a client to send), and writes go to
// the socket, each bounded by the connection's write timeout.
#include <httplib.h>

#include "server/http_listener.h"

namespace dgemma::server {

class ConnectionStream final : public httplib::Stream {
 public:
  // Serves conn.buffer[0, conn.request_bytes).
  explicit ConnectionStream(Connection& conn) : conn_(conn) {}

  bool is_readable() const override { return read_ < conn_.request_bytes; }
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return conn_.fd; }

 private:
  Connection& conn_;
  size_t read_ = 0;
};

}  // namespace dgemma::server
