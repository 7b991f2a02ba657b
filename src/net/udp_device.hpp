// The software RDMA device on real UDP: UdpPacketIo adapts UdpPorts to the device's burst
// I/O interface, and open_udp_device() assembles a whole device::Device from the host.
//
//   auto dev = open_udp_device({.name = "uroce_lo", .bind = {127.0.0.1}, .udp_port = 4791});
//   if (!dev) std::cerr << dev.error().message;    // one line a user can act on
//
// open_udp_device discovers the host's devices (one per netdev, netdev.hpp), picks the one
// named, builds its rxe-style GID table, binds one UdpPort per local address (a GID's
// address) and hands the device the ports' common QPN range. One socket per address is what makes
// "the GID index decides the source address" work: a UDP socket bound to an address sends from it,
// with no IP_PKTINFO juggling, and each such socket joins that address's reuseport group with the
// same QPN slot so datagrams for this device's QPNs are steered to it on every address.
//
// UDP port other than 4791 (tests, side-by-side runs): the engine always builds and checks
// ICRCs for destination port 4791 (docs/wire-facts.md: the UDP ports are not masked). The adapter
// sends to the configured port and presents received datagrams as sent to 4791, so two uroce
// devices on the same non-standard port agree; on 4791 nothing is translated.
#pragma once

#include <poll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/host_options.hpp"
#include "device/device.hpp"
#include "device/packet_io.hpp"
#include "net/cc_env.hpp"
#include "net/ip_addr.hpp"
#include "net/netdev.hpp"
#include "net/result.hpp"
#include "net/rx_ring.hpp"
#include "net/udp_port.hpp"

namespace uroce::net {

class UdpPacketIo final : public device::PacketIo {
 public:
  // `ports` all own the same QPN slot (or none share); `udp_port` is their bound port.
  // `path_log`: where the ports record ICMP errors (null: none kept).
  // `ring`: receive the data datagrams from it (UROCE_RX_RING, rx_ring.hpp); the ports have
  // handed them over already (UdpPort::hand_data_to_ring).
  UdpPacketIo(std::vector<std::unique_ptr<UdpPort>> ports, uint16_t udp_port,
              std::shared_ptr<PathErrorLog> path_log = nullptr,
              std::unique_ptr<RxRing> ring = nullptr);
  ~UdpPacketIo() override;

  size_t rx_burst(std::span<device::RxPacket> out) override;
  size_t tx_burst(std::span<const transport::TxSlot> pkts) override;
  [[nodiscard]] bool takes_payload_by_reference() const override { return true; }
  void maintain() override;  // repairs each shared port's reuseport group
  bool wait(Nanos timeout, bool want_write) override;
  void wake() override;
  // On every port (address) of the device; a listen refused on one address is undone on the
  // others and its errno returned.
  int cm_capable(bool on) override;
  int cm_listen(uint64_t service_id, bool on) override;
  [[nodiscard]] bool can_send_from(const device::Gid& source) const override;
  [[nodiscard]] device::PathReport path_report(const device::Gid& peer) const override;
  [[nodiscard]] device::IoCounters io_counters() const override;

  [[nodiscard]] const std::vector<std::unique_ptr<UdpPort>>& ports() const { return ports_; }
  [[nodiscard]] const RxRing* ring() const { return ring_.get(); }

 private:
  UdpPort* port_for(const std::array<uint8_t, 16>& src) const;
  // recv_burst on port `idx` into `out`, filling each RxPacket from its datagram.
  size_t read_port(size_t idx, std::span<device::RxPacket> out);
  // One recv_burst of port `idx` (at most `max_messages` receive messages).
  size_t read_port_once(size_t idx, std::span<device::RxPacket> out, size_t max_messages);
  // The ring stopped at a marker: reads its message from the port of its address into
  // out[total..) and passes the marker; false when the message is not there yet.
  bool pass_ring_marker(std::span<device::RxPacket> out, size_t& total);
  // Every port that has something (one ppoll first when there are several); sets
  // *quiet_delivered when one other than rx_hot_port_ delivered.
  size_t read_all_ports(std::span<device::RxPacket> out, bool* quiet_delivered);
  // The receive ring's datagrams, in place.
  size_t read_ring(std::span<device::RxPacket> out);
  // rx_burst with a ring: the ring on every pass, the sockets while they deliver or when a
  // quiet look is due.
  size_t rx_burst_ring(std::span<device::RxPacket> out);
  // After an overflow of the ring: it takes nothing more and the sockets keep every
  // datagram again; once it is read to its end (finish_ring), only the sockets are read.
  void give_back_ring();
  void finish_ring();
  // RxPacket metadata of datagram `d` (the port number presented as 4791).
  void fill_meta(const RxDatagram& d, device::RxPacket& p) const;
  // cm_listen's `on`: all ports or none; 0 or the errno of the port that refused.
  int listen_everywhere(uint64_t service_id);
  // After anything that may leave datagrams in a port and on no socket (a receive pass's
  // GRO rest, a shared port's repair): notes it, and wakes a thread asleep in wait() if so.
  void wake_if_pending();

