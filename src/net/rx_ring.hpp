// RxRing: receives a device's RoCE data datagrams from a packet socket's memory-mapped ring
// (AF_PACKET, TPACKET_V2) instead of from its UDP sockets: UROCE_RX_RING=1, needs CAP_NET_RAW.
//
// Why: on a VM every system call costs a microsecond or more, and a busy-polling receiver
// that asks its UDP socket with recvmmsg pays one per poll, full or empty, plus the one that
// returns the packet. The kernel writes a ring frame while it delivers the packet (in the
// sender's system call, on loopback or a veth), and a poll of the ring is a memory read: a
// ping-pong saves a system call per hop (docs/performance.md "A receive ring").
//
// What the ring takes is decided by a classic-BPF filter on the packet socket: IPv4 (not a
// fragment, any options) or IPv6 (UDP right after the fixed header) to one of the device's
// addresses and its UDP port, at most kMaxUdpLength bytes of UDP, whose BTH names a QP that
// is not QP1 and not the multicast QPN, and, when the port is shared with other processes,
// lies in this process's QPN slot. Everything else (CM MADs on QP1, the reuseport group's
// probes, runts, larger GSO messages) still arrives on the UDP sockets, whose own filter
// (socket_drop_filter) drops exactly what the ring takes, so that nothing arrives twice.
//
// Consequences a user sees: the kernel counts each datagram the sockets' filters drop as a
// UDP receive error (`netstat -su` "receive errors", InErrors) and in the sockets' drop
// count, so uroce reports the ring's own drops as rx_discards instead; a datagram the filter
// cannot read (an IPv6 extension header, an IP fragment) to a QP of the ring is lost, as
// RoCE v2 sends neither. The ring sees packets before netfilter's PREROUTING: a firewall
// rule that drops UDP 4791 on the input path no longer stops them (a RoCE NIC does not
// consult the host's firewall either).
//
// Frames hold one datagram, or one UDP GSO message whose datagrams the virtio-net header
// describes (gso_size); read() hands datagrams out in place, valid until release().
//
// A GSO message larger than a frame (a bulk transfer's 64 KiB) stays on its socket, but the
// filter still takes its first bytes into the ring as a marker: read() stops there until
// the caller has read that message from the socket (pass_marker()), so that a QP's packets
// are handed to the engine in the order they arrived, whichever way each came.
// Not thread-safe except rx_discards(): one thread reads the ring (the device's I/O lock).
#pragma once

#include <linux/filter.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "net/ip_addr.hpp"
#include "net/result.hpp"
#include "net/udp_port.hpp"

namespace uroce::net {

struct RxRingConfig {
  uint16_t port = kRoceV2Port;   // UDP destination port
  std::vector<IpAddr> addrs;     // the device's bound addresses (IPv4 and IPv6)
  std::optional<uint32_t> slot;  // a shared port: only this QPN slot's datagrams
  // The interfaces whose packets the ring takes: the device's netdev and `lo` (what this host
  // sends itself crosses it). Not every interface: a packet received on a bridge port, a bond
  // slave or a VLAN's lower device passes the packet taps once there and once more on the
  // upper device, and would arrive twice. A datagram to our address that comes in on another
  // interface (asymmetric routing) stays on the sockets. Empty: every interface (tests).
  std::vector<int> ifindexes;
};

struct RxRingCounters {
  uint64_t frames = 0;           // ring frames read
  uint64_t datagrams = 0;        // datagrams handed out
  uint64_t gso_frames = 0;       // frames holding a GSO message of more than one datagram
  uint64_t malformed = 0;        // frames whose headers did not parse (dropped)
  uint64_t markers = 0;          // markers of messages read from a socket (passed)
  uint64_t marker_timeouts = 0;  // markers passed without their message (it was dropped)
};

class RxRing {
 public:
  // A frame is two pages; what it holds after its headers bounds the datagrams taken.
  static constexpr uint32_t kFrameBytes = 8192;
  // 16 MiB of ring, 2048 datagrams (GSO messages larger than a frame stay in the UDP
  // sockets, whose buffers hold every RC QP's window): a progress thread that stays parked
  // while the application does not poll must not lose a burst.
  static constexpr uint32_t kFrames = 2048;
  // UDP length (header + payload) of the largest datagram or GSO message the ring takes:
  // a frame less its TPACKET, address, virtio-net, link (up to 32) and IP (up to 60) headers.
  // A larger one leaves a marker of kMarkerBytes (link header onwards).
  static constexpr uint32_t kMaxUdpLength = kFrameBytes - 256;
  static constexpr uint32_t kMarkerBytes = 160;
  static constexpr int kMaxAddresses = 16;  // per family, so that the filter's jumps fit
  static constexpr int kMaxInterfaces = 16;

  // Needs CAP_NET_RAW, and a kernel that writes UDP GSO messages into a ring (checked with a
  // GSO message to a port of its own on loopback); otherwise a one-line error naming the fix.
  // `frames`: the ring's size (kFrames; the check uses a small one).
  [[nodiscard]] static NetResult<std::unique_ptr<RxRing>> open(const RxRingConfig& config,
                                                               uint32_t frames = kFrames);
  ~RxRing();
  RxRing(const RxRing&) = delete;
  RxRing& operator=(const RxRing&) = delete;

