#include "net/rx_ring.hpp"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "net/reuseport_program.hpp"
#include "wire/byte_order.hpp"

namespace uroce::net {
namespace {

// Classic BPF with forward labels: conditional jumps are 8-bit forward offsets, so the
// program is written with labels and the offsets filled in at the end.
class FilterAsm {
 public:
  static constexpr int kNext = -1;  // a jump target: the next instruction

  int label() {
    labels_.push_back(SIZE_MAX);
    return static_cast<int>(labels_.size() - 1);
  }
  void bind(int l) { labels_[static_cast<size_t>(l)] = code_.size(); }
  void stmt(uint16_t code, uint32_t k) { code_.push_back(BPF_STMT(code, k)); }
  void jump(uint16_t code, uint32_t k, int jt, int jf) {
    jumps_.push_back(Jump{code_.size(), jt, jf});
    code_.push_back(BPF_JUMP(code, k, 0, 0));
  }
  // An unconditional jump: its offset is k, not jt/jf.
  void jump_always(int l) {
    jumps_.push_back(Jump{code_.size(), l, l, true});
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0));
  }
  // The program, or empty if a jump is longer than 255 instructions.
  std::vector<sock_filter> finish() {
    for (const Jump& j : jumps_) {
      if (j.always) {
        std::optional<uint8_t> k = offset(j.at, j.jt);
        if (!k) return {};
        code_[j.at].k = *k;
        continue;
      }
      std::optional<uint8_t> t = offset(j.at, j.jt);
      std::optional<uint8_t> f = offset(j.at, j.jf);
      if (!t || !f) return {};
      code_[j.at].jt = *t;
      code_[j.at].jf = *f;
    }
    return code_;
  }

 private:
  struct Jump {
    size_t at = 0;
    int jt = kNext;
    int jf = kNext;
    bool always = false;
  };
  std::optional<uint8_t> offset(size_t at, int l) const {
    const size_t target = l == kNext ? at + 1 : labels_[static_cast<size_t>(l)];
    if (target == SIZE_MAX || target <= at || target - at - 1 > 255) return std::nullopt;
    return static_cast<uint8_t>(target - at - 1);
  }
  std::vector<sock_filter> code_;
  std::vector<size_t> labels_;
  std::vector<Jump> jumps_;
};

constexpr uint32_t kNet = static_cast<uint32_t>(SKF_NET_OFF);  // network-header-relative loads
constexpr uint32_t kAll = 0xFFFFFFFF;                          // "keep the whole packet"
constexpr uint32_t kMinRoceUdp = 8 + 12;                       // UDP header + BTH
constexpr uint8_t kProbeFirstByte = kProbeMagic[0];

// The BTH checks both filters share, with the UDP header at X + `udp` (ring: X = the IP
// header's length, udp = kNet; socket: X = 0, udp = 0): jumps to `take` for a datagram the
// ring takes, to `leave` otherwise. A is clobbered.
void emit_bth_checks(FilterAsm& a, uint32_t udp, std::optional<uint32_t> slot, int take,
                     int leave) {
  a.stmt(BPF_LD | BPF_B | BPF_IND, udp + 8);  // BTH opcode, or a probe's magic
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, kProbeFirstByte, leave, FilterAsm::kNext);
  a.stmt(BPF_LD | BPF_W | BPF_IND, udp + 8 + 4);  // BTH reserved byte + destination QPN
  a.stmt(BPF_ALU | BPF_AND | BPF_K, 0xFFFFFF);
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, kGsiQpn, leave, FilterAsm::kNext);
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, kMulticastQpn, leave, slot ? FilterAsm::kNext : take);
  if (slot) {
    a.stmt(BPF_ALU | BPF_RSH | BPF_K, kQpnBits - kSlotBits);
    a.jump(BPF_JMP | BPF_JEQ | BPF_K, *slot, take, leave);
  }
}