  std::vector<std::unique_ptr<UdpPort>> ports_;
  uint16_t udp_port_;
  std::shared_ptr<PathErrorLog> path_log_;
  std::unique_ptr<RxRing> ring_;
  // The ring is read (rx_burst_ring) until it overflows; then it takes nothing more
  // (RxRing::stopped), is read to its end, and the sockets carry everything (give_back_ring,
  // finish_ring). Read by wait() and io_counters() outside the I/O lock, hence atomic. The
  // ring object stays, for its counters.
  std::atomic<bool> ring_in_use_{false};
  bool rx_sockets_hot_ = false;  // ring mode: the sockets delivered at the last look
  // Ring mode: markers passed per port (each stands for one of the port's
  // rx_ring_large_messages), and since when the current one waits for its message.
  std::vector<uint64_t> ring_markers_passed_;
  std::vector<uint8_t> port_read_in_pass_;  // ring mode: read_port ran on it in this pass
  std::chrono::steady_clock::time_point ring_marker_wait_since_{};
  static constexpr Nanos kRingMarkerPatience = std::chrono::milliseconds(1);
  int wake_fd_ = -1;
  size_t next_rx_port_ = 0;      // round-robin start, so one busy address cannot starve another
  std::vector<pollfd> rx_poll_;  // rx_burst's readiness check, one entry per port
  // With several ports, rx_burst reads the one that delivered most in the last full look
  // (rx_hot_port_) and looks at all only every kFullRxEvery passes, or after wait() saw one
  // readable (rx_full_check_: set by the progress thread's wait, outside io_mu_). While the
  // full looks find nothing on the other ports, they also wait for rx_quiet_interval_ to
  // pass since the last one: it doubles from kQuietLookFirst to kQuietLookMost with each
  // such look, and drops to zero when another port delivers.
  static constexpr uint32_t kFullRxEvery = 4;
  static constexpr Nanos kQuietLookFirst = std::chrono::microseconds(4);
  static constexpr Nanos kQuietLookMost = std::chrono::microseconds(100);
  [[nodiscard]] bool full_look_due();
  void note_full_look(bool quiet_delivered);
  size_t rx_hot_port_ = SIZE_MAX;
  uint32_t rx_hot_passes_ = 0;
  Nanos rx_quiet_interval_{0};
  std::chrono::steady_clock::time_point rx_last_full_look_{};
  std::atomic<bool> rx_full_check_{false};
  // A receive pass left GRO datagrams in a port (no socket shows them to a poll), and a
  // thread is in wait(): each checks the other's flag after setting its own, so that either
  // wait() returns at once or the pass wakes it. A pass run by the waiting thread itself
  // (the usual case) then costs no eventfd write.
  std::atomic<bool> rx_pending_{false};
  std::atomic<bool> in_wait_{false};
  // The scratch arrays last: every field above is read by each pass, an empty busy poll's
  // included, and between them they would put those fields pages apart (a page walk each
  // after a system call on this VM).
  std::array<RxDatagram, UdpPort::kMaxBurst> rx_scratch_{};
  std::array<TxDatagram, UdpPort::kMaxBurst> tx_scratch_{};
};

struct UdpDeviceOptions {
  // "uroce_<netdev>"; empty or "uroce0" (deprecated alias): the first device in list order,
  // or, when `bind` is given and the name empty, the device of the first bind address.
  std::string name;
  std::vector<std::string> netdevs;  // only these netdevs get devices; empty: every one up
  // Addresses to bind. Empty: every GID address of the chosen netdevs that can be bound
  // (an address the kernel refuses with EADDRNOTAVAIL, like a tentative IPv6 one or a
  // default GID without that link-local address, is left out and its GID gets
  // EADDRNOTAVAIL on use). Given: each must bind, or open fails.
  std::vector<IpAddr> bind;
  uint16_t udp_port = kRoceV2Port;
  uint32_t active_mtu = 0;   // bytes (256 .. 4096); 0: from the netdev MTU, as rxe
  bool share = true;         // share each address's port with other processes (reuseport)
  int slot = kAnySlot;       // QPN slot when sharing
  std::string registry_dir;  // reuseport registry directory; empty: the per-user default
  bool per_qp_source_port = true;
  bool gso = true;  // UDP GSO on send (UdpPortConfig::gso); UROCE_GSO overrides
  bool gro = true;  // UDP GRO on receive (UdpPortConfig::gro); UROCE_GRO overrides
  // Data datagrams from a packet socket's ring instead of the UDP sockets (rx_ring.hpp;
  // needs CAP_NET_RAW); UROCE_RX_RING overrides.
  bool rx_ring = false;
  uint64_t seed = 0;  // lkey/rkey random bits; 0: from the clock and pid
  transport::DeviceLimits limits;
  device::ProgressOptions progress;
  // A command line's --cc/--dcqcn, applied after UROCE_CC/UROCE_DCQCN (cc_env.hpp).
  CcOverride cc;
};

[[nodiscard]] NetResult<std::unique_ptr<device::Device>> open_udp_device(
    const UdpDeviceOptions& options);

// The devices open_udp_device chooses from, in list order, without binding anything: for
// listing devices. `netdevs` restricts the set (UROCE_NETDEVS).
[[nodiscard]] NetResult<std::vector<HostDevice>> discover_host_devices(
    const std::vector<std::string>& netdevs);

// Applies the environment's device options (UROCE_UDP_PORT, UROCE_NETDEVS, UROCE_DEVICE_ADDR,
// UROCE_MTU, UROCE_SPIN_US, UROCE_PROGRESS_CPUS, ...) to `options`; false with `error` set
// when one is malformed.
[[nodiscard]] bool apply_env_options(const config::HostOptions& env, UdpDeviceOptions& options,
                                     std::string& error);

// "" if the progress thread may run on every CPU of `cpus` (ProgressOptions::cpus), else the
// one-line error open_udp_device fails with: for a program that wants that verdict before
// it opens its device.
[[nodiscard]] std::string check_progress_cpus(const std::vector<int>& cpus);

}  // namespace uroce::net
