// The peer half of `uroce doctor`: a UDP probe exchange with `uroce doctor --listen` on the
// other host, sent to UDP port 4791 itself (so a firewall that drops RoCE v2 drops the probe).
//
//   request  "UROCEDOC1 Q <seq> <netdev_mtu> <active_mtu>" padded with 'x' to the probe size,
//            sent with DF and TOS 0x6a (DSCP 26, ECT(0): what lossless RoCE fabrics classify)
//   reply    "UROCEDOC1 R <seq> <netdev_mtu> <active_mtu> <received_bytes> <tos_received>"
//
// The probe payloads are not RoCE: their first byte, 'U' (0x55), is an opcode of the
// reserved RD range, so a uroce device that gets one counts drop_unknown_opcode.
// First a small probe (reachability), then one as large as the largest RoCE packet at the
// local active_mtu (a WRITE FIRST: BTH + RETH + payload + ICRC): answered small but not large
// means something on the path has a smaller MTU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/doctor_checks.hpp"

namespace uroce::cli {

struct ProbeReply {
  uint32_t netdev_mtu = 0;
  uint32_t active_mtu = 0;
  uint32_t received_bytes = 0;
  uint8_t tos = 0;
};

inline constexpr uint8_t kProbeTos = 0x6a;

// Sends one probe of `bytes` UDP payload bytes and waits for its reply (tries times).
// nullopt: no reply; *local_error set when the kernel refused to send it (EMSGSIZE: larger
// than the local interface MTU).
[[nodiscard]] std::optional<ProbeReply> send_probe(const std::string& peer, uint16_t port,
                                                   size_t bytes, uint32_t netdev_mtu,
                                                   uint32_t active_mtu, int tries, int timeout_ms,
                                                   std::string* local_error);

// The peer checks: udp_reachability, mtu_path, mtu_peer, tos.
[[nodiscard]] std::vector<CheckResult> run_peer_checks(const std::string& peer, uint16_t port,
                                                       const std::optional<Route>& route);

// `uroce doctor --listen`: answer probes on `bind_address`:`port` until `max_replies`
// replies were sent (0: forever) or `timeout_s` seconds pass with none (0: forever).
// Returns 0, or 2 when the port cannot be bound (message on stderr).
int run_probe_listener(const std::string& bind_address, uint16_t port, unsigned max_replies,
                       double timeout_s);

}  // namespace uroce::cli
