// What to tell a program that asked for a GID index past the end of a port's table.
#pragma once

#include <cstdint>
#include <string>

#include "device/device.hpp"

namespace uroce::ibverbs {

// "GID index 7 does not exist on uroce_eth0 port 1 (its GIDs: 0 = fe80::..., 1 = 10.0.0.1);
// RoCE v2 over IPv4 is index 1 (...)"; "" for a port the device does not have.
[[nodiscard]] std::string missing_gid_text(const device::Device& dev, uint8_t port_num,
                                           uint32_t index);
// missing_gid_text on stderr as a "uroce: " line, once per process (UROCE_QUIET=1: never).
void explain_missing_gid(const device::Device& dev, uint8_t port_num, uint32_t index);

}  // namespace uroce::ibverbs
