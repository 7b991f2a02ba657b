// UdpPort: the UDP 4791 socket driver of one local address.
//
//   auto port = UdpPort::open({.local = *IpAddr::parse("127.0.0.1")});   // NetResult
//   port.value()->qpn_range();          // QPNs this process may hand out (EngineConfig)
//   loop:  recv_burst(rx)  -> engine.on_packet(...)
//          send_burst(tx)  <- engine.poll_tx(...)    (returns how many were consumed)
//          wait(timeout)   when idle; wake() from any thread interrupts it
//
// The socket is non-blocking, bound to one address (AF_INET for an IPv4 GID, AF_INET6
// otherwise) with large buffers, DF (IP_PMTUDISC_DO: an unconnected DF socket sends IP ID 0,
// which the ICRC needs; docs/networking.md "IP ID"), and receives TOS/traffic class, TTL/hop
// limit and the destination address of each datagram as control messages.
//
// Sharing (config.share, the default): several processes of one user bind the same
// address:port with SO_REUSEPORT; a classic-BPF program steers each datagram to the socket
// owning its destination QP's slot (reuseport_program.hpp), positions are tracked in a
// registry file (reuseport_registry.hpp), and crashed members are repaired when anyone
// joins, leaves, sees a misdelivered datagram, or runs maintain() (wait() does).
// Datagrams to QP1 (CM MADs) are steered by their content: set_cm_capable() and
// listen_service() record in the registry where they should go (docs/cm.md).
//
// UDP source ports: RoCE v2 puts per-QP entropy in the source port (0xC000-0xFFFF). A
// datagram whose sport differs from the bound port goes out of a send-only socket bound to
// that port (SO_REUSEADDR, receive filter that drops everything); if that port cannot be
// bound it goes out of the main socket and tx_sport_fallback counts it. Linux rxe does not
// look at the source port of what it receives (rxe_udp_encap_recv).
//
// Kernel drops: SO_RXQ_OVFL makes every received datagram carry the socket's drop count
// (sk_drops: datagrams the kernel discarded at this socket, almost always because its receive
// buffer was full; also UDP checksum errors) as of when it was queued; recv_burst keeps the
// growth of that count, and maintain() reads the count itself (SO_MEMINFO) so drops after
// the last datagram that got in are counted once the port goes idle. rx_discards() is the
// total since open (exported as `rx_discards`, docs/congestion.md "Counters").
//
// Not thread-safe except wake(), rx_discards(), rx_misdelivered() and rx_no_owner(): one
// progress thread drives a port.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "net/ip_addr.hpp"
#include "net/path_errors.hpp"
#include "net/result.hpp"
#include "net/reuseport_program.hpp"
#include "net/reuseport_registry.hpp"
#include "uroce/vocab/time.hpp"
#include "wire/header_layout.hpp"
#include "wire/icrc.hpp"

