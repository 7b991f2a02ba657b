// udp_gso_sender: sends --size-byte UDP datagrams to --host:--port for --seconds as fast as
// the kernel takes them, handing it up to 64 KiB per sendmsg with UDP_SEGMENT (GSO), so the
// per-datagram cost is the kernel's alone. Prints one JSON line with what it sent.
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "udp_baseline.hpp"

int main(int argc, char** argv) {
  using namespace uroce::bench;
  Args a;
  if (!parse_args(argc, argv, a,
                  "udp_gso_sender [--host 127.0.0.1] [--port 19999] [--size 4112] [--seconds 3]")) {
    return 2;
  }
  if (a.help) return 0;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &res) != 0) {
    std::fprintf(stderr, "udp_gso_sender: cannot resolve %s\n", a.host.c_str());
    return 1;
  }
  const int fd = socket(res->ai_family, SOCK_DGRAM, 0);
  if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    std::fprintf(stderr, "udp_gso_sender: socket/connect: %s\n", std::strerror(errno));
    return 1;
  }
  freeaddrinfo(res);
  int sndbuf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  const int segment = a.size;
  const int per_call = std::max(1, std::min(64, 65507 / segment));
  bool gso = setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &segment, sizeof segment) == 0;
  if (!gso)
    std::fprintf(stderr, "udp_gso_sender: UDP_SEGMENT unavailable, one datagram per call\n");
  std::vector<char> buf(static_cast<size_t>(segment) * (gso ? per_call : 1), 'x');
  unsigned long long bytes = 0;
  unsigned long long datagrams = 0;
  const auto start = std::chrono::steady_clock::now();
  while (seconds_since(start) < a.seconds) {
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = send(fd, buf.data(), buf.size(), 0);
      if (n < 0) {
        if (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED) continue;
        std::fprintf(stderr, "udp_gso_sender: send: %s\n", std::strerror(errno));
        return 1;
      }
      bytes += static_cast<unsigned long long>(n);
      datagrams += (static_cast<unsigned long long>(n) + segment - 1) / segment;
    }
  }
  print_result("sender", bytes, datagrams, seconds_since(start));
  close(fd);
  return 0;
}
