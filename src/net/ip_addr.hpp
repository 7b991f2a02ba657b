// IpAddr: one IPv4 or IPv6 address in the form a GID and wire::IpContext use — 16 bytes, with
// an IPv4 address stored IPv4-mapped as ::ffff:a.b.c.d (docs/wire-facts.md "A GID is an IPv6
// address"). Conversions to and from sockaddr live here so no other file juggles them.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uroce::net {

using Gid = std::array<uint8_t, 16>;

struct IpAddr {
  Gid bytes{};

  [[nodiscard]] static IpAddr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);
  [[nodiscard]] static IpAddr from_in(const in_addr& a);
  [[nodiscard]] static IpAddr from_in6(const in6_addr& a);
  // "192.0.2.1", "fd00::2", "::ffff:192.0.2.1" (stored as IPv4), "[fe80::1]" brackets allowed.
  [[nodiscard]] static std::optional<IpAddr> parse(std::string_view text);

  [[nodiscard]] bool is_v4() const;  // ::ffff:0:0/96
  [[nodiscard]] bool is_loopback() const;
  [[nodiscard]] bool is_link_local() const;  // fe80::/10 (IPv6 only)
  [[nodiscard]] in_addr to_in() const;       // only meaningful when is_v4()
  [[nodiscard]] in6_addr to_in6() const;
  // Dotted quad for IPv4, RFC 5952 text for IPv6.
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const IpAddr&, const IpAddr&) = default;
};

// A socket address for `addr`:`port`: sockaddr_in for IPv4 (uroce uses AF_INET sockets for
// IPv4 GIDs), sockaddr_in6 otherwise. `scope_id` matters for link-local IPv6 only.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  [[nodiscard]] static SockAddr make(const IpAddr& addr, uint16_t port, uint32_t scope_id = 0);
  [[nodiscard]] const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  [[nodiscard]] sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
  // Address and port of an AF_INET / AF_INET6 sockaddr; nullopt for any other family.
  [[nodiscard]] static std::optional<std::pair<IpAddr, uint16_t>> split(const sockaddr* sa);
};

// "192.0.2.1:4791", "[fd00::2]:4791".
[[nodiscard]] std::string endpoint_string(const IpAddr& addr, uint16_t port);

}  // namespace uroce::net
