// udp_gro_receiver: receives on --port with UDP_GRO, so the kernel hands it many datagrams
// per recvmsg, and counts them. It starts the clock at the first datagram and stops at the
// last one, once the sender has been quiet for 300 ms (or after 3 x --seconds in all).
// Prints one JSON line with what arrived.
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "udp_baseline.hpp"

int main(int argc, char** argv) {
  using namespace uroce::bench;
  Args a;
  if (!parse_args(argc, argv, a,
                  "udp_gro_receiver [--host 127.0.0.1] [--port 19999] [--seconds 3]")) {
    return 2;
  }
  if (a.help) return 0;
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  int rcvbuf = 32 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  int one = 1;
  if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) != 0) {
    std::fprintf(stderr, "udp_gro_receiver: UDP_GRO unavailable, one datagram per call\n");
  }
  sockaddr_in addr{};
  if (!ipv4_address("udp_gro_receiver", a.host, a.port, addr)) return 2;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "udp_gro_receiver: bind %s:%d: %s\n", a.host.c_str(), a.port,
                 std::strerror(errno));
    return 1;
  }
  std::printf("{\"role\":\"receiver\",\"ready\":true}\n");
  std::fflush(stdout);
  std::vector<char> buf(1 << 16);
  char control[CMSG_SPACE(sizeof(int))];
  unsigned long long bytes = 0;
  unsigned long long datagrams = 0;
  const auto begin = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point first{};
  std::chrono::steady_clock::time_point last{};
  bool started = false;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, started ? 300 : 100);
    if (ready <= 0) {
      if (started || seconds_since(begin) > 3 * a.seconds) break;
      continue;
    }
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n <= 0) continue;
    int segment = static_cast<int>(n);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
        std::memcpy(&segment, CMSG_DATA(c), sizeof segment);
      }
    }
    if (!started) {
      started = true;
      first = std::chrono::steady_clock::now();
    }
    last = std::chrono::steady_clock::now();
    bytes += static_cast<unsigned long long>(n);
    datagrams += (static_cast<unsigned long long>(n) + segment - 1) / segment;
  }
  print_result("receiver", bytes, datagrams, std::chrono::duration<double>(last - first).count());
  close(fd);
  return 0;
}
