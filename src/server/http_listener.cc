#include "server/http_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dgemma/error.h"

namespace dgemma::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTick = std::chrono::milliseconds(100);           // how often deadlines are checked
constexpr auto kDrainRefused = std::chrono::milliseconds(2000);  // a refused connection's input is read this long
constexpr size_t kReadChunk = 64 * 1024;
// Refused connections are answered even past max_connections, up to this
// many more; beyond that they are closed unanswered.
constexpr size_t kRefusalHeadroom = 64;

std::string numeric_host(const sockaddr_storage& a, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
    return "?";
  return host;
}

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return 0;
}

// Best effort: a refusal is small and a fresh socket's send buffer takes it.
void send_now(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return;
    sent += size_t(n);
  }
}

// Removes the Expect header from the request's head once the reader has sent
// "100 Continue" itself, so that the HTTP library does not send a second one.
// Returns the bytes removed.
size_t erase_expect_header(std::string& buffer, size_t header_bytes) {
  size_t line = buffer.find("\r\n");
  while (line != std::string::npos && line + 2 < header_bytes) {
    const size_t next = buffer.find("\r\n", line + 2);
    if (next == std::string::npos || next > header_bytes) return 0;
    const std::string_view text = std::string_view(buffer).substr(line + 2, next - line - 2);
    if (text.size() >= 7 && equals_ignoring_case(text.substr(0, 7), "expect:")) {
      buffer.erase(line + 2, next - line);
      return next - line;
    }
    line = next;
  }
  return 0;
}

}  // namespace

struct HttpListener::Impl {
  enum class State { kReading, kWorking, kRefused };
  struct Slot {
    std::unique_ptr<Connection> conn;
    State state = State::kReading;
    Clock::time_point since;  // request's first byte, last answer (idle), or refusal
    bool continued = false;   // "100 Continue" sent for the request being read
    size_t scanned = 0;       // bytes searched for the end of the headers, in vain
    size_t whole_at = 0;      // the request's size once known from its Content-Length
  };

  ListenerOptions options;
  ConnectionHandler handler;
  RefusalRenderer refusal;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  int port = 0;
  std::atomic<bool> stopping{false};

  // Reader thread only.
  std::unordered_map<int, Slot> slots;
  std::unordered_map<std::string, int> per_client;
  size_t live = 0;  // connections that count against max_connections (not refused)
  Clock::time_point accept_paused_until{};

  // Shared with the workers.
  std::mutex mu;
  std::condition_variable work_ready;
  std::deque<Connection*> jobs;
  std::vector<std::pair<Connection*, bool>> finished;  // (connection, keep open)
  bool workers_quit = false;
  std::vector<std::thread> workers;

  Impl(ListenerOptions o, ConnectionHandler h, RefusalRenderer r)
      : options(std::move(o)), handler(std::move(h)), refusal(std::move(r)) {}

  ~Impl() {
    for (auto& [fd, slot] : slots) ::close(fd);
    for (int fd : {listen_fd, epoll_fd, wake_fd})
      if (fd >= 0) ::close(fd);
  }

  void watch(int fd, bool on) {
    if (on) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    } else {
      epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    }
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  // ---- workers ----
  void work() {
    while (true) {
      Connection* conn = nullptr;
      {
        std::unique_lock lock(mu);
        work_ready.wait(lock, [&] { return workers_quit || !jobs.empty(); });
        if (jobs.empty()) return;
        conn = jobs.front();
        jobs.pop_front();
      }
      bool keep = false;
      try {
        keep = handler(*conn);
      } catch (...) {
        keep = false;  // the handler answers its own errors; anything else closes the connection
      }
      {
        std::lock_guard lock(mu);
        finished.emplace_back(conn, keep);
      }
      wake();
    }
  }

  // ---- the reader ----
  void close_slot(int fd) {
    auto it = slots.find(fd);
    if (it == slots.end()) return;
    if (it->second.state != State::kRefused) {
      --live;
      auto pc = per_client.find(it->second.conn->peer_host);
      if (pc != per_client.end() && --pc->second == 0) per_client.erase(pc);
    }
    if (it->second.state != State::kWorking) watch(fd, false);
    ::close(fd);
    slots.erase(it);
  }

  // Answers `status` and drains the connection's input until the client
  // closes it or kDrainRefused passes.
  void refuse(Slot& slot, int status, const std::string& message) {
    Connection& c = *slot.conn;
    send_now(c.fd, refusal(status, message));
    ::shutdown(c.fd, SHUT_WR);
    if (slot.state != State::kRefused) {
      --live;
      auto pc = per_client.find(c.peer_host);
      if (pc != per_client.end() && --pc->second == 0) per_client.erase(pc);
    }
    slot.state = State::kRefused;
    slot.since = Clock::now();
    c.buffer.clear();
    c.buffer.shrink_to_fit();
  }

