// TCP side channel: see oob_socket.hpp.
#include "cli/oob_socket.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "cli/peer_diagnosis.hpp"

namespace uroce::cli {
namespace {

constexpr auto kConnectRetry = std::chrono::milliseconds(100);
constexpr auto kWatchdogMargin = std::chrono::milliseconds(250);

// Milliseconds left for poll(): -1 for no deadline, 0 once it has passed.
int poll_timeout_ms(Deadline deadline) {
  if (!deadline) return -1;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

bool wait_readable(int fd, Deadline deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

// connect() that gives up at `deadline` (ETIMEDOUT) instead of after the kernel's SYN
// retries (about two minutes). 0 or errno; the socket is blocking again either way.
int connect_until(int fd, const sockaddr* addr, socklen_t len, Deadline deadline) {
  if (!deadline) return ::connect(fd, addr, len) == 0 ? 0 : errno;
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int err = ::connect(fd, addr, len) == 0 ? 0 : errno;
  while (err == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    const int n = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (n == 0) {
      err = ETIMEDOUT;
    } else if (n < 0) {
      if (errno != EINTR) err = errno;
    } else {
      socklen_t err_len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  return err;
}

int listen_socket(int family, uint16_t port, std::string& error) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = fmt::format("socket: {}", std::strerror(errno));
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  net::SockAddr addr;
  if (family == AF_INET6) {
    int zero = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    addr = net::SockAddr::make(net::IpAddr::from_in6(in6addr_any), port);
  } else {
    addr = net::SockAddr::make(net::IpAddr::v4(0, 0, 0, 0), port);
  }
  if (::bind(fd, addr.get(), addr.len) != 0 || ::listen(fd, 1) != 0) {
    error = fmt::format("cannot listen on TCP port {}: {}", port, std::strerror(errno));
    ::close(fd);
    return -1;
  }
  return fd;
}

net::IpAddr address_of(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  const int rc = peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len);
  if (rc != 0) return {};
  const auto split = net::SockAddr::split(sa);
  return split ? split->first : net::IpAddr{};
}

}  // namespace

Deadline deadline_after(double seconds) {
  if (seconds <= 0) return std::nullopt;
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

OobSocket::OobSocket(int fd) : fd_(fd) {
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  local_ = address_of(fd_, false);
  peer_ = address_of(fd_, true);
}

OobSocket::~OobSocket() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<OobSocket> OobSocket::accept_one(uint16_t port, Deadline deadline,
                                                 std::string& error) {
  int listener = listen_socket(AF_INET6, port, error);
  if (listener < 0) {
    std::string v4_error;
    listener = listen_socket(AF_INET, port, v4_error);
    if (listener < 0) return nullptr;
    error.clear();
  }
  if (!wait_readable(listener, deadline)) {
    error = fmt::format("no client connected to TCP port {} in time", port);
    ::close(listener);
    return nullptr;
  }
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  const int accept_errno = errno;
  ::close(listener);
  if (fd < 0) {
    error = fmt::format("accept() failed: {}", std::strerror(accept_errno));
    return nullptr;
  }
  return std::unique_ptr<OobSocket>(new OobSocket(fd));
}

std::unique_ptr<OobSocket> OobSocket::connect_to(const std::string& host, uint16_t port,
                                                 Deadline deadline, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    error = fmt::format("{} for {}:{}", gai_strerror(rc), host, port);
    return nullptr;
  }
  // A host that does not answer is reported in the command's words before its --timeout
  // watchdog (armed at the command's start, so earlier than this deadline) says only
  // "timed out".
  if (deadline) *deadline -= kWatchdogMargin;
  int last_errno = 0;
  for (;;) {
    for (addrinfo* t = res; t != nullptr; t = t->ai_next) {
      const int fd = ::socket(t->ai_family, t->ai_socktype | SOCK_CLOEXEC, t->ai_protocol);
      if (fd < 0) continue;
      last_errno = connect_until(fd, t->ai_addr, t->ai_addrlen, deadline);
      if (last_errno == 0) {
        ::freeaddrinfo(res);
        return std::unique_ptr<OobSocket>(new OobSocket(fd));
      }
      ::close(fd);
    }
    // Only a server that is not listening yet is worth waiting for.
    const bool retry = last_errno == ECONNREFUSED || last_errno == ETIMEDOUT;
    if (!retry || !deadline || Clock::now() + kConnectRetry > *deadline) break;
    std::this_thread::sleep_for(kConnectRetry);
  }
  ::freeaddrinfo(res);
  error = connect_error_text(host, port, last_errno);
  return nullptr;
}

bool OobSocket::send_all(std::span<const char> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool OobSocket::fill(Deadline deadline, bool& closed) {
  if (!wait_readable(fd_, deadline)) return false;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    closed = true;
    return false;
  }
}

bool OobSocket::recv_all(std::span<char> bytes, Deadline deadline) {
  bool closed = false;
  while (buffer_.size() < bytes.size()) {
    if (!fill(deadline, closed) && (closed || poll_timeout_ms(deadline) == 0)) return false;
  }
  std::memcpy(bytes.data(), buffer_.data(), bytes.size());
  buffer_.erase(0, bytes.size());
  return true;
}

bool OobSocket::send_line(const std::string& line) {
  const std::string framed = line + "\n";
  return send_all(framed);
}

bool OobSocket::recv_line(std::string& line, Deadline deadline) {
  bool closed = false;
  for (;;) {
    if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    if (!fill(deadline, closed) && (closed || poll_timeout_ms(deadline) == 0)) return false;
  }
}

bool OobSocket::peer_closed() const {
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0) return true;
  char c = 0;
  return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool OobSocket::try_recv_line(std::string& line, bool& closed) {
  closed = false;
  if (buffer_.find('\n') == std::string::npos) {
    (void)fill(Clock::now(), closed);
  }
  if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
    line = buffer_.substr(0, nl);
    buffer_.erase(0, nl + 1);
    return true;
  }
  return false;
}

}  // namespace uroce::cli