// Goes on when A equals one of `values` (not empty), else jumps to `leave`.
void emit_one_of(FilterAsm& a, const std::vector<uint32_t>& values, int leave) {
  const int match = a.label();
  for (size_t i = 0; i < values.size(); ++i) {
    a.jump(BPF_JMP | BPF_JEQ | BPF_K, values[i], match,
           i + 1 == values.size() ? leave : FilterAsm::kNext);
  }
  a.bind(match);
}

// Jumps to `leave` unless the packet arrived on one of `ifindexes` (none: any). A is
// clobbered.
void emit_interface_check(FilterAsm& a, const std::vector<int>& ifindexes, int leave) {
  if (ifindexes.empty()) return;
  a.stmt(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_IFINDEX));
  emit_one_of(a, std::vector<uint32_t>(ifindexes.begin(), ifindexes.end()), leave);
}

}  // namespace

std::vector<sock_filter> build_ring_filter(const RxRingConfig& config) {
  std::vector<uint32_t> v4;  // the addresses as the header's word
  std::vector<const IpAddr*> v6;
  for (const IpAddr& ip : config.addrs) {
    if (ip.is_v4()) {
      v4.push_back(wire::load_be32(ip.bytes.data() + 12));
    } else {
      v6.push_back(&ip);
    }
  }
  if (v4.size() > RxRing::kMaxAddresses || v6.size() > RxRing::kMaxAddresses ||
      config.ifindexes.size() > RxRing::kMaxInterfaces) {
    return {};
  }

  FilterAsm a;
  const int take = a.label();
  const int leave = a.label();
  const int ipv4 = a.label();
  const int ipv6 = a.label();
  const int udp = a.label();  // X = the UDP header's offset from the network header
  emit_interface_check(a, config.ifindexes, leave);
  a.stmt(BPF_LD | BPF_B | BPF_ABS, kNet + 0);
  a.stmt(BPF_ALU | BPF_RSH | BPF_K, 4);
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, 4, ipv4, FilterAsm::kNext);
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, 6, ipv6, leave);

  a.bind(ipv4);
  if (v4.empty()) {
    a.stmt(BPF_RET | BPF_K, 0);
  } else {
    a.stmt(BPF_LD | BPF_B | BPF_ABS, kNet + 9);
    a.jump(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, FilterAsm::kNext, leave);
    a.stmt(BPF_LD | BPF_H | BPF_ABS, kNet + 6);
    a.jump(BPF_JMP | BPF_JSET | BPF_K, 0x3FFF, leave, FilterAsm::kNext);  // MF or an offset
    a.stmt(BPF_LD | BPF_W | BPF_ABS, kNet + 16);                          // destination address
    emit_one_of(a, v4, leave);
    a.stmt(BPF_LD | BPF_B | BPF_ABS, kNet + 0);
    a.stmt(BPF_ALU | BPF_AND | BPF_K, 0x0F);
    a.stmt(BPF_ALU | BPF_LSH | BPF_K, 2);
    a.stmt(BPF_MISC | BPF_TAX, 0);
    a.jump_always(udp);
  }

  a.bind(ipv6);
  if (v6.empty()) {
    a.stmt(BPF_RET | BPF_K, 0);
  } else {
    a.stmt(BPF_LD | BPF_B | BPF_ABS, kNet + 6);
    a.jump(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, FilterAsm::kNext, leave);
    const int v6_ours = a.label();
    for (size_t i = 0; i < v6.size(); ++i) {
      const int next_addr = i + 1 == v6.size() ? leave : a.label();
      for (uint32_t w = 0; w < 4; ++w) {
        a.stmt(BPF_LD | BPF_W | BPF_ABS, kNet + 24 + 4 * w);
        a.jump(BPF_JMP | BPF_JEQ | BPF_K, wire::load_be32(v6[i]->bytes.data() + 4 * w),
               w == 3 ? v6_ours : FilterAsm::kNext, next_addr);
      }
      if (i + 1 != v6.size()) a.bind(next_addr);
    }
    a.bind(v6_ours);
    a.stmt(BPF_LDX | BPF_W | BPF_IMM, 40);
  }

  a.bind(udp);
  a.stmt(BPF_LD | BPF_H | BPF_IND, kNet + 2);  // destination port
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, config.port, FilterAsm::kNext, leave);
  a.stmt(BPF_LD | BPF_H | BPF_IND, kNet + 4);  // UDP length
  a.jump(BPF_JMP | BPF_JGE | BPF_K, kMinRoceUdp, FilterAsm::kNext, leave);
  emit_bth_checks(a, kNet, config.slot, take, leave);

  a.bind(take);
  const int marker = a.label();
  a.stmt(BPF_LD | BPF_H | BPF_IND, kNet + 4);
  a.jump(BPF_JMP | BPF_JGT | BPF_K, RxRing::kMaxUdpLength, marker, FilterAsm::kNext);
  a.stmt(BPF_RET | BPF_K, kAll);
  a.bind(marker);
  a.stmt(BPF_RET | BPF_K, RxRing::kMarkerBytes);
  a.bind(leave);
  a.stmt(BPF_RET | BPF_K, 0);
  return a.finish();
}

