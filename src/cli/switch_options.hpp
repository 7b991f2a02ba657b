// Values of `uroce switch`'s options, parsed strictly: a bad value gives one line naming the
// option, the value and what is accepted.
//
//   rates, sizes  fabric::parse_rate, fabric::parse_size (src/fabric/units.hpp: like tc,
//                 shared with UROCE_IMPAIR's bottleneck)
//   --ecn  kmin=SIZE,kmax=SIZE,pmax=P[,at=enqueue|dequeue]   (0 < P <= 1)
//   --pfc  xoff=SIZE,xon=SIZE[,headroom=SIZE]   thresholds
//          PRIO[,PRIO]                          lossless priorities (0..7); both may be mixed
//                                               in one value: 3,4,xoff=64KB,xon=32KB
//   --prio-map DSCP=PRIO[,DSCP=PRIO]            DSCP 0..63 to priority 0..7, over the default
//                                               map priority = DSCP >> 3 (mlx5's default
//                                               dscp2prio: DSCP 26 -> 3, CNP DSCP 48 -> 6)
//   --dwrr W0,W1,...                            one DWRR weight per priority, 1..1000
//   --strict PRIO[,PRIO]                        strict priorities (0..7)
//   --roce-port PORT[-PORT][,...]               UDP ports of the RoCE traffic (1..65535)
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fabric/switch_queue.hpp"
#include "fabric/units.hpp"

namespace uroce::cli {

using fabric::parse_rate;  // bytes/s; 0 = unlimited
using fabric::parse_size;
// Fills red (enabled) from "kmin=..,kmax=..,pmax=..[,at=..]".
[[nodiscard]] bool parse_ecn(std::string_view text, fabric::RedParams& red, std::string& error);
[[nodiscard]] bool parse_pfc(std::string_view text, fabric::PfcParams& pfc, std::string& error);

// A bit per priority 0..7.
using PriorityMask = uint8_t;

// One --pfc value: its PRIO pieces go into `lossless` (added to what is there), its
// key=value pieces (if any) are parsed by parse_pfc into `pfc` and set `thresholds`.
[[nodiscard]] bool parse_pfc_arg(std::string_view text, fabric::PfcParams& pfc, bool& thresholds,
                                 PriorityMask& lossless, std::string& error);

// "PRIO[,PRIO]" for `option` (e.g. "--strict"), each 0..7, into `mask`.
[[nodiscard]] bool parse_priorities(std::string_view text, std::string_view option,
                                    PriorityMask& mask, std::string& error);

using DscpMap = std::array<uint8_t, 64>;
// priority = DSCP >> 3 for every DSCP.
[[nodiscard]] DscpMap default_dscp_map();
// "DSCP=PRIO[,DSCP=PRIO]" over `map` (which keeps its other entries).
[[nodiscard]] bool parse_prio_map(std::string_view text, DscpMap& map, std::string& error);

struct DwrrWeights {
  std::array<uint32_t, fabric::kMaxPriorities> weight{};
  uint32_t count = 0;
};
// "W0,W1,...": up to 8 weights, each 1..1000.
[[nodiscard]] bool parse_dwrr(std::string_view text, DwrrWeights& w, std::string& error);

// A bit per UDP port.
using UdpPortSet = std::bitset<65536>;
// "PORT[-PORT][,PORT[-PORT]...]" for `option` (e.g. "--roce-port"), each 1..65535, into `ports`
// (added to what is there).
[[nodiscard]] bool parse_udp_ports(std::string_view text, std::string_view option,
                                   UdpPortSet& ports, std::string& error);

}  // namespace uroce::cli
