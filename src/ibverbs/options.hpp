// Environment options of the libibverbs shim. ibverbs has no way to pass options to a
// provider, so an unmodified program is steered by its environment:
//
//   UROCE_PORT         UDP port (default 4791); peers must use the same one
//   UROCE_NETDEVS      comma-separated netdevs making up uroce0's ports (default: every one
//                      that is up with an address, lo first)
//   UROCE_DEVICE_ADDR  comma-separated local addresses to bind (default: every GID address)
//   UROCE_MTU          active MTU in bytes: 256 .. 4096 (default: netdev MTU - 80, as rxe)
//   UROCE_SPIN_US      how long the progress thread busy-polls after its last work before
//                      sleeping (default: the device's, 30 us)
//   UROCE_PEER         the peer address for address vectors without a GRH (programs written
//                      for InfiniBand LIDs, like qperf); unset: such AVs fail with EINVAL
//   UROCE_QUIET        set to 1: no "uroce: ..." line on stderr when opening fails
#pragma once

#include <string>

#include "net/udp_device.hpp"

namespace uroce::ibverbs {

// Reads the environment. Returns false with `error` set when a variable is malformed.
bool options_from_env(net::UdpDeviceOptions& options, std::string& error);

// Prints "uroce: <message>" on stderr unless UROCE_QUIET=1: ibverbs only has errno to
// report failures, and an errno alone does not say which variable or netdev is wrong.
void report(const std::string& message);

}  // namespace uroce::ibverbs
