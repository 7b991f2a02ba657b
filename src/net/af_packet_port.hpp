// A raw Ethernet port for the user-space forwarder `uroce switch`: an AF_PACKET socket bound
// to one interface (all protocols), read and written in batches with recvmmsg/sendmmsg.
//
// Each frame travels with the kernel's virtio_net_hdr in front of it (PACKET_VNET_HDR):
// frames sent by a local socket over a veth usually carry a partial checksum (checksum
// offload: the UDP/TCP checksum field holds only the pseudo-header sum). Passing the header
// back on send keeps the kernel finishing the checksum, as a bridge would; without it the
// forwarded packets would arrive with bad checksums. Sends bypass the qdisc
// (PACKET_QDISC_BYPASS): the forwarder does its own queueing. Our own transmissions are not
// read back (PACKET_IGNORE_OUTGOING).
//
// Buffers belong to the caller: a frame buffer is kVnetHeaderBytes of header followed by the
// Ethernet frame. No allocation after open().
//
// Frames longer than the caller's buffer exist: the kernel hands a TCP or UDP segment it has
// not cut yet (GSO, up to 64 KiB, described by the vnet header) to a packet socket whole, as on
// a veth whose sender has TSO or UDP_SEGMENT. They spill into a per-message area of the port's
// own and are offered through oversized() instead of being lost (with oversized_after() to keep
// the arrival order); sent back with their vnet header, the kernel segments them on the egress.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace uroce::net {

class AfPacketPort {
 public:
  static constexpr uint32_t kVnetHeaderBytes = 10;  // sizeof(struct virtio_net_hdr)
  static constexpr int kMaxBurst = 64;
  // The largest frame rx_burst keeps (vnet header included): a GSO super-frame of 64 KiB
  // with its headers.
  static constexpr uint32_t kMaxFrameBytes = 65536 + 256;

  // Opens and binds the socket to `ifname` (needs CAP_NET_RAW); nullptr and a one-line
  // `error` otherwise. `rcvbuf_bytes`: the socket's receive buffer (forced when privileged).
  static std::unique_ptr<AfPacketPort> open(const std::string& ifname, int rcvbuf_bytes,
                                            std::string& error);
  ~AfPacketPort();
  AfPacketPort(const AfPacketPort&) = delete;
  AfPacketPort& operator=(const AfPacketPort&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const std::string& name() const { return name_; }
  // The interface's MTU (IP bytes) as the kernel reports it now; 0 if it cannot be read.
  [[nodiscard]] uint32_t mtu() const;

  // Reads up to n <= kMaxBurst frames without blocking into bufs[i] (each buf_size bytes);
  // lens[i] = header + frame bytes. A frame longer than buf_size (< kMaxFrameBytes) is not
  // among them but in oversized(0 .. oversized_count()), valid until the next rx_burst; one
  // longer than kMaxFrameBytes is discarded and counted (truncated()). Returns the number of
  // frames in bufs (0 when none is waiting).
  int rx_burst(uint8_t* const* bufs, uint32_t buf_size, uint32_t* lens, int n);
  [[nodiscard]] int oversized_count() const { return oversized_count_; }
  // Header + frame, contiguous.
  [[nodiscard]] std::span<uint8_t> oversized(int i) {
    const Spill& sp = oversized_[static_cast<size_t>(i)];
    return {spill_.data() + size_t{sp.index} * kMaxFrameBytes, sp.len};
  }
  // How many of the burst's frames in bufs arrived before oversized(i): the arrival order.
  [[nodiscard]] int oversized_after(int i) const {
    return static_cast<int>(oversized_[static_cast<size_t>(i)].kept_before);
  }
  // Sends n <= kMaxBurst frames (header + frame, as read); returns n. A frame the kernel
  // refuses is dropped and counted (tx_errors()).
  int tx_burst(uint8_t* const* bufs, const uint32_t* lens, int n);

  // Frames the kernel dropped because our socket's receive buffer was full
  // (PACKET_STATISTICS tp_drops, accumulated across reads).
  [[nodiscard]] uint64_t kernel_drops();
  [[nodiscard]] uint64_t truncated() const { return truncated_; }
  [[nodiscard]] uint64_t tx_errors() const { return tx_errors_; }

 private:
  AfPacketPort(int fd, int ifindex, std::string name);

  int fd_ = -1;
  int ifindex_ = 0;
  std::string name_;
  uint64_t kernel_drops_ = 0;
  uint64_t truncated_ = 0;
  uint64_t tx_errors_ = 0;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;  // two per message: the caller's buffer, then the spill area
  struct Spill {
    uint32_t index = 0;  // message of the burst, so its area in spill_
    uint32_t len = 0;
    uint32_t kept_before = 0;  // frames kept in the caller's buffers before this one
  };
  std::vector<uint8_t> spill_;  // kMaxBurst areas of kMaxFrameBytes
  std::vector<Spill> oversized_;
  int oversized_count_ = 0;
};

}  // namespace uroce::net