  void dispatch(Slot& slot, size_t request_bytes) {
    slot.state = State::kWorking;
    slot.continued = false;
    slot.scanned = 0;
    slot.whole_at = 0;
    slot.conn->request_bytes = request_bytes;
    watch(slot.conn->fd, false);
    {
      std::lock_guard lock(mu);
      jobs.push_back(slot.conn.get());
    }
    work_ready.notify_one();
  }

  // Frames what `slot` has buffered: dispatches a whole request, refuses a
  // bad one, or sends "100 Continue" to a client that waits for it.
  //
  // Framing the whole buffer after every read would cost its size per read,
  // so a client trickling a byte at a time could make the reader rescan its
  // headers or body again and again. So the end of the headers is searched
  // for only in the new bytes, and once a Content-Length says how long the
  // request is, only the size is compared.
  void frame(Slot& slot) {
    Connection& c = *slot.conn;
    if (slot.whole_at > 0) {
      if (c.buffer.size() >= slot.whole_at) dispatch(slot, slot.whole_at);
      return;
    }
    if (c.buffer.find("\r\n\r\n", slot.scanned > 3 ? slot.scanned - 3 : 0) == std::string::npos) {
      slot.scanned = c.buffer.size();
      if (c.buffer.size() <= options.framing.max_header_bytes) return;  // else frame_request says 431
    }
    const Framing f = frame_request(c.buffer, options.framing);
    switch (f.state) {
      case Framing::State::kComplete: return dispatch(slot, f.request_bytes);
      case Framing::State::kRefused: return refuse(slot, f.status, f.message);
      case Framing::State::kNeedMore:
        slot.whole_at = f.whole_request_bytes;
        if (f.expects_continue && !slot.continued) {
          slot.continued = true;
          const size_t erased = erase_expect_header(c.buffer, f.header_bytes);
          if (slot.whole_at > 0) slot.whole_at -= erased;
          send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
        }
        return;
    }
  }

  void on_readable(int fd) {
    auto it = slots.find(fd);
    if (it == slots.end() || it->second.state == State::kWorking) return;
    Slot& slot = it->second;
    Connection& c = *slot.conn;
    char chunk[kReadChunk];
    while (true) {
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n == 0) return close_slot(fd);  // the client is gone (a partial request goes with it)
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return close_slot(fd);
      }
      if (slot.state == State::kRefused) continue;  // discarded
      if (c.buffer.empty()) slot.since = Clock::now();
      c.buffer.append(chunk, size_t(n));
      // Frame as soon as a request may be whole, so that a huge body is
      // refused before it is read.
      frame(slot);
      if (slot.state != State::kReading) {
        if (slot.state == State::kRefused) continue;
        return;
      }
    }
  }

  void accept_all() {
    while (true) {
      sockaddr_storage peer{};
      socklen_t peer_len = sizeof peer;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: stop accepting for a tick instead of spinning.
          watch(listen_fd, false);
          accept_paused_until = Clock::now() + kTick;
        }
        return;
      }
      const int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // SSE chunks go out at once
      auto conn = std::make_unique<Connection>();
      conn->fd = fd;
      conn->peer_host = numeric_host(peer, peer_len);
      conn->peer_port = port_of(peer);
      conn->write_timeout = options.write_timeout;
      sockaddr_storage local{};
      socklen_t local_len = sizeof local;
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0) {
        conn->local_host = numeric_host(local, local_len);
        conn->local_port = port_of(local);
      }
      if (slots.size() >= size_t(options.max_connections) + kRefusalHeadroom) {
        ::close(fd);
        continue;
      }
      Slot& slot = slots[fd];
      slot.conn = std::move(conn);
      slot.since = Clock::now();
      watch(fd, true);
      ++live;
      int& from_client = per_client[slot.conn->peer_host];
      ++from_client;
      if (live > size_t(options.max_connections)) {
        refuse(slot, 503,
               "the server has " + std::to_string(options.max_connections) +
                   " open connections, its limit (--max-connections); retry later");
      } else if (from_client > options.max_connections_per_client) {
        refuse(slot, 429,
               "this client address has " + std::to_string(options.max_connections_per_client) +
                   " open connections, the limit per address (--max-connections-per-client)");
      }
    }
  }

  // Connections the workers are done with: closed, or read again (and
  // dispatched at once when a pipelined request is already whole).
  void take_finished() {
    std::vector<std::pair<Connection*, bool>> done;
    {
      std::lock_guard lock(mu);
      done.swap(finished);
    }
    for (auto [conn, keep] : done) {
      const int fd = conn->fd;
      Slot& slot = slots.at(fd);
      if (!keep || stopping) {
        close_slot(fd);
        continue;
      }
      slot.state = State::kReading;
      slot.since = Clock::now();
      watch(fd, true);
      if (!conn->buffer.empty()) frame(slot);
    }
  }

  void expire() {
    const auto now = Clock::now();
    if (accept_paused_until != Clock::time_point{} && now >= accept_paused_until) {
      accept_paused_until = {};
      watch(listen_fd, true);
    }
    std::vector<int> to_close;
    for (auto& [fd, slot] : slots) {
      const auto age = now - slot.since;
      if (slot.state == State::kRefused) {
        if (age >= kDrainRefused) to_close.push_back(fd);
      } else if (slot.state == State::kReading) {
        if (slot.conn->buffer.empty()) {
          if (age >= options.keep_alive_timeout) to_close.push_back(fd);
        } else if (age >= options.request_timeout) {
          refuse(slot, 408,
                 "the request did not arrive whole within " + std::to_string(options.request_timeout.count() / 1000) +
                     " s (--request-timeout)");
        }
      }
    }
    for (int fd : to_close) close_slot(fd);
  }

  void loop() {
    epoll_event events[64];
    while (!stopping) {
      const int n = epoll_wait(epoll_fd, events, 64, int(kTick.count()));
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd) {
          accept_all();
        } else if (fd == wake_fd) {
          uint64_t count;
          [[maybe_unused]] const ssize_t r = ::read(wake_fd, &count, sizeof count);
        } else {
          on_readable(fd);
        }
      }
      take_finished();
      expire();
    }
  }

  void shut_down() {
    ::close(listen_fd);
    listen_fd = -1;
    std::vector<int> idle;
    for (auto& [fd, slot] : slots)
      if (slot.state != State::kWorking) idle.push_back(fd);
    for (int fd : idle) close_slot(fd);
    {
      std::lock_guard lock(mu);
      workers_quit = true;  // the workers finish the queued requests (answered 503 while stopping), then exit
    }
    work_ready.notify_all();
    for (auto& t : workers) t.join();
    workers.clear();
    finished.clear();  // their connections are closed below
    std::vector<int> rest;
    for (auto& [fd, slot] : slots) rest.push_back(fd);
    for (int fd : rest) close_slot(fd);
  }
};

