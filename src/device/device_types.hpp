// DeviceConfig: what a driver (src/net/udp_device) hands the Device: its ports (PortInfo, the
// GID table), the engine's configuration and the progress options. The attribute structs
// (DeviceAttr, PortAttr, ...) are the public vocabulary: include/uroce/vocab/device_types.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/engine.hpp"
#include "uroce/vocab/device_types.hpp"

namespace uroce::device {

class DeviceObserver;  // device/observer.hpp

// One GID table entry; an all-zero GID is an empty entry (ENODATA on use, as in Linux).
struct GidTableEntry {
  Gid gid{};
  std::string netdev;
  [[nodiscard]] bool empty() const { return gid == Gid{}; }
};

// What the driver knows of one port (one netdev).
struct PortInfo {
  uint8_t port_num = 1;
  std::string netdev;
  uint32_t netdev_mtu = 1500;
  transport::Mtu active_mtu = transport::Mtu::k1024;  // netdev MTU - 80, rounded down (rxe)
  PortState state = PortState::kActive;
  int64_t speed_mbps = -1;  // -1: unknown
  std::vector<GidTableEntry> gids;
};

struct DeviceConfig {
  std::string name = "uroce_mem";  // open_udp_device names its devices uroce_<netdev>
  uint64_t node_guid = 0;
  std::vector<PortInfo> ports;  // port_num 1, 2, ...
  transport::EngineConfig engine;
  ProgressOptions progress;
  // Telemetry's view of the device (device/observer.hpp); null: none.
  std::shared_ptr<DeviceObserver> observer;
};

// The node GUID from a MAC: the modified EUI-64 (universal/local bit flipped, ff:fe in the
// middle), as rxe's addrconf_addr_eui48; returned as the 8 bytes read big-endian.
[[nodiscard]] uint64_t node_guid_from_mac(const std::array<uint8_t, 6>& mac);

}  // namespace uroce::device