namespace uroce::net {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr int kAnySlot = -1;

struct UdpPortConfig {
  IpAddr local;                 // the address to bind: a GID's address
  uint32_t scope_id = 0;        // ifindex, for a link-local IPv6 address
  uint16_t port = kRoceV2Port;  // 4791; tests use other ports
  // Asked for; the kernel caps at net.core.rmem_max (SO_RCVBUFFORCE is tried when that is
  // too small) and accounts twice the size, skb overhead included. Each RC QP keeps up to 128
  // PSNs unacknowledged (transport/qp.hpp kMaxUnackedPsns), 512 KiB at a 4096 MTU, and a
  // receiver that falls behind holds every peer QP's window: 64 MiB holds 128 QPs' (tested in
  // udp_port_test). 16 MiB did not hold 64 QPs': write_bw -q 64 on lo lost up to 7,791 GSO
  // datagrams per 2 s run (UdpRcvbufErrors) and resent 9 % of its packets.
  int rcvbuf_bytes = 64 << 20;
  int sndbuf_bytes = 4 << 20;
  bool share = true;               // SO_REUSEPORT group with QPN steering
  int slot = kAnySlot;             // QPN slot to own when sharing
  std::string registry_dir;        // empty: RegistryFile::default_dir()
  bool per_qp_source_port = true;  // send-only sockets for sport != port
  size_t max_source_port_sockets = 256;
  // ICMP errors and EMSGSIZE of every socket of this port are recorded here (may be null;
  // must outlive the port).
  PathErrorLog* path_log = nullptr;
  // UDP GSO (UDP_SEGMENT): a run of datagrams to one destination with one TOS and one size
  // (the last may be shorter) leaves as one message, the kernel cutting it into datagrams.
  // Segment k gets IPv4 ID k, which the ICRC covers: append_segment() seals each for its ID
  // (docs/performance.md "UDP GSO and GRO"). Off here; UdpDevice turns it on (UROCE_GSO).
  bool gso = false;
  // UDP GRO (UDP_GRO) on the receiving socket: the kernel hands over a run of same-size
  // datagrams of one flow and TOS as one (a peer's GSO message on loopback or a veth, or
  // datagrams a NIC's GRO merged), which recv_burst() cuts back into datagrams, each handed
  // out where it lies (RxDatagram::in_port). Off here; UdpDevice turns it on (UROCE_GRO).
  bool gro = false;
};

struct TxDatagram {
  std::span<const uint8_t> data;  // the UDP payload: BTH .. ICRC
  wire::IpContext ip;             // dst, dport and sport are used (sport 0 = the bound port);
                                  // src is the bound address whatever this says
  uint8_t tos = 0;                // DSCP << 2 | ECN, sent as an IP_TOS / IPV6_TCLASS cmsg
  uint32_t scope_id = 0;          // link-local IPv6 destinations
  // Bytes [payload_at, payload_at + payload.size()) of data, when not empty, are sent from
  // here instead (transport::TxSlot::payload: a registered buffer, no copy into the slot).
  std::span<const uint8_t> payload;
  size_t payload_at = 0;
  // The caller's data is writable memory that send_burst may change while it runs: an IPv4
  // GSO segment's ICRC word is then corrected in place and put back before the call returns,
  // so the packet is one piece for the kernel instead of two (the device's TX slots).
  bool icrc_writable = false;
};

struct RxDatagram {
  std::span<uint8_t> buf;    // in: caller-owned room for one datagram (>= 4096 + 64 bytes)
  size_t len = 0;            // out: bytes received
  wire::IpContext ip;        // out: src/dst address, sport/dport (IPv4 ID unknown on a socket)
  bool ip_id_known = false;  // out: ip.ipv4_id/ipv4_df are the header's (a receive ring)
  uint8_t tos = 0;           // out: received TOS / traffic class (DSCP << 2 | ECN)
  uint8_t ttl = 0;           // out: received TTL / hop limit
  int ifindex = 0;           // out: interface it arrived on
  // out: `buf` was pointed at the datagram in the port's own memory (UDP GRO: no copy), valid
  // until the next recv_burst(); false: the datagram is in the caller's buffer.
  bool in_port = false;
};

struct WaitResult {
  bool readable = false;
  bool writable = false;
  bool woken = false;  // wake() was called
};

struct BufferReport {
  int rcvbuf_requested = 0;
  int rcvbuf_effective = 0;  // what the kernel grants for data (getsockopt / 2)
  int sndbuf_requested = 0;
  int sndbuf_effective = 0;
  bool rcvbuf_capped = false;  // effective < requested: net.core.rmem_max too small
  bool sndbuf_capped = false;
  std::string note;  // one line for the log when capped, empty otherwise
};

// Every counter of a port; names follow the rxe/mlx5 spirit where one exists.
struct UdpPortCounters {
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_would_block = 0;     // send_burst stopped because the send buffer was full
  uint64_t tx_drop_too_big = 0;    // EMSGSIZE: larger than the path MTU with DF set
  uint64_t tx_drop_error = 0;      // other per-packet errors (unreachable, EPERM, ...)
  uint64_t tx_sport_fallback = 0;  // sent from the bound port, the asked sport unavailable
  uint64_t tx_gso_messages = 0;    // messages of more than one datagram sent with UDP_SEGMENT
  uint64_t tx_gso_fallback = 0;    // GSO messages the kernel refused, resent one by one
  uint64_t rx_gro_messages = 0;    // received UDP GRO messages of more than one datagram
  // Ring mode (hand_data_to_ring): messages read here that the ring holds a marker of.
  uint64_t rx_ring_large_messages = 0;
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_drop_truncated = 0;     // larger than the caller's buffer
  uint64_t rx_drop_misdelivered = 0;  // dest QPN in a slot another live member owns
  uint64_t rx_drop_no_owner = 0;      // dest QPN in a slot nobody owns on this address
  uint64_t rx_drop_repair = 0;        // arrived while this member probed its position
  uint64_t rx_probes = 0;             // another member's position probes (not data)
  uint64_t rx_errors = 0;             // recvmmsg failures other than EAGAIN
  uint64_t reuseport_repairs = 0;     // reconcile runs that changed the group
  uint64_t reuseport_probes = 0;      // self-position probes run
  uint64_t reuseport_probe_failures = 0;
};

class UdpPort {
 public:
  static constexpr size_t kMaxBurst = 64;
  // Receive buffer of a send-only (per-QP source port) socket: room for a few ICMP errors.
  static constexpr int kSendOnlyErrorQueueBytes = 64 * 1024;