std::vector<sock_filter> build_socket_drop_filter(std::optional<uint32_t> slot,
                                                  const std::vector<int>& ifindexes) {
  if (ifindexes.size() > RxRing::kMaxInterfaces) return {};
  FilterAsm a;
  const int ring_has_it = a.label();
  const int keep = a.label();
  emit_interface_check(a, ifindexes, keep);
  a.stmt(BPF_LD | BPF_W | BPF_LEN, 0);  // UDP header + payload (or a whole GRO message)
  a.jump(BPF_JMP | BPF_JGT | BPF_K, RxRing::kMaxUdpLength, keep, FilterAsm::kNext);
  a.jump(BPF_JMP | BPF_JGE | BPF_K, kMinRoceUdp, FilterAsm::kNext, keep);
  a.stmt(BPF_LDX | BPF_W | BPF_IMM, 0);
  emit_bth_checks(a, 0, slot, ring_has_it, keep);
  a.bind(ring_has_it);
  a.stmt(BPF_RET | BPF_K, 0);
  a.bind(keep);
  a.stmt(BPF_RET | BPF_K, kAll);
  return a.finish();
}

bool ring_takes_payload(std::span<const uint8_t> p, std::optional<uint32_t> slot) {
  const std::optional<uint32_t> qpn = dest_qpn_of(p);
  if (!qpn || p[0] == kProbeFirstByte || *qpn == kGsiQpn || *qpn == kMulticastQpn) return false;
  return !slot || slot_of_qpn(*qpn) == *slot;
}

NetResult<std::unique_ptr<RxRing>> RxRing::open(const RxRingConfig& config, uint32_t frames) {
  auto ring = open_ring(config, frames);
  if (!ring) return ring;
  if (std::string e = check_gso_frames(); !e.empty()) return NetError{EOPNOTSUPP, e};
  return ring;
}

std::string RxRing::check_gso_frames() {
  // What the kernel can do does not change while the process runs: asked once.
  static const std::string verdict = [] {
    // A port of our own on loopback, a small ring watching it, and a GSO message of two
    // BTH-shaped datagrams (so the ring's filter takes them) sent to it by a GSO port.
    UdpPortConfig c;
    c.local = IpAddr::v4(127, 0, 0, 1);
    c.port = 0;
    c.share = false;
    auto rx = UdpPort::open(c);
    c.gso = true;
    auto tx = UdpPort::open(c);
    if (!rx || !tx) return std::string();  // no loopback to try it on: nothing known
    RxRingConfig rc;
    rc.port = rx.value()->port();
    rc.addrs = {c.local};
    auto ring = open_ring(rc, 4);
    if (!ring) return std::string();
    std::array<uint8_t, 64> bth{};
    bth[7] = 0x20;  // destination QPN 0x20
    std::array<TxDatagram, 2> two{};
    for (TxDatagram& d : two) {
      d.data = bth;
      d.ip.dst = c.local.bytes;
      d.ip.dport = rc.port;
    }
    if (tx.value()->send_burst(two) != two.size() || tx.value()->counters().tx_gso_messages != 1) {
      return std::string();  // no GSO message went out: nothing to learn
    }
    std::array<RxDatagram, 2> got{};
    size_t n = 0;
    for (int tries = 0; tries < 50 && n < got.size(); ++tries) {
      pollfd p{ring.value()->fd(), POLLIN, 0};
      (void)poll(&p, 1, 10);
      n += ring.value()->read(std::span<RxDatagram>(got).subspan(n));
    }
    if (n == got.size() && got[0].len == bth.size() && got[1].len == bth.size())
      return std::string();
    return std::string(
        "UROCE_RX_RING: this kernel does not hand UDP GSO messages to a packet ring (it needs "
        "Linux 6.2 or later); unset UROCE_RX_RING");
  }();
  return verdict;
}

