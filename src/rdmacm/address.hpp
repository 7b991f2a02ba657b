// IP addresses as rdma_cm handles them: sockaddrs, their GIDs (RoCE v2: the IPv4-mapped
// ::ffff:a.b.c.d form, or the IPv6 address), the cma_hdr form, the netdev that owns one and
// the source address the routing table picks towards a destination.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "cm/cm_messages.hpp"
#include "cm/ip_cm_service.hpp"

namespace uroce::rdmacm {

[[nodiscard]] socklen_t addr_len(const sockaddr* a);  // 0 for a family other than IPv4/6
[[nodiscard]] bool is_any(const sockaddr* a);         // 0.0.0.0 or ::
[[nodiscard]] uint16_t port_of(const sockaddr* a);    // host order
void set_port(sockaddr* a, uint16_t port);
[[nodiscard]] cm::Gid gid_of(const sockaddr* a);
// The sockaddr of a GID (IPv4 when mapped) with `port`.
void sockaddr_of_gid(const cm::Gid& gid, uint16_t port, sockaddr_storage& out);
// cma_hdr's address form and back.
[[nodiscard]] std::array<uint8_t, 16> cma_addr_of(const sockaddr* a);
void sockaddr_of_cma(uint8_t ip_version, const std::array<uint8_t, 16>& addr, uint16_t port,
                     sockaddr_storage& out);
// The source address the routing table uses towards `dst` (a connected UDP socket's name):
// 0, or an errno value (ENETUNREACH, EHOSTUNREACH...).
int route_source(const sockaddr* dst, sockaddr_storage& src);
// The netdev that has `addr` (empty when none does).
[[nodiscard]] std::string netdev_of(const sockaddr* addr);
[[nodiscard]] std::string to_string(const sockaddr* a);

}  // namespace uroce::rdmacm
