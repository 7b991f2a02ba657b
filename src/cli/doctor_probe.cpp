#include "cli/doctor_probe.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "net/netdev.hpp"

namespace uroce::cli {

namespace {

constexpr std::string_view kMagic = "UROCEDOC1";
// IP + UDP headers: the probe payload plus these must fit the interface MTU.
constexpr size_t kIpv4UdpHeaders = 20 + 8;
constexpr size_t kIpv6UdpHeaders = 40 + 8;
// A WRITE FIRST at active_mtu: BTH 12 + RETH 16 + payload + ICRC 4.
constexpr size_t kRoceOverhead = 12 + 16 + 4;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// `address`: a numeric address (the local end of the route, or the peer as given).
size_t ip_udp_headers(const std::string& address) {
  return address.find(':') != std::string::npos ? kIpv6UdpHeaders : kIpv4UdpHeaders;
}

bool resolve(const std::string& host, uint16_t port, sockaddr_storage& out, socklen_t& len) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints,
                  &res) != 0 ||
      res == nullptr) {
    return false;
  }
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

}  // namespace

std::optional<ProbeReply> send_probe(const std::string& peer, uint16_t port, size_t bytes,
                                     uint32_t netdev_mtu, uint32_t active_mtu, int tries,
                                     int timeout_ms, std::string* local_error) {
  sockaddr_storage to{};
  socklen_t to_len = 0;
  if (!resolve(peer, port, to, to_len)) {
    if (local_error != nullptr) *local_error = "cannot resolve " + peer;
    return std::nullopt;
  }
  Fd s{socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return std::nullopt;
  const int df = to.ss_family == AF_INET ? IP_PMTUDISC_DO : IPV6_PMTUDISC_DO;
  int tos = kProbeTos;
  if (to.ss_family == AF_INET) {
    setsockopt(s.fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof(df));
    setsockopt(s.fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
  } else {
    setsockopt(s.fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &df, sizeof(df));
    setsockopt(s.fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
  }
  for (int attempt = 0; attempt < tries; ++attempt) {
    const uint32_t seq = static_cast<uint32_t>(getpid()) * 16 + static_cast<uint32_t>(attempt);
    std::string msg = fmt::format("{} Q {} {} {}\n", kMagic, seq, netdev_mtu, active_mtu);
    if (msg.size() < bytes) msg.resize(bytes, 'x');
    if (sendto(s.fd, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&to), to_len) < 0) {
      if (local_error != nullptr) {
        *local_error = errno == EMSGSIZE
                           ? fmt::format("{} bytes do not fit the local interface MTU (EMSGSIZE)",
                                         msg.size() + (to.ss_family == AF_INET6 ? kIpv6UdpHeaders
                                                                                : kIpv4UdpHeaders))
                           : std::string(std::strerror(errno));
      }
      return std::nullopt;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{s.fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[512];
      const ssize_t n = recv(s.fd, buf, sizeof(buf) - 1, 0);
      if (n <= 0) continue;
      buf[n] = '\0';
      std::istringstream in(buf);
      std::string magic, kind;
      uint32_t rseq = 0;
      unsigned rtos = 0;
      ProbeReply r;
      in >> magic >> kind >> rseq >> r.netdev_mtu >> r.active_mtu >> r.received_bytes >> rtos;
      if (!in || magic != kMagic || kind != "R" || rseq != seq) continue;
      r.tos = static_cast<uint8_t>(rtos);
      return r;
    }
  }
  return std::nullopt;
}

std::vector<CheckResult> run_peer_checks(const std::string& peer, uint16_t port,
                                         const std::optional<Route>& route) {
  std::vector<CheckResult> out;
  const uint32_t netdev_mtu = route && route->mtu != 0 ? route->mtu : 1500;
  const uint32_t active = net::active_mtu_for_netdev_mtu(netdev_mtu);
  const std::string dev = route && !route->netdev.empty() ? route->netdev : "IFACE";

  std::string error;
  std::optional<ProbeReply> small = send_probe(peer, port, 64, netdev_mtu, active, 3, 700, &error);
  CheckResult reach{"udp_reachability"};
  if (!small) {
    reach.level = CheckLevel::kFail;
    reach.detail = error.empty()
                       ? fmt::format(
                             "no answer from {} on UDP {} within 2 s: UDP {} is dropped on "
                             "the path or by a firewall, or `uroce doctor --listen` is not "
                             "running there",
                             peer, port, port)
                       : error;
    reach.fix = fmt::format(
        "on {}: uroce doctor --listen, and there and here: nft list ruleset | grep {} (remove a "
        "drop rule with nft delete rule FAMILY TABLE CHAIN handle N)",
        peer, port);
    out.push_back(reach);
    return out;
  }
  reach.detail = fmt::format("{} answers on UDP {}", peer, port);
  out.push_back(reach);

  const size_t big = active + kRoceOverhead;
  CheckResult path{"mtu_path"};
  error.clear();
  std::optional<ProbeReply> large = send_probe(peer, port, big, netdev_mtu, active, 3, 700, &error);
  if (!large) {
    path.level = CheckLevel::kFail;
    path.detail = fmt::format(
        "{} answers {}-byte probes but not {}-byte ones (an IP packet of {} bytes, the largest "
        "RoCE packet at active_mtu {}){}: something on the path has a smaller MTU; the peer's "
        "netdev MTU is {} (active_mtu {})",
        peer, 64, big, big + ip_udp_headers(route ? route->local_address : peer), active,
        error.empty() ? "" : " — " + error, small->netdev_mtu, small->active_mtu);
    const uint32_t lower = std::min(netdev_mtu, small->netdev_mtu);
    path.fix = fmt::format(
        "ip link set dev {} mtu {} (here), or raise the MTU of the peer and every "
        "hop to {}",
        dev, lower, netdev_mtu);
  } else {
    path.detail = fmt::format("{}-byte probes (largest RoCE packet at active_mtu {}) reach {}", big,
                              active, peer);
  }
  out.push_back(path);

  CheckResult mtu{"mtu_peer"};
  mtu.detail = fmt::format("active_mtu {} here ({} MTU {}), {} at {} (MTU {})", active, dev,
                           netdev_mtu, small->active_mtu, peer, small->netdev_mtu);
  if (small->active_mtu != active) {
    mtu.level = CheckLevel::kWarn;
    mtu.detail +=
        "; both sides must use the smaller path_mtu (perftest and ibv_rc_pingpong use "
        "their own port's active_mtu)";
    mtu.fix = fmt::format("ip link set dev {} mtu {} (here) or set the peer's MTU to {}", dev,
                          small->netdev_mtu, netdev_mtu);
  }
  out.push_back(mtu);

  CheckResult tos{"tos"};
  tos.detail = fmt::format(
      "sent TOS {:#04x} (DSCP {}, ECN {}), {} received {:#04x} (DSCP {}, ECN {})", kProbeTos,
      kProbeTos >> 2, kProbeTos & 3, peer, small->tos, small->tos >> 2, small->tos & 3);
  if (small->tos != kProbeTos) {
    tos.level = CheckLevel::kWarn;
    tos.detail += ": the path rewrites DSCP/ECN, so RoCE traffic may miss its lossless class";
    tos.fix = "check the switches' DSCP trust/remark settings (e.g. mlnx_qos --trust dscp)";
  }
  out.push_back(tos);
  return out;
}

int run_probe_listener(const std::string& bind_address, uint16_t port, unsigned max_replies,
                       double timeout_s) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  // By default one dual-stack socket on [::] answers IPv4 (as ::ffff:a.b.c.d) and IPv6 probes;
  // 0.0.0.0 only where IPv6 is off.
  std::string host = bind_address;
  if (host.empty()) {
    const int probe = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    host = probe >= 0 ? "::" : "0.0.0.0";
    if (probe >= 0) close(probe);
  }
  if (!resolve(host, port, addr, len)) {
    fmt::print(stderr, "uroce doctor --listen: cannot resolve {}\n", host);
    return 2;
  }
  Fd s{socket(addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  int on = 1, off = 0;
  if (addr.ss_family == AF_INET6) setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  setsockopt(s.fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
  if (addr.ss_family == AF_INET6) setsockopt(s.fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof(on));
  if (s.fd < 0 || bind(s.fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    fmt::print(stderr,
               "uroce doctor --listen: cannot bind UDP port {} on {}: {} (a uroce process or "
               "rdma_rxe holds it: stop it for the check, or use --port)\n",
               port, host, std::strerror(errno));
    return 2;
  }
  unsigned replies = 0;
  for (;;) {
    pollfd p{s.fd, POLLIN, 0};
    const int timeout_ms = timeout_s > 0 ? static_cast<int>(timeout_s * 1000) : -1;
    if (poll(&p, 1, timeout_ms) <= 0) return 0;
    std::vector<char> buf(65536);
    sockaddr_storage from{};
    iovec iov{buf.data(), buf.size() - 1};
    alignas(cmsghdr) char control[256];
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof(from);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(s.fd, &msg, 0);
    if (n <= 0) continue;
    int tos = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        tos = *reinterpret_cast<unsigned char*>(CMSG_DATA(c));
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        std::memcpy(&tos, CMSG_DATA(c), sizeof(int));
      }
    }
    buf[static_cast<size_t>(n)] = '\0';
    std::istringstream in(std::string(buf.data(), std::min<size_t>(static_cast<size_t>(n), 128)));
    std::string magic, kind;
    uint32_t seq = 0;
    in >> magic >> kind >> seq;
    if (!in || magic != kMagic || kind != "Q") continue;
    // Our own MTU: of the interface that routes back to the prober.
    char text[INET6_ADDRSTRLEN] = {};
    if (from.ss_family == AF_INET6) {
      const auto* a6 = reinterpret_cast<sockaddr_in6*>(&from);
      if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
        inet_ntop(AF_INET, reinterpret_cast<const uint8_t*>(&a6->sin6_addr) + 12, text,
                  sizeof(text));
      } else {
        inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof(text));
      }
    } else {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&from)->sin_addr, text, sizeof(text));
    }
    std::optional<Route> back = route_to(text, nullptr);
    const uint32_t mtu = back && back->mtu != 0 ? back->mtu : 1500;
    const std::string reply = fmt::format("{} R {} {} {} {} {}\n", kMagic, seq, mtu,
                                          net::active_mtu_for_netdev_mtu(mtu), n, tos);
    sendto(s.fd, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from),
           msg.msg_namelen);
    fmt::print("answered a {}-byte probe from {} (TOS {:#04x})\n", n, text, tos);
    std::fflush(stdout);
    if (max_replies != 0 && ++replies >= max_replies) return 0;
  }
}

}  // namespace uroce::cli
