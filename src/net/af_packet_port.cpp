// AF_PACKET raw Ethernet port (af_packet_port.hpp).
#include "net/af_packet_port.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uroce::net {

namespace {

// struct virtio_net_hdr of <linux/virtio_net.h>, which does not compile as C++ (a field
// named `class`); the layout is the kernel's ABI.
struct VnetHeader {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
};
static_assert(sizeof(VnetHeader) == AfPacketPort::kVnetHeaderBytes);
constexpr uint8_t kVnetDataValid = 2;  // VIRTIO_NET_HDR_F_DATA_VALID

}  // namespace

std::unique_ptr<AfPacketPort> AfPacketPort::open(const std::string& ifname, int rcvbuf_bytes,
                                                 std::string& error) {
  const unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0) {
    error =
        fmt::format("no network interface named '{}' in this namespace; check `ip link`", ifname);
    return nullptr;
  }
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) {
    error = fmt::format("cannot open a raw socket for {} ({}); run as root or grant CAP_NET_RAW",
                        ifname, std::strerror(errno));
    return nullptr;
  }
  auto fail = [&](const char* what) {
    error = fmt::format("{} on {}: {}", what, ifname, std::strerror(errno));
    ::close(fd);
    return nullptr;
  };
  const int one = 1;
  // Before bind: the vnet header option is refused once the socket has a ring or is bound
  // on some kernels; setting it first is always accepted.
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0) {
    return fail("PACKET_VNET_HDR");
  }
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0) {
    return fail("PACKET_IGNORE_OUTGOING");
  }
  // Best effort: without the bypass the frames go through the interface's qdisc, which for
  // a veth is noqueue anyway.
  (void)setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf_bytes, sizeof(rcvbuf_bytes)) != 0) {
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof(rcvbuf_bytes));
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) return fail("bind");
  // Promiscuous: a switch port takes every frame, not only those to its own MAC.
  packet_mreq mreq{};
  mreq.mr_ifindex = static_cast<int>(ifindex);
  mreq.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) != 0) {
    return fail("promiscuous mode");
  }
  return std::unique_ptr<AfPacketPort>(new AfPacketPort(fd, static_cast<int>(ifindex), ifname));
}

AfPacketPort::AfPacketPort(int fd, int ifindex, std::string name)
    : fd_(fd),
      ifindex_(ifindex),
      name_(std::move(name)),
      msgs_(kMaxBurst),
      iovs_(2 * kMaxBurst),
      spill_(size_t{kMaxBurst} * kMaxFrameBytes),
      oversized_(kMaxBurst) {
  // Drops counted before we opened are not ours: reading the statistics resets them.
  (void)kernel_drops();
  kernel_drops_ = 0;
}

uint32_t AfPacketPort::mtu() const {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name_.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd_, SIOCGIFMTU, &ifr) != 0 || ifr.ifr_mtu <= 0) return 0;
  return static_cast<uint32_t>(ifr.ifr_mtu);
}

AfPacketPort::~AfPacketPort() {
  if (fd_ >= 0) ::close(fd_);
}

int AfPacketPort::rx_burst(uint8_t* const* bufs, uint32_t buf_size, uint32_t* lens, int n) {
  if (n > kMaxBurst) n = kMaxBurst;
  oversized_count_ = 0;
  if (buf_size >= kMaxFrameBytes) buf_size = kMaxFrameBytes;
  for (int i = 0; i < n; ++i) {
    uint8_t* spill = spill_.data() + size_t(i) * kMaxFrameBytes;
    // The spill iovec continues the caller's buffer at the same offset of the spill area, so
    // an oversized frame becomes contiguous there by copying only its head.
    iovs_[2 * i] = {.iov_base = bufs[i], .iov_len = buf_size};
    iovs_[2 * i + 1] = {.iov_base = spill + buf_size, .iov_len = kMaxFrameBytes - buf_size};
    msgs_[i] = {};
    msgs_[i].msg_hdr.msg_iov = &iovs_[2 * i];
    msgs_[i].msg_hdr.msg_iovlen = buf_size < kMaxFrameBytes ? 2 : 1;
  }
  const int got = recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
  if (got <= 0) return 0;
  int kept = 0;
  for (int i = 0; i < got; ++i) {
    const uint32_t len = msgs_[i].msg_len;
    if ((msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || len < kVnetHeaderBytes) {
      ++truncated_;
      continue;
    }
    if (len > buf_size) {
      std::memcpy(spill_.data() + size_t(i) * kMaxFrameBytes, bufs[i], buf_size);
      oversized_[static_cast<size_t>(oversized_count_++)] = {static_cast<uint32_t>(i), len,
                                                             static_cast<uint32_t>(kept)};
      continue;
    }
    // Compact: a discarded frame's buffer is reused by the next one.
    if (kept != i) std::memcpy(bufs[kept], bufs[i], len);
    lens[kept++] = len;
  }
  return kept;
}

int AfPacketPort::tx_burst(uint8_t* const* bufs, const uint32_t* lens, int n) {
  if (n > kMaxBurst) n = kMaxBurst;
  for (int i = 0; i < n; ++i) {
    // A received "checksum is valid" flag means nothing on transmit; a partial checksum
    // (NEEDS_CSUM) is passed on so the kernel completes it.
    auto* h = reinterpret_cast<VnetHeader*>(bufs[i]);
    h->flags &= static_cast<uint8_t>(~kVnetDataValid);
    iovs_[i] = {.iov_base = bufs[i], .iov_len = lens[i]};
    msgs_[i] = {};
    msgs_[i].msg_hdr.msg_iov = &iovs_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  int sent = 0;
  while (sent < n) {
    const int r = sendmmsg(fd_, msgs_.data() + sent, static_cast<unsigned>(n - sent), 0);
    if (r > 0) {
      sent += r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    // The frame at `sent` was refused (full device queue, bad header): drop it, go on.
    ++tx_errors_;
    ++sent;
  }
  return n;
}

uint64_t AfPacketPort::kernel_drops() {
  tpacket_stats st{};
  socklen_t len = sizeof(st);
  if (getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) kernel_drops_ += st.tp_drops;
  return kernel_drops_;
}

}  // namespace uroce::net