  [[nodiscard]] static NetResult<std::unique_ptr<UdpPort>> open(const UdpPortConfig& config);
  UdpPort(const UdpPort&) = delete;
  UdpPort& operator=(const UdpPort&) = delete;
  ~UdpPort();  // leaves the group cleanly (program re-pointed before the close)

  // Sends up to all of `pkts` with sendmmsg, in order. Returns how many were consumed (sent, or
  // dropped with a counter for an error that retrying cannot fix). Fewer than pkts.size()
  // means the socket buffer is full: wait(…, want_write) and call again with the rest.
  size_t send_burst(std::span<const TxDatagram> pkts);

  // Receives up to min(out.size(), kMaxBurst) datagrams without blocking into the callers'
  // buffers; fills out[0..n) and returns n. Datagrams for another member's QPN slot, probes
  // and truncated datagrams are dropped and counted, never returned.
  // `max_messages` bounds the receive messages read from the socket in this call (a UDP GRO
  // message holds several datagrams): ring mode reads one at a time, in the ring's order.
  size_t recv_burst(std::span<RxDatagram> out, size_t max_messages = kMaxBurst);

  // Sleeps until the socket is readable (or writable if asked), wake() is called, or `timeout`
  // passes (negative: forever). Runs maintain() first.
  WaitResult wait(Nanos timeout, bool want_write = false);
  // Interrupts a wait() in another thread (eventfd). Thread-safe.
  void wake();

  // Checks the shared group: re-reads the registry if someone changed it or a member process
  // exited (pidfd), prunes dead members, re-verifies this member's position after a crash.
  // Cheap when nothing changed (one poll, one pread). No-op for an unshared port.
  void maintain();
  // QP1 (CM) steering between the members of this address's group (docs/cm.md). Each change
  // takes the registry lock, updates this member's record and re-attaches the group's
  // program; the other members pick it up at their next maintain(), like a membership
  // change. On an unshared port these only remember the setting (everything is ours) and
  // return 0.
  //
  // CM-capable: this member runs a CM agent that answers the QP1 datagrams nobody claims (a
  // REQ for a service nobody listens on gets REJ 8). The lowest-slot CM-capable member of
  // the address receives them; with none, slot 0's owner does. Returns 0.
  int set_cm_capable(bool on);
  // REQs and SIDR_REQs for `service_id` on this address come to this member. 0 on success
  // (also when this member listens on it already: listening is idempotent); EADDRINUSE when
  // another live member on this address listens on it; ENOSPC when the address has
  // kMaxCmListeners listeners already or the kernel refuses the longer program (ENOMEM:
  // net.core.optmem_max; reuseport_program.hpp), and nothing changed.
  int listen_service(uint64_t service_id);
  // Stops listening (no-op when not listening).
  void unlisten_service(uint64_t service_id);
  [[nodiscard]] bool cm_capable() const { return cm_capable_; }
  [[nodiscard]] const std::vector<uint64_t>& listened_services() const { return listens_; }

