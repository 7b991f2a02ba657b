// Failure explanations of perf and pingpong: see peer_diagnosis.hpp.
#include "cli/peer_diagnosis.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "telemetry/device_telemetry.hpp"
#include "telemetry/snapshot.hpp"
#include "wire/ip_layout.hpp"

namespace uroce::cli {
namespace {

const char* family(const device::Gid& g) {
  return wire::is_ipv4_mapped(g) ? "IPv4" : "IPv6";
}

}  // namespace

std::string gid_family_mismatch(const device::Device& dev, const GidChoice& mine,
                                const device::Gid& theirs) {
  if (wire::is_ipv4_mapped(mine.gid) == wire::is_ipv4_mapped(theirs)) return {};
  std::optional<size_t> use;
  device::Gid use_gid{};
  for (const device::PortInfo& p : dev.ports()) {
    if (p.port_num != mine.port) continue;
    for (size_t i = 0; i < p.gids.size() && !use; ++i) {
      if (!p.gids[i].empty() &&
          wire::is_ipv4_mapped(p.gids[i].gid) == wire::is_ipv4_mapped(theirs)) {
        use = i;
        use_gid = p.gids[i].gid;
      }
    }
  }
  const std::string fix = use ? fmt::format("use GID index {} ({}) with -g/-x {}", *use,
                                            telemetry::gid_address(use_gid), *use)
                              : fmt::format("port {} has no {} GID: give the peer an {} address",
                                            mine.port, family(theirs), family(mine.gid));
  return fmt::format(
      "GID index {} is {} ({}) but the peer's GID is {} ({}): RoCE packets cannot cross IP "
      "families — {}",
      mine.index, family(mine.gid), telemetry::gid_address(mine.gid), family(theirs),
      telemetry::gid_address(theirs), fix);
}

uint32_t port_active_mtu(const device::Device& dev, uint8_t port) {
  device::PortAttr attr;
  if (!dev.query_port(port, attr)) return 1024;
  return transport::mtu_bytes(attr.active_mtu);
}

uint32_t clamp_path_mtu(const device::Device& dev, uint8_t port, uint32_t requested,
                        std::optional<uint32_t> peer_active, std::string* note) {
  const uint32_t here = port_active_mtu(dev, port);
  uint32_t mtu = std::min(requested, here);
  if (peer_active && *peer_active >= 256) mtu = std::min(mtu, *peer_active);
  if (mtu < requested && note != nullptr) {
    *note = peer_active ? fmt::format(
                              "-m {} is larger than the active MTU ({} here, {} at the peer): "
                              "using {}",
                              requested, here, *peer_active, mtu)
                        : fmt::format("-m {} is larger than the active MTU {}: using {}", requested,
                                      here, mtu);
  }
  return mtu;
}

std::string stall_reason(const device::Device& dev, uint32_t qpn, const device::Gid& peer,
                         bool sends_outstanding, uint32_t path_mtu) {
  if (sends_outstanding) {
    std::string why = telemetry::diagnose_qp(dev, qpn);
    if (!why.empty()) return why;
    return fmt::format(
        "{} does not answer: the peer is gone or packets are lost — run uroce "
        "doctor --peer {}",
        telemetry::gid_address(peer), telemetry::gid_address(peer));
  }
  const std::string p = telemetry::gid_address(peer);
  return fmt::format(
      "{} acknowledged our messages but its own stopped arriving: the peer stalled (see its "
      "error), or it sends packets larger than this path carries (our path MTU is {}; a peer "
      "with -m above the smaller side's active MTU sends packets that are dropped: use the same "
      "-m on both sides) — run uroce doctor --peer {}",
      p, path_mtu, p);
}

std::string connect_error_text(const std::string& host, uint16_t port, int err) {
  switch (err) {
    case ECONNREFUSED:
      return fmt::format("connection refused by {}:{}: is the server running?", host, port);
    case ETIMEDOUT:
      return fmt::format(
          "no answer from {}:{} (TCP connect timed out): the host is down or a firewall drops "
          "TCP {}",
          host, port, port);
    case EHOSTUNREACH:
      // On a local subnet this is mostly a host that does not answer ARP / neighbour
      // discovery (down, or the wrong address), not a missing route.
      return fmt::format(
          "cannot reach {} ({}): is the host up and the address right? (`ip neigh show {}` "
          "says whether it answered ARP, `ip route get {}` which way it goes)",
          host, std::strerror(err), host, host);
    case ENETUNREACH:
      return fmt::format("no route to {} ({}): check the address and `ip route get {}`", host,
                         std::strerror(err), host);
    default:
      return fmt::format("couldn't connect to {}:{}: {}", host, port, std::strerror(err));
  }
}

}  // namespace uroce::cli
