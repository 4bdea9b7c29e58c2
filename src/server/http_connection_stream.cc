#include "server/http_connection_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dgemma::server {
namespace {

// Waits until `fd` can take more bytes; false on timeout or error.
bool wait_writable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLOUT, 0};
  while (true) {
    const int n = ::poll(&p, 1, int(timeout.count()));
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
  }
}

}  // namespace

bool ConnectionStream::is_writable() const { return wait_writable(conn_.fd, conn_.write_timeout); }

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, conn_.request_bytes - read_);
  std::memcpy(ptr, conn_.buffer.data() + read_, n);
  read_ += n;
  return ssize_t(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(conn_.fd, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_writable(conn_.fd, conn_.write_timeout)) return -1;  // the client does not read
    } else {
      return -1;
    }
  }
  return ssize_t(sent);
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = conn_.peer_host;
  port = conn_.peer_port;
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  ip = conn_.local_host;
  port = conn_.local_port;
}

}  // namespace dgemma::server
