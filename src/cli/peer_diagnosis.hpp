// What `uroce perf` and `uroce pingpong` say when the peer cannot be reached or stops
// answering, so a failure names its cause instead of "the peer is gone or packets are lost":
//
//   gid_family_mismatch   at connect time: our GID and the peer's are of different IP
//                         families (an IPv6 GID toward an IPv4 peer never gets through)
//   clamp_path_mtu        -m larger than the active MTU: use the smaller one, as perftest
//   stall_reason          no completion for a while: the telemetry's explanation of the
//                         stalled QP (telemetry/explain.hpp explain_stall), or, when our
//                         sends were all acknowledged, why the peer's messages may not come
//   connect_error_text    a TCP side channel that cannot connect, with its cause
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/verbs_setup.hpp"
#include "device/device.hpp"

namespace uroce::cli {

// Empty when `mine` (our GID choice) and `theirs` are of the same family; otherwise one
// line naming both addresses and the GID index to use instead (-g / -x).
[[nodiscard]] std::string gid_family_mismatch(const device::Device& dev, const GidChoice& mine,
                                              const device::Gid& theirs);

// min(requested, active MTU of `port`, peer_active when known). Sets *note (for stderr)
// when that is smaller than `requested`.
[[nodiscard]] uint32_t clamp_path_mtu(const device::Device& dev, uint8_t port, uint32_t requested,
                                      std::optional<uint32_t> peer_active, std::string* note);

// The active MTU of `port` in bytes (1024 if the port is unknown).
[[nodiscard]] uint32_t port_active_mtu(const device::Device& dev, uint8_t port);

// Why QP `qpn` got nothing for a while. `sends_outstanding`: our requests are unanswered
// (the telemetry's diagnosis); otherwise we wait for a message of the peer.
[[nodiscard]] std::string stall_reason(const device::Device& dev, uint32_t qpn,
                                       const device::Gid& peer, bool sends_outstanding,
                                       uint32_t path_mtu);

// "connection refused by HOST:PORT: is the server running?" and the like for errno `err`.
[[nodiscard]] std::string connect_error_text(const std::string& host, uint16_t port, int err);

}  // namespace uroce::cli