NetResult<std::unique_ptr<RxRing>> RxRing::open_ring(const RxRingConfig& config, uint32_t frames) {
  const std::vector<sock_filter> prog = build_ring_filter(config);
  if (prog.empty()) {
    return NetError{EINVAL, "UROCE_RX_RING: the device has more than " +
                                std::to_string(kMaxAddresses) +
                                " addresses of one family; bind fewer (UROCE_DEVICE_ADDR)"};
  }
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    const int err = errno;
    if (err == EPERM || err == EACCES) {
      return NetError{err,
                      "UROCE_RX_RING=1 needs CAP_NET_RAW (a packet socket): run as root, "
                      "give the program `setcap cap_net_raw+ep`, or unset UROCE_RX_RING"};
    }
    return NetError{
        err, std::string("UROCE_RX_RING: cannot open a packet socket: ") + std::strerror(err)};
  }
  auto fail = [&](const char* what) -> NetError {
    const int err = errno;
    close(fd);
    return NetError{err, std::string("UROCE_RX_RING: ") + what + ": " + std::strerror(err) +
                             "; unset UROCE_RX_RING to receive from the UDP sockets"};
  };
  const int version = TPACKET_V2;
  const int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) != 0) {
    return fail("TPACKET_V2");
  }
  // The GSO size of a message sent with UDP_SEGMENT over loopback or a veth, which arrives
  // whole (needs SOCK_RAW).
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) {
    return fail("PACKET_VNET_HDR");
  }
  // Our own transmissions would come back once more on the way out.
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
    return fail("PACKET_IGNORE_OUTGOING (Linux 4.20 or later)");
  }
  const sock_fprog fprog{static_cast<unsigned short>(prog.size()),
                         const_cast<sock_filter*>(prog.data())};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) != 0) {
    return fail("attaching the filter");
  }
  tpacket_req req{};
  req.tp_block_size = kFrameBytes;
  req.tp_block_nr = frames;
  req.tp_frame_size = kFrameBytes;
  req.tp_frame_nr = frames;
  if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0) {
    return fail("PACKET_RX_RING");
  }
  const size_t bytes = size_t{kFrameBytes} * frames;
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("mapping the ring");
  // Every interface: a datagram to one of our addresses from this host crosses `lo`
  // whatever netdev the address is on.
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_ALL);
  ll.sll_ifindex = 0;
  if (bind(fd, reinterpret_cast<const sockaddr*>(&ll), sizeof ll) != 0) {
    munmap(map, bytes);
    return fail("binding the packet socket");
  }
  return std::unique_ptr<RxRing>(new RxRing(fd, static_cast<uint8_t*>(map), frames));
}

RxRing::RxRing(int fd, uint8_t* map, uint32_t frames) : fd_(fd), map_(map), frames_(frames) {}

RxRing::~RxRing() {
  if (map_ != nullptr) munmap(map_, size_t{kFrameBytes} * frames_);
  if (fd_ >= 0) close(fd_);
}