  // Receive ring mode (rx_ring.hpp): from now on the socket drops the datagrams a receive
  // ring of this process takes (build_socket_drop_filter for this port's slot). The kernel
  // counts those drops with its own, so the socket's drop count stops feeding rx_discards.
  // 0, or the errno of SO_ATTACH_FILTER.
  // `ifindexes`: RxRingConfig::ifindexes, the interfaces the ring watches.
  int hand_data_to_ring(const std::vector<int>& ifindexes);
  [[nodiscard]] bool ring_takes_data() const { return ring_takes_data_; }
  // The ring gives its data back (UdpPacketIo, after an overflow), in two steps. First the
  // socket keeps every datagram again (the filter goes; 0 or the errno of
  // SO_DETACH_FILTER), while the ring's markers still count the large messages they stand
  // for; once the ring is read to its end, the socket forgets it, and its drop count feeds
  // rx_discards again from there.
  int keep_ring_data();
  void forget_ring();
  // Ring mode: whether the next message on the socket is one a ring marker stands for (a
  // GSO message too large for a frame, of the ring's QPs and interfaces). Such a message is
  // read only at its marker: read earlier, it would overtake the ring's datagrams that
  // arrived before it. One recvmsg(MSG_PEEK) of its first bytes; false outside ring mode,
  // with datagrams pending here, or when the socket is empty.
  [[nodiscard]] bool next_is_ring_message();

  // Reads the socket's error queue into config.path_log: when poll() says POLLERR.
  void drain_errors() { (void)drain_error_queue(fd_, config_.path_log); }

  [[nodiscard]] QpnRange qpn_range() const { return qpn_range_; }
  [[nodiscard]] std::optional<uint32_t> slot() const { return slot_; }
  [[nodiscard]] std::optional<uint32_t> position() const { return position_; }
  [[nodiscard]] const IpAddr& local() const { return config_.local; }
  [[nodiscard]] uint16_t port() const { return port_; }
  // Whether datagrams can leave from this UDP source port (opens the send-only socket on
  // first use). When not, send_burst() sends from port(): the ICRC covers the source port,
  // so a caller that cares must re-seal the packet for port() first.
  [[nodiscard]] bool has_source_port(uint16_t sport) {
    return sport == 0 || sport == port_ ||
           (config_.per_qp_source_port && socket_for_sport(sport) >= 0);
  }
  [[nodiscard]] int fd() const { return fd_; }
  // Datagrams already read from the socket wait for the next recv_burst() (UDP GRO): a caller
  // must not sleep on the socket then.
  [[nodiscard]] bool has_pending() const { return gro_next_ < gro_entries_ || !stash_.empty(); }
  [[nodiscard]] int wake_fd() const { return wake_fd_; }
  [[nodiscard]] const BufferReport& buffers() const { return buffers_; }
  [[nodiscard]] const UdpPortCounters& counters() const { return counters_; }
  // Datagrams of a shared port dropped because they belong to another member: the same
  // counts as counters().rx_drop_misdelivered and rx_drop_no_owner, kept atomic as well so
  // the device's counters may read them from any thread. Thread-safe.
  [[nodiscard]] uint64_t rx_misdelivered() const {
    return rx_misdelivered_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] uint64_t rx_no_owner() const {
    return rx_no_owner_.load(std::memory_order_relaxed);
  }
  // Datagrams the kernel dropped at this socket since open (see above). Thread-safe.
  [[nodiscard]] uint64_t rx_discards() const {
    return rx_discards_.load(std::memory_order_relaxed);
  }

