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
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace uroce::net {

class AfPacketPort {
 public:
  static constexpr uint32_t kVnetHeaderBytes = 10;  // sizeof(struct virtio_net_hdr)
  static constexpr int kMaxBurst = 64;

  // Opens and binds the socket to `ifname` (needs CAP_NET_RAW); nullptr and a one-line
  // `error` otherwise. `rcvbuf_bytes`: the socket's receive buffer (forced when privileged).
  static std::unique_ptr<AfPacketPort> open(const std::string& ifname, int rcvbuf_bytes,
                                            std::string& error);
  ~AfPacketPort();
  AfPacketPort(const AfPacketPort&) = delete;
  AfPacketPort& operator=(const AfPacketPort&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const std::string& name() const { return name_; }

  // Reads up to n <= kMaxBurst frames without blocking into bufs[i] (each buf_size bytes);
  // lens[i] = header + frame bytes. A frame longer than the buffer is discarded and counted
  // (truncated()). Returns the number read (0 when none is waiting).
  int rx_burst(uint8_t* const* bufs, uint32_t buf_size, uint32_t* lens, int n);
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
  std::vector<iovec> iovs_;
};

}  // namespace uroce::net
