// What `uroce pingpong` and `uroce perf` share on the RDMA side: opening the UDP device by
// name, picking the GID (so the source address) to use, a page-aligned registered buffer,
// and the connection attributes rdma-core's examples and perftest use. The QP transitions
// and address vectors themselves are the public API's (uroce/connect.hpp), so the commands
// exercise the code applications use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/pingpong_dest.hpp"
#include "device/device.hpp"
#include "net/cc_env.hpp"
#include "net/ip_addr.hpp"
#include "net/netdev.hpp"
#include "uroce/connect.hpp"
#include "uroce/verbs.hpp"

namespace uroce::cli {

// QKEY of rdma-core's ud_pingpong, also used by `uroce perf -c UD`.
inline constexpr uint32_t kPingpongQkey = 0x11111111;

// For commands that wait for a peer (a TCP side channel) before they open their device:
// what can fail without the peer fails first. The environment's device options
// (docs/configuration.md) are checked as open_cli_device would check them, and a named
// device (`name` not empty) is opened into `dev`, so a wrong name or variable is named at
// once rather than after the wait; without a name, the device is the one the peer reaches
// us on, opened once it connects. A GID index (`gid_index` >= 0, -g/-x) is checked on the
// named device, else on the device of this host's route to `host` (a client), else (a
// server, `host` empty) against every device. "" or the error.
[[nodiscard]] std::string open_before_side_channel(const std::string& name, std::optional<int> port,
                                                   int gid_index, const std::string& host,
                                                   const net::CcOverride& cc,
                                                   std::unique_ptr<device::Device>& dev);

// Opens the device `name` ("uroce_<netdev>"; "uroce0" is a deprecated alias of the first).
// Without a name: the device one of whose GIDs is `reach_via` (the local address of the TCP
// side channel, which is the address the peer reaches us on), else the first device in list
// order. The environment applies as in the drop-in (UROCE_UDP_PORT, UROCE_NETDEVS, UROCE_MTU,
// ...; docs/configuration.md). An unknown name fails with a line naming the devices there are.
// `cc`: the command line's --cc/--dcqcn, which win over UROCE_CC/UROCE_DCQCN.
[[nodiscard]] std::unique_ptr<device::Device> open_cli_device(
    const std::string& name, const std::optional<net::IpAddr>& reach_via, std::string& error,
    const net::CcOverride& cc = {});

// The devices the CLI lists (`uroce gids`): the environment's UROCE_NETDEVS unless `netdevs`
// is given; nullopt with `error` set when the environment is malformed or no device is up.
[[nodiscard]] std::optional<std::vector<net::HostDevice>> cli_host_devices(
    const std::vector<std::string>& netdevs, std::string& error);

struct GidChoice {
  uint8_t port = 1;
  uint32_t index = 0;
  device::Gid gid{};
};

// gid_index >= 0: that entry of `port` (error if empty or beyond the table). Otherwise the
// entry whose address is `reach_via` (the local address of the TCP side channel, which is
// the address the peer reaches us on) on any port, preferring `port`.
[[nodiscard]] std::optional<GidChoice> choose_gid(const device::Device& dev,
                                                  std::optional<int> port, int gid_index,
                                                  const net::IpAddr& reach_via, std::string& error);

// Zeroed, page-aligned memory registered with `access` for the lifetime of the object.
class RegisteredBuffer {
 public:
  static std::unique_ptr<RegisteredBuffer> create(ProtectionDomain& pd, size_t bytes,
                                                  uint32_t access, std::string& error);

  [[nodiscard]] uint8_t* data() const { return data_.get(); }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] uint64_t addr() const { return reinterpret_cast<uint64_t>(data_.get()); }
  [[nodiscard]] const MemoryRegion& mr() const { return mr_; }
  [[nodiscard]] std::span<uint8_t> span(size_t offset, size_t length) const {
    return {data_.get() + offset, length};
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  RegisteredBuffer(std::unique_ptr<uint8_t, Free> data, size_t size, MemoryRegion mr)
      : data_(std::move(data)), size_(size), mr_(std::move(mr)) {}
  // The memory is declared before the MR so the MR is deregistered before it is freed.
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
  MemoryRegion mr_;
};

// The attributes both commands connect with, from our GID `gid` (port, source GID index):
// RC/UC `access` at INIT, UD kPingpongQkey, and rdma-core's pp_connect_ctx timers (timeout
// 14, 7 retries, infinite RNR retries, RNR timer 12). Each command adds its path MTU,
// READ/atomic depth, service level, traffic class and loss recovery.
[[nodiscard]] ConnectOptions cli_connect_options(const GidChoice& gid, uint32_t access);

// The largest UD message the device sends: the smallest active MTU of its ports (the device
// has one engine-wide UD MTU, so lo's 4096 does not help while eth0 carries 1024).
[[nodiscard]] uint32_t ud_max_message(const device::Device& dev);
inline constexpr uint32_t kLargestUdMessage = 4096;  // the largest IB MTU: any device's bound

// Random 24-bit PSN like lrand48() & 0xffffff in the examples.
[[nodiscard]] uint32_t random_psn();

// IB MTU enum from bytes (0 -> nullopt).
[[nodiscard]] std::optional<transport::Mtu> mtu_from_bytes(uint32_t bytes);

}  // namespace uroce::cli