 private:
  explicit UdpPort(const UdpPortConfig& config);
  NetResult<bool> setup();
  NetResult<bool> create_socket();
  NetError bind_error(int err) const;
  void join_group_locked(RegistryState& state);
  // force_verify: probe this member's position even if the registry's epoch says it is
  // proven; new_epoch: also make every other member prove its own (the registry is suspect).
  void reconcile(bool force_verify, bool new_epoch = false);
  void reconcile_locked(bool force_verify, bool new_epoch = false);  // registry lock held
  std::optional<uint32_t> probe_position(size_t group_size);
  // 0, or the errno of SO_ATTACH_REUSEPORT_CBPF (also kept in last_attach_error_).
  int attach_program(const RegistryState& state);
  void remember_group(const RegistryState& state);
  void watch_members(const RegistryState& state);
  [[nodiscard]] bool a_watched_member_exited() const;
  int socket_for_sport(uint16_t sport);
  bool keep_datagram(RxDatagram& d);
  // Adds datagram number `datagram` of the burst to message `msg` as its segment `segment`
  // (>= 1), at iovec `v` onwards.
  void append_segment(size_t msg, size_t datagram, const TxDatagram& d, size_t segment, size_t& v);
  void restore_icrcs();
  // Iovecs at `v` onwards for bytes [0, end) of `d`, its payload by reference included;
  // returns how many.
  size_t add_iovecs(const TxDatagram& d, size_t end, size_t& v);
  void fill_meta(const msghdr& h, RxDatagram& d);
  // The socket's cumulative drop count (SO_RXQ_OVFL cmsg or SO_MEMINFO) was seen.
  void note_kernel_drops(uint32_t cumulative);
  // note_kernel_drops of the count SO_MEMINFO reads now.
  void read_kernel_drops();
  size_t deliver_stash(std::span<RxDatagram> out);
  // recv_burst() with UDP GRO: reads whole GRO messages into gro_area_ and hands their
  // datagrams out in place; what does not fit `out` stays pending for the next call.
  size_t recv_burst_gro(std::span<RxDatagram> out, size_t max_messages);
  // Ring mode: a received message of `len` bytes (UDP payload; a GSO message's whole), whose
  // first bytes are `head`, arrived on `ifindex`, has a marker in the ring.
  [[nodiscard]] bool has_ring_marker(std::span<const uint8_t> head, size_t len, int ifindex) const;
  // Points `out` at one datagram in gro_area_ with meta `m` and applies keep_datagram(); true
  // if it was kept (else `out` keeps its buffer). Sets *misdelivered / *unowned as
  // keep_datagram() counted.
  bool deliver_in_place(std::span<uint8_t> bytes, const RxDatagram& m, RxDatagram& out,
                        bool* misdelivered, bool* unowned);
  void repair_after(bool misdelivered, bool unowned);
  // Points recvmmsg entry i at `len` bytes of `buf` with its name and cmsg room.
  void prepare_rx(size_t i, uint8_t* buf, size_t len);
  int recv_prepared(size_t want);  // recvmmsg into rx_msgs_[0, want), non-blocking
  // Counts a failed recvmmsg/recvmsg (rc <= 0; errno as it left it).
  void note_recv_error(int rc);

  // What every pass reads, an empty busy poll's included, comes first and together. On this
  // VM a system call leaves the TLB cold, and these fields, spread over this 60 KiB object,
  // cost a page walk each: perf annotate put a busy poll's user time on their loads.
  int fd_ = -1;
  size_t rx_dirty_ = kMaxBurst;
  // Entries [0, rx_gro_ready_) point at the GRO area and no recvmmsg has filled them since:
  // an empty poll of a GRO port then prepares nothing at all.
  size_t rx_gro_ready_ = 0;
  bool gso_ = false;  // config.gso and the kernel has UDP_SEGMENT
  bool gro_ = false;  // UDP GRO: see gro_len_ below
  std::unique_ptr<uint8_t[]> gro_area_;
  size_t gro_entries_ = 0;
  size_t gro_next_ = 0;
  size_t gro_offset_ = 0;
  uint16_t last_sport_ = 0;  // socket_for_sport's last hit (0: none; 0 never gets a socket)
  int last_sport_fd_ = -1;
  // Datagrams drained from the socket while probing our position, handed out first by the
  // next recv_burst() (allocates, but only during a repair).
  struct Stashed {
    std::vector<uint8_t> bytes;
    RxDatagram meta;
  };
  static constexpr size_t kMaxStash = 1024;
  std::deque<Stashed> stash_;
  // The receive side's own entries, so that an empty recvmmsg (the common case of a busy
  // poll) costs no re-preparation: prepare_rx rewrites an entry only when its buffer changed
  // or the last recvmmsg filled it (entries [0, rx_dirty_)).
  std::array<mmsghdr, kMaxBurst> rx_msgs_{};
  std::array<iovec, kMaxBurst> rx_iovs_{};

  UdpPortConfig config_;
  uint16_t port_ = 0;
  int family_ = AF_INET;
  int wake_fd_ = -1;
  BufferReport buffers_;
  UdpPortCounters counters_;
  uint32_t kernel_drops_seen_ = 0;  // the kernel's 32-bit count as last seen
  bool ring_takes_data_ = false;
  std::vector<int> ring_ifindexes_;  // hand_data_to_ring's (empty: every interface)
  std::atomic<uint64_t> rx_discards_{0};
  std::atomic<uint64_t> rx_misdelivered_{0};
  std::atomic<uint64_t> rx_no_owner_{0};
  QpnRange qpn_range_ = whole_qpn_range();

