#include "rdmacm/address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "wire/ip_layout.hpp"

namespace uroce::rdmacm {

socklen_t addr_len(const sockaddr* a) {
  if (a == nullptr) return 0;
  if (a->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (a->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

bool is_any(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  const auto* s6 = reinterpret_cast<const sockaddr_in6*>(a);
  return IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
}

uint16_t port_of(const sockaddr* a) {
  if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
}

void set_port(sockaddr* a, uint16_t port) {
  if (a->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
  }
}

cm::Gid gid_of(const sockaddr* a) {
  cm::Gid g{};
  if (a->sa_family == AF_INET) {
    g[10] = 0xFF;
    g[11] = 0xFF;
    std::memcpy(&g[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  } else {
    std::memcpy(g.data(), &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  }
  return g;
}

void sockaddr_of_gid(const cm::Gid& gid, uint16_t port, sockaddr_storage& out) {
  // The GID's bytes are the cma_hdr form but for the ::ffff: prefix of an IPv4 address.
  sockaddr_of_cma(wire::is_ipv4_mapped(gid) ? 4 : 6, gid, port, out);
}

std::array<uint8_t, 16> cma_addr_of(const sockaddr* a) {
  std::array<uint8_t, 16> out{};
  if (a->sa_family == AF_INET) {
    std::memcpy(&out[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  } else {
    std::memcpy(out.data(), &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  }
  return out;
}

void sockaddr_of_cma(uint8_t ip_version, const std::array<uint8_t, 16>& addr, uint16_t port,
                     sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (ip_version == 4) {
    auto* s = reinterpret_cast<sockaddr_in*>(&out);
    s->sin_family = AF_INET;
    s->sin_port = htons(port);
    std::memcpy(&s->sin_addr, &addr[12], 4);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&out);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(port);
    std::memcpy(&s->sin6_addr, addr.data(), 16);
  }
}

int route_source(const sockaddr* dst, sockaddr_storage& src) {
  const int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  // Connecting a UDP socket sends nothing: it asks the routing table for the source address.
  sockaddr_storage to{};
  std::memcpy(&to, dst, addr_len(dst));
  set_port(reinterpret_cast<sockaddr*>(&to), 4791);
  int err = 0;
  socklen_t len = sizeof src;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), addr_len(dst)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len) != 0) {
    err = errno;
  }
  close(fd);
  return err;
}

std::string netdev_of(const sockaddr* addr) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::string name;
  const cm::Gid want = gid_of(addr);
  for (ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != addr->sa_family) continue;
    if (gid_of(i->ifa_addr) == want) name = i->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

std::string to_string(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  } else if (a->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

}  // namespace uroce::rdmacm
