#include "net/ip_addr.hpp"

#include <arpa/inet.h>

#include <cstring>

#include "wire/ip_layout.hpp"

namespace uroce::net {

IpAddr IpAddr::v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddr r;
  r.bytes[10] = 0xff;
  r.bytes[11] = 0xff;
  r.bytes[12] = a;
  r.bytes[13] = b;
  r.bytes[14] = c;
  r.bytes[15] = d;
  return r;
}

IpAddr IpAddr::from_in(const in_addr& a) {
  IpAddr r;
  r.bytes[10] = 0xff;
  r.bytes[11] = 0xff;
  std::memcpy(&r.bytes[12], &a.s_addr, 4);  // s_addr is already in network order
  return r;
}

IpAddr IpAddr::from_in6(const in6_addr& a) {
  IpAddr r;
  std::memcpy(r.bytes.data(), a.s6_addr, 16);
  return r;
}

std::optional<IpAddr> IpAddr::parse(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  std::string s(text);
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) return from_in(a4);
  in6_addr a6{};
  if (inet_pton(AF_INET6, s.c_str(), &a6) == 1) return from_in6(a6);
  return std::nullopt;
}

bool IpAddr::is_v4() const {
  return wire::is_ipv4_mapped(bytes);
}

bool IpAddr::is_loopback() const {
  if (is_v4()) return bytes[12] == 127;
  for (int i = 0; i < 15; ++i) {
    if (bytes[i] != 0) return false;
  }
  return bytes[15] == 1;
}

bool IpAddr::is_link_local() const {
  return !is_v4() && bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80;
}

in_addr IpAddr::to_in() const {
  in_addr a{};
  std::memcpy(&a.s_addr, &bytes[12], 4);
  return a;
}

in6_addr IpAddr::to_in6() const {
  in6_addr a{};
  std::memcpy(a.s6_addr, bytes.data(), 16);
  return a;
}

std::string IpAddr::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_v4()) {
    in_addr a = to_in();
    inet_ntop(AF_INET, &a, buf, sizeof buf);
  } else {
    in6_addr a = to_in6();
    inet_ntop(AF_INET6, &a, buf, sizeof buf);
  }
  return buf;
}

SockAddr SockAddr::make(const IpAddr& addr, uint16_t port, uint32_t scope_id) {
  SockAddr s;
  if (addr.is_v4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&s.storage);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    sin->sin_addr = addr.to_in();
    s.len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&s.storage);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    sin6->sin6_addr = addr.to_in6();
    sin6->sin6_scope_id = scope_id;
    s.len = sizeof(sockaddr_in6);
  }
  return s;
}

std::optional<std::pair<IpAddr, uint16_t>> SockAddr::split(const sockaddr* sa) {
  if (sa == nullptr) return std::nullopt;
  if (sa->sa_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(sa);
    return std::make_pair(IpAddr::from_in(sin->sin_addr), ntohs(sin->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return std::make_pair(IpAddr::from_in6(sin6->sin6_addr), ntohs(sin6->sin6_port));
  }
  return std::nullopt;
}

std::string endpoint_string(const IpAddr& addr, uint16_t port) {
  if (addr.is_v4()) return addr.to_string() + ":" + std::to_string(port);
  return "[" + addr.to_string() + "]:" + std::to_string(port);
}

}  // namespace uroce::net