namespace {

auto* header_of(uint8_t* frame) {
  return reinterpret_cast<tpacket2_hdr*>(frame);
}

uint32_t frame_status(uint8_t* frame) {
  return __atomic_load_n(&header_of(frame)->tp_status, __ATOMIC_ACQUIRE);
}

// struct virtio_net_hdr's fields we read (linux/virtio_net.h cannot be included from C++).
constexpr size_t kVnetBytes = 10;
constexpr uint8_t kVnetGsoNone = 0;

}  // namespace

void RxRing::next_frame() {
  cur_ = (cur_ + 1) % frames_;
  ++held_;
}

void RxRing::release() {
  for (uint32_t f = (cur_ + frames_ - held_) % frames_; held_ != 0; --held_) {
    __atomic_store_n(&header_of(frame(f))->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    f = (f + 1) % frames_;
  }
}

bool RxRing::parse_current() {
  uint8_t* f = frame(cur_);
  const tpacket2_hdr* h = header_of(f);
  ++counters_.frames;
  // Cut short: the filter's marker for a message too large for a frame (its headers only).
  const bool marker = h->tp_snaplen < h->tp_len;
  if (h->tp_net < h->tp_mac || h->tp_mac < kVnetBytes || h->tp_mac + h->tp_snaplen > kFrameBytes) {
    ++counters_.malformed;
    return false;
  }
  const uint8_t* vnet = f + h->tp_mac - kVnetBytes;
  const uint8_t gso_type = vnet[1];
  uint16_t gso_size = 0;
  std::memcpy(&gso_size, vnet + 4, sizeof gso_size);  // the host's byte order (vnet_hdr_be off)
  uint8_t* net = f + h->tp_net;
  const size_t cap = h->tp_snaplen - (h->tp_net - h->tp_mac);
  RxDatagram& m = cur_meta_;
  m.ip = wire::IpContext{};
  m.ip_id_known = false;
  size_t udp_at = 0;
  size_t ip_len = 0;  // what the IP header says the packet holds
  if (cap >= 20 && net[0] >> 4 == 4 && (net[0] & 0x0Fu) >= 5) {
    udp_at = size_t{net[0] & 0x0Fu} * 4;
    ip_len = wire::load_be16(net + 2);
    m.ip.ipv6 = false;
    m.tos = net[1];
    m.ttl = net[8];
    m.ip.ipv4_id = wire::load_be16(net + 4);
    m.ip.ipv4_df = (net[6] & 0x40) != 0;
    m.ip.src = IpAddr::v4(net[12], net[13], net[14], net[15]).bytes;
    m.ip.dst = IpAddr::v4(net[16], net[17], net[18], net[19]).bytes;
    m.ip_id_known = true;
  } else if (cap >= 40 && net[0] >> 4 == 6) {
    udp_at = 40;
    ip_len = 40 + size_t{wire::load_be16(net + 4)};
    m.ip.ipv6 = true;
    m.tos = static_cast<uint8_t>(((net[0] & 0x0F) << 4) | (net[1] >> 4));
    m.ttl = net[7];
    std::memcpy(m.ip.src.data(), net + 8, 16);
    std::memcpy(m.ip.dst.data(), net + 24, 16);
  } else {
    ++counters_.malformed;
    return false;
  }
  const size_t udp_len = udp_at + 8 <= cap ? wire::load_be16(net + udp_at + 4) : 0;
  // A marker must stand for a message the kernel will queue to the socket: one whose UDP
  // length fits its IP packet (udp_rcv drops the others), or the ring would wait for nothing.
  const size_t on_wire = h->tp_len - (h->tp_net - h->tp_mac);
  if (udp_len < kMinRoceUdp || (!marker && udp_at + udp_len > cap) ||
      (marker && (udp_at + udp_len > ip_len || ip_len > on_wire))) {
    ++counters_.malformed;
    return false;
  }
  m.ip.sport = wire::load_be16(net + udp_at);
  m.ip.dport = wire::load_be16(net + udp_at + 2);
  const auto* ll = reinterpret_cast<const sockaddr_ll*>(f + TPACKET_ALIGN(sizeof(tpacket2_hdr)));
  m.ifindex = ll->sll_ifindex;
  if (marker) {
    at_marker_ = true;
    return true;
  }
  cur_payload_ = std::span<uint8_t>(net + udp_at + 8, udp_len - 8);
  const bool gso = gso_type != kVnetGsoNone && gso_size != 0 && gso_size < cur_payload_.size();
  cur_seg_ = gso ? gso_size : cur_payload_.size();
  if (gso) ++counters_.gso_frames;
  return true;
}

void RxRing::pass_marker(bool timed_out) {
  if (!at_marker_) return;
  at_marker_ = false;
  ++(timed_out ? counters_.marker_timeouts : counters_.markers);
  marker_timeouts_seen_.store(counters_.marker_timeouts, std::memory_order_relaxed);
  next_frame();
}

size_t RxRing::read(std::span<RxDatagram> out) {
  size_t kept = 0;
  while (kept < out.size() && !at_marker_) {
    if (seg_off_ == 0) {
      // Every frame handed out since release(): the next one is the first of them again.
      if (held_ == frames_) break;
      const uint32_t status = frame_status(frame(cur_));
      if ((status & TP_STATUS_USER) == 0) break;
      // Set on the frames filled while the kernel's drop count (reset by refresh_drops) is
      // not zero: seen on the next frame read, without a system call.
      if ((status & TP_STATUS_LOSING) != 0) losing_seen_ = true;
      if (!parse_current()) {
        next_frame();
        continue;
      }
      if (at_marker_) break;
    }
    const size_t n = std::min(cur_seg_, cur_payload_.size() - seg_off_);
    RxDatagram& d = out[kept++];
    d.buf = cur_payload_.subspan(seg_off_, n);
    d.len = n;
    d.in_port = true;
    d.ip = cur_meta_.ip;
    // Segment k of a GSO message has the header's ID + k once cut (inet_gso_segment), and
    // uroce's sender seals it for that: the same whether or not anything cut it on the way.
    d.ip_id_known = cur_meta_.ip_id_known;
    d.ip.ipv4_id = static_cast<uint16_t>(cur_meta_.ip.ipv4_id + seg_off_ / cur_seg_);
    d.tos = cur_meta_.tos;
    d.ttl = cur_meta_.ttl;
    d.ifindex = cur_meta_.ifindex;
    ++counters_.datagrams;
    seg_off_ += n;
    if (seg_off_ >= cur_payload_.size()) {
      seg_off_ = 0;
      next_frame();
    }
  }
  if (kept != 0) datagrams_seen_.store(counters_.datagrams, std::memory_order_relaxed);
  return kept;
}

int RxRing::stop_taking() {
  stopped_ = true;
  sock_filter refuse_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  const sock_fprog fprog{1, refuse_all};
  if (setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) != 0) return errno;
  refusing_ = true;
  return 0;
}

int RxRing::free_frames() {
  if (map_ == nullptr) return 0;
  // Without the refusing filter, a socket with no ring would queue what its filter takes
  // to its receive buffer, which nobody reads.
  if (!refusing_ || !drained()) return EBUSY;
  if (munmap(map_, size_t{kFrameBytes} * frames_) != 0) return errno;
  map_ = nullptr;
  // A request for no frames frees the ring, which the kernel allows once nothing maps it.
  tpacket_req none{};
  return setsockopt(fd_, SOL_PACKET, PACKET_RX_RING, &none, sizeof none) == 0 ? 0 : errno;
}

bool RxRing::drained() const {
  if (map_ == nullptr) return true;  // freed: holds nothing
  return seg_off_ == 0 && !at_marker_ && (frame_status(frame(cur_)) & TP_STATUS_USER) == 0;
}

void RxRing::refresh_drops() {
  tpacket_stats st{};
  socklen_t len = sizeof st;
  // Reading the statistics resets them: accumulate.
  if (getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0 && st.tp_drops != 0) {
    drops_.fetch_add(st.tp_drops, std::memory_order_relaxed);
  }
}

}  // namespace uroce::net
