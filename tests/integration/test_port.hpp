// Port numbers for tests that run uroce in the host's own network namespace.
//
// ctest runs tests in parallel, each in a process of its own. Two tests that picked the same
// UDP port joined one kernel SO_REUSEPORT group while each kept its own registry (every test
// has a private registry directory), so the kernel's positions matched neither registry and
// each test's datagrams were steered into the other's sockets and dropped there; the same TCP
// port failed the second test's bind instead. Ports derived from the pid or the time collide
// that way now and then over a thousand tests. A port handed out here is held, for the life of
// the test process, by a lock on /tmp/uroce-test-ports/<port> that every other test process
// honours, and is checked unused (UDP and TCP on 127.0.0.1 and ::1) when it is handed out.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace uroce::test {

// Below the kernel's ephemeral range (32768 and up: probes and clients bind port 0), and
// never the fixed ports of the socket unit tests (24700-24899, tests/unit/net/*_test.cpp).
inline constexpr uint16_t kTestPortFirst = 20000;
inline constexpr uint16_t kTestPortEnd = 32000;  // exclusive
inline constexpr uint16_t kFixedPortsFirst = 24700;
inline constexpr uint16_t kFixedPortsEnd = 24900;  // exclusive

// True unless something is bound to `port` (a socket that cannot bind for another reason,
// say no IPv6 on this host, says nothing about the port and counts as free).
inline bool port_unused(uint16_t port) {
  for (const int family : {AF_INET, AF_INET6}) {
    for (const int type : {SOCK_DGRAM, SOCK_STREAM}) {
      const int fd = socket(family, type | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      // A TCP port in TIME_WAIT is usable by the listeners the tests start (SO_REUSEADDR).
      const int one = 1;
      if (type == SOCK_STREAM) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      int rc = 0;
      if (family == AF_INET) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      } else {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_loopback;
        a.sin6_port = htons(port);
        rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      }
      const int err = errno;
      close(fd);
      if (rc != 0 && err == EADDRINUSE) return false;
    }
  }
  return true;
}

// A port no other test process holds and nothing uses now, kept until this process exits
// (the lock goes with the process; children started by fork share it). Aborts when the whole
// range is taken: a test cannot run without a port of its own.
inline uint16_t reserve_port() {
  const std::string dir = "/tmp/uroce-test-ports";
  mkdir(dir.c_str(), 0777);  // shared by every test process; EEXIST is the usual case
  constexpr unsigned kSpan = kTestPortEnd - kTestPortFirst;
  static unsigned next = static_cast<unsigned>(getpid()) * 7919u % kSpan;
  for (unsigned tried = 0; tried < kSpan; ++tried, ++next) {
    const auto port = static_cast<uint16_t>(kTestPortFirst + next % kSpan);
    if (port >= kFixedPortsFirst && port < kFixedPortsEnd) continue;
    const std::string path = dir + "/" + std::to_string(port);
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || !port_unused(port)) {
      close(fd);
      continue;
    }
    ++next;
    return port;  // fd stays open: the lock is held until the process exits
  }
  std::abort();
}

}  // namespace uroce::test