HttpListener::HttpListener(ListenerOptions options, ConnectionHandler handler, RefusalRenderer refusal)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(refusal))) {}

HttpListener::~HttpListener() = default;

int HttpListener::listening_fd() const { return impl_->listen_fd; }

int HttpListener::bind() {
  Impl& m = *impl_;
  const ListenerOptions& o = m.options;
  const std::string where = o.host + ":" + (o.port == 0 ? std::string("(any free port)") : std::to_string(o.port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(o.port);
  if (const int rc = getaddrinfo(o.host.c_str(), service.c_str(), &hints, &found); rc != 0)
    throw Error("serve: cannot listen on " + where + ": " + gai_strerror(rc));
  int err = 0;
  for (addrinfo* a = found; a != nullptr && m.listen_fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR only (restart while old connections linger in TIME_WAIT);
    // SO_REUSEPORT would let a second server split this port's requests.
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    // A real backlog: a burst waits in the kernel until accepted, and is then
    // answered (200 or 429), instead of being reset.
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      m.listen_fd = fd;
    } else {
      err = errno;
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  if (m.listen_fd >= 0) {
    m.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    m.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m.epoll_fd < 0 || m.wake_fd < 0)
      throw Error(std::string("serve: cannot start the connection reader: ") + std::strerror(errno));
    m.watch(m.listen_fd, true);
    m.watch(m.wake_fd, true);
  }
  if (m.listen_fd < 0) {
    if (err == EADDRINUSE)
      throw Error("serve: cannot listen on " + where + ": the address is already in use (another server on port " +
                  std::to_string(o.port) + "?)");
    throw Error("serve: cannot listen on " + where + ": " +
                (err != 0 ? std::string(std::strerror(err)) : std::string("the address cannot be bound")) +
                " (is the host an address of this machine?)");
  }
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&local), &len);
  m.port = port_of(local);
  return m.port;
}

bool HttpListener::run() {
  Impl& m = *impl_;
  if (m.listen_fd < 0) return false;
  for (int i = 0; i < std::max(1, m.options.workers); ++i) m.workers.emplace_back([&m] { m.work(); });
  m.loop();
  m.shut_down();
  return true;
}

void HttpListener::stop() {
  impl_->stopping = true;
  if (impl_->wake_fd >= 0) impl_->wake();
}

}  // namespace dgemma::server