  // Sharing.
  std::optional<RegistryFile> registry_;
  uint64_t token_ = 0;
  std::optional<uint32_t> slot_;
  std::optional<uint32_t> position_;
  std::array<bool, kSlotCount> slot_owned_by_other_{};  // snapshot of the live group
  std::unordered_set<uint64_t> services_of_others_;     // the other members' CM listeners
  bool cm_capable_ = false;                             // this member's QP1 records
  std::vector<uint64_t> listens_;
  int last_attach_error_ = 0;
  // pidfds of the other members' processes: readable when one exits, so a crash is noticed
  // at the next wait()/maintain() instead of at the next misdelivered datagram.
  std::unordered_map<pid_t, int> member_pidfds_;
  // A member of another process has no pidfd (a kernel before 5.3, or the process was gone
  // when we looked): maintain() then checks the registry's processes in /proc once a second.
  bool unwatched_members_ = false;
  int64_t last_prune_ns_ = 0;
  int64_t last_misdelivery_repair_ns_ = 0;

  // Source-port sockets.
  std::unordered_map<uint16_t, int> sport_fds_;
  std::unordered_set<uint16_t> sport_unavailable_;

  // Per-burst scratch, allocated once.
  std::array<mmsghdr, kMaxBurst> msgs_{};
  // A datagram takes up to four: headers, payload by reference, pad, the ICRC of a GSO
  // segment (add_iovecs, append_segment).
  std::array<iovec, 4 * kMaxBurst> iovs_{};
  std::array<sockaddr_storage, kMaxBurst> names_{};
  struct alignas(cmsghdr) CmsgBuf {
    uint8_t bytes[160];  // TOS/TCLASS, TTL/HOPLIMIT, PKTINFO, RXQ_OVFL with room
  };
  std::array<CmsgBuf, kMaxBurst> cmsgs_{};
  std::array<bool, kMaxBurst> fallback_{};
  std::array<sockaddr_storage, kMaxBurst> rx_names_{};
  std::array<CmsgBuf, kMaxBurst> rx_cmsgs_{};
  // GSO: each message m of a sendmmsg covers datagrams [msg_first_[m], +msg_count_[m]).
  std::unordered_set<int> gso_refused_;  // sockets whose egress refused GSO (EIO)
  std::array<uint16_t, kMaxBurst> msg_first_{};
  std::array<uint16_t, kMaxBurst> msg_count_{};
  // IPv4 GSO segments after a message's first leave with their ICRC corrected for the ID the
  // kernel gives them (append_segment): one word per datagram, and the corrections for the
  // last two packet sizes seen.
  std::array<std::array<uint8_t, wire::kIcrcLen>, kMaxBurst> segment_icrc_{};
  // Or, for a datagram whose data is writable (TxDatagram::icrc_writable), the correction
  // XORed into the word where it lies; restore_icrcs() takes it out again after the call.
  struct InPlaceIcrc {
    uint8_t* word;
    uint32_t delta;
  };
  std::array<InPlaceIcrc, kMaxBurst> in_place_icrc_{};
  size_t in_place_count_ = 0;
  std::array<wire::Ipv4IdIcrcDelta, 2> id_deltas_{};
  size_t next_id_delta_ = 0;
  // UDP GRO: up to kGroEntries messages of up to kGroBytes each per recvmmsg. Entry e holds
  // gro_len_[e] bytes of datagrams of gro_seg_[e] bytes (the last may be shorter) with the
  // metadata gro_meta_[e]; entries [gro_next_, gro_entries_) are not yet fully handed out, the
  // first from byte gro_offset_. As many entries as a plain recvmmsg reads: traffic between
  // many QPs (ACKs, one source port per QP) is seldom merged, and with 8 entries a busy port
  // read 8 datagrams per system call and fell behind its socket (docs/performance.md). The
  // 4 MiB area is left uninitialised: only the pages the kernel writes become resident.
  static constexpr size_t kGroEntries = kMaxBurst;
  static constexpr size_t kGroBytes = 65536;
  std::array<size_t, kGroEntries> gro_len_{};
  std::array<size_t, kGroEntries> gro_seg_{};
  std::array<RxDatagram, kGroEntries> gro_meta_{};
};

}  // namespace uroce::net
