// udp_pingpong: the latency floor of a busy-polling UDP ping-pong through this kernel, with
// each step timed. It forks an echo process; both spin on a non-blocking recvmmsg and answer
// with one sendmmsg, as uroce's socket path does, and do nothing else. The parent times its
// own calls (a sendmmsg includes the loopback delivery to the peer's socket) and prints one
// JSON line: the one-way median and the mean of each call. docs/performance.md compares
// uroce's steps with these ("Where a one-way 8-byte SEND goes on the socket path").
#include <arpa/inet.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "udp_baseline.hpp"

namespace {

int64_t mono_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

int bound_socket(const sockaddr_in& at) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0) {
    std::fprintf(stderr, "udp_pingpong: bind to port %d: %s\n", ntohs(at.sin_port),
                 std::strerror(errno));
    std::exit(1);
  }
  return fd;
}

struct Endpoint {
  int fd = -1;
  sockaddr_in peer{};
  std::vector<char> in = std::vector<char>(65536);
  std::vector<char> out;
  iovec in_iov{};
  iovec out_iov{};
  mmsghdr rx{};
  mmsghdr tx{};

  Endpoint(int fd_, const sockaddr_in& to, int size) : fd(fd_), peer(to), out(size, 'x') {
    in_iov = iovec{in.data(), in.size()};
    out_iov = iovec{out.data(), out.size()};
    rx.msg_hdr.msg_iov = &in_iov;
    rx.msg_hdr.msg_iovlen = 1;
    tx.msg_hdr.msg_name = &peer;
    tx.msg_hdr.msg_namelen = sizeof peer;
    tx.msg_hdr.msg_iov = &out_iov;
    tx.msg_hdr.msg_iovlen = 1;
  }
  bool receive() { return recvmmsg(fd, &rx, 1, MSG_DONTWAIT, nullptr) == 1; }
  void send() { (void)sendmmsg(fd, &tx, 1, MSG_DONTWAIT); }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace uroce::bench;
  Args a;
  a.size = 48;  // an 8-byte RC SEND: BTH 12 + payload 8 (padded) + ICRC 4, plus room
  if (!parse_args(argc, argv, a,
                  "udp_pingpong [--host 127.0.0.1] [--port 19999 (and the next)] [--size 48] "
                  "[--seconds 3] [--round-trips N (then --seconds is only the limit)]")) {
    return 2;
  }
  if (a.help) return 0;
  if (a.port == 65535) {
    std::fprintf(stderr, "udp_pingpong: --port must leave room for the echo's port after it\n");
    return 2;
  }
  sockaddr_in here{};
  sockaddr_in echo_at{};
  if (!ipv4_address("udp_pingpong", a.host, a.port, here) ||
      !ipv4_address("udp_pingpong", a.host, a.port + 1, echo_at)) {
    return 2;
  }
  const int echo_fd = bound_socket(echo_at);
  const int fd = bound_socket(here);
  const pid_t echo = fork();
  if (echo == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never left spinning after the parent
    if (getppid() == 1) _exit(1);
    close(fd);
    Endpoint e(echo_fd, here, a.size);
    for (;;) {
      if (e.receive()) e.send();
    }
  }
  close(echo_fd);
  Endpoint p(fd, echo_at, a.size);
  std::vector<int64_t> rtts;
  int64_t send_ns = 0;
  int64_t recv_ns = 0;
  int64_t empty_ns = 0;
  long long empty = 0;
  const int64_t end = mono_ns() + static_cast<int64_t>(a.seconds * 1e9);
  const auto wanted = static_cast<size_t>(a.round_trips);
  bool lost = false;
  int64_t now = mono_ns();
  // Either a count of round trips (--seconds only bounds it) or as many as fit in --seconds.
  while (wanted != 0 ? rtts.size() < wanted && now < end : now < end) {
    const int64_t start = now;
    p.send();
    const int64_t sent = mono_ns();
    send_ns += sent - start;
    for (;;) {
      const int64_t before = mono_ns();
      const bool got = p.receive();
      now = mono_ns();
      if (got) {
        recv_ns += now - before;
        break;
      }
      empty_ns += now - before;
      ++empty;
      if (now > end + 1'000'000'000) {  // the echo died: stop, do not spin forever
        lost = true;
        break;
      }
    }
    if (lost) break;
    rtts.push_back(now - start);
  }
  kill(echo, SIGKILL);
  waitpid(echo, nullptr, 0);
  if (lost) {
    std::fprintf(stderr, "udp_pingpong: no reply within a second after the run's end\n");
    return 1;
  }
  if (rtts.empty() || rtts.size() < wanted) {
    std::fprintf(stderr, "udp_pingpong: %zu of %zu round trips in %g s; give --seconds more\n",
                 rtts.size(), wanted, a.seconds);
    return 1;
  }
  std::sort(rtts.begin(), rtts.end());
  const double n = static_cast<double>(rtts.size());
  std::printf(
      "{\"round_trips\":%zu,\"one_way_median_us\":%.2f,\"one_way_p99_us\":%.2f,"
      "\"sendmmsg_ns\":%.0f,\"recvmmsg_data_ns\":%.0f,\"recvmmsg_empty_ns\":%.0f,"
      "\"empty_per_round_trip\":%.2f}\n",
      rtts.size(), static_cast<double>(rtts[rtts.size() / 2]) / 2000.0,
      static_cast<double>(rtts[rtts.size() * 99 / 100]) / 2000.0, static_cast<double>(send_ns) / n,
      static_cast<double>(recv_ns) / n,
      empty != 0 ? static_cast<double>(empty_ns) / static_cast<double>(empty) : 0.0,
      static_cast<double>(empty) / n);
  return 0;
}