  // Hands out up to out.size() datagrams in place (RxDatagram::in_port; ip_id_known for
  // IPv4, segment k of a GSO message having the header's ID + k): valid until release().
  size_t read(std::span<RxDatagram> out);
  // Returns the frames read so far to the kernel (a GSO message handed out in part stays).
  void release();
  // A GSO message was handed out only in part: the rest is in no frame a poll would show.
  [[nodiscard]] bool has_pending() const { return seg_off_ != 0; }
  // read() stopped at a marker: the message it stands for is on the socket of marker_dst().
  [[nodiscard]] bool at_marker() const { return at_marker_; }
  [[nodiscard]] const wire::IpContext& marker_ip() const { return cur_meta_.ip; }
  // That message was read (or is lost: `timed_out`); read() goes on after the marker.
  void pass_marker(bool timed_out);
  // Readable (POLLIN) while a frame waits to be read.
  [[nodiscard]] int fd() const { return fd_; }
  // The kernel found no free frame for a datagram (a frame read was flagged
  // TP_STATUS_LOSING, or refresh_drops() counted a drop): the load is more than the ring
  // holds, and what it dropped the sockets' filter dropped too.
  [[nodiscard]] bool overflowed() const {
    return losing_seen_ || drops_.load(std::memory_order_relaxed) != 0;
  }
  // Takes no new datagram from now on (a filter that refuses all); what the ring holds
  // stays to be read. 0 or the errno of SO_ATTACH_FILTER; stopped() either way.
  int stop_taking();
  [[nodiscard]] bool stopped() const { return stopped_; }
  // Once stopped by a filter that took and drained(): unmaps the frames and has the kernel
  // free them (16 MiB that a device reading its sockets from then on would keep for nothing).
  // The socket and the counters stay; nothing may read the ring after this. 0, or an errno:
  // EBUSY (not stopped by a filter, or not drained) leaves the ring as it was; a failure to
  // free it in the kernel leaves it unmapped there (memory, no other cost).
  int free_frames();
  [[nodiscard]] bool frames_freed() const { return map_ == nullptr; }
  // Nothing left to read: no frame waiting, no GSO message handed out in part, no marker.
  [[nodiscard]] bool drained() const;
  // Reads the kernel's drop count (PACKET_STATISTICS: datagrams the filter took that found
  // no free frame): from the thread that reads.
  void refresh_drops();
  // Drops since open, as of the last refresh_drops(). Thread-safe.
  [[nodiscard]] uint64_t rx_discards() const { return drops_.load(std::memory_order_relaxed); }
  // counters().datagrams and .marker_timeouts for other threads. Thread-safe.
  [[nodiscard]] uint64_t datagrams_seen() const {
    return datagrams_seen_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] uint64_t marker_timeouts_seen() const {
    return marker_timeouts_seen_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] const RxRingCounters& counters() const { return counters_; }

 private:
  RxRing(int fd, uint8_t* map, uint32_t frames);
  static NetResult<std::unique_ptr<RxRing>> open_ring(const RxRingConfig& config, uint32_t frames);
  // "" when this kernel hands a UDP GSO message to a ring whole with its segment size (or
  // the check cannot run), else the error; asked once per process. Linux before 6.2 cannot
  // put UDP GSO in a virtio-net header (virtio_net_hdr_from_skb) and drops the frame, which
  // the sockets' filter drops too.
  static std::string check_gso_frames();
  [[nodiscard]] uint8_t* frame(uint32_t i) const { return map_ + size_t{i} * kFrameBytes; }
  // Parses frame `cur_` into the cur_* fields (a marker sets at_marker_); false if malformed.
  bool parse_current();
  // Moves cur_ to the next frame; the one left is held until release().
  void next_frame();

  int fd_ = -1;
  uint8_t* map_ = nullptr;
  uint32_t frames_ = 0;
  uint32_t cur_ = 0;  // next frame to read
  // Frames read since release(), the ones before cur_, which go back to the kernel then (all
  // of them when cur_ came round to the first).
  uint32_t held_ = 0;
  // The frame being handed out: its UDP payload, segment size, metadata, and how far.
  std::span<uint8_t> cur_payload_;
  size_t cur_seg_ = 0;
  RxDatagram cur_meta_;
  size_t seg_off_ = 0;
  bool at_marker_ = false;
  bool losing_seen_ = false;  // a frame came with TP_STATUS_LOSING
  bool stopped_ = false;      // stop_taking() was called
  bool refusing_ = false;     // and its filter took: the kernel puts nothing anywhere now
  RxRingCounters counters_;
  std::atomic<uint64_t> drops_{0};
  // Copies of two counters for other threads: one writer, so a plain store (no locked
  // instruction per read).
  std::atomic<uint64_t> datagrams_seen_{0};
  std::atomic<uint64_t> marker_timeouts_seen_{0};
};

// The packet socket's filter (offsets relative to the network header, so any link type);
// empty if the addresses do not fit (more than kMaxAddresses of a family).
[[nodiscard]] std::vector<sock_filter> build_ring_filter(const RxRingConfig& config);
// The UDP sockets' filter in ring mode (offset 0 = the UDP header): drops the datagrams the
// ring takes (those to `slot`, arrived on one of `ifindexes` when not empty), keeps the rest.
[[nodiscard]] std::vector<sock_filter> build_socket_drop_filter(std::optional<uint32_t> slot,
                                                                const std::vector<int>& ifindexes);
// The filters' BTH rule in C++: whether a datagram (or a GSO message, by its first
// datagram) with this UDP payload to our address and port is the ring's, whatever its size.
[[nodiscard]] bool ring_takes_payload(std::span<const uint8_t> udp_payload,
                                      std::optional<uint32_t> slot);

}  // namespace uroce::net
