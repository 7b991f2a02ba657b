// xdp_pair: the AF_XDP baseline. Would a kernel-bypass driver (AF_XDP, XDP sockets) move RoCE
// datagrams faster than uroce's UDP sockets with GSO and GRO? This program is the ceiling of
// such a driver on a link without zero-copy support (veth, most NICs' copy mode): raw frames
// sent from and received into a UMEM, with no engine, no ICRC and no ACKs, to compare with
// udp_gso_sender/udp_gro_receiver and sockperf on the same link (bench/xdp-vs-udp runs them
// side by side; docs/performance.md has the numbers).
//
//   xdp_pair receive  --dev vB --seconds 3 [--place] [--verify SIZE]
//   xdp_pair send     --dev vA --dst-mac M --src 10.0.0.1 --dst 10.0.0.2 --size 2064
//   xdp_pair ping-pong --dev vA --dst-mac M --src .. --dst .. --size 64 [--server]
//
// The receiving side attaches a six-instruction XDP program to queue 0 of its device that
// redirects every frame to the socket (frames are IPv4/UDP to port --port; ARP is not needed,
// the sender writes the peer's MAC itself). It needs CAP_NET_ADMIN and CAP_BPF (root).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/ip_addr.hpp"
#include "wire/frame.hpp"

namespace {

namespace net = uroce::net;
namespace wire = uroce::wire;

constexpr uint32_t kFrameBytes = 4096;      // one UMEM chunk per frame
constexpr uint32_t kFrames = 4096;          // 16 MiB of UMEM
constexpr uint32_t kRingSize = 2048;        // every ring; a power of two
constexpr uint32_t kHeaders = 14 + 20 + 8;  // Ethernet, IPv4, UDP: what --size leaves room for

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

double seconds_now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// One of the four rings the kernel shares with us: producer and consumer indexes that run
// freely (masked on use), and the descriptors.
template <typename Desc>
struct Ring {
  std::atomic<uint32_t>* producer = nullptr;
  std::atomic<uint32_t>* consumer = nullptr;
  Desc* desc = nullptr;
  Desc& operator[](uint32_t i) { return desc[i & (kRingSize - 1)]; }
};

template <typename Desc>
Ring<Desc> map_ring(int fd, const xdp_ring_offset& off, uint64_t page_offset) {
  const size_t len = off.desc + kRingSize * sizeof(Desc);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                 static_cast<off_t>(page_offset));
  if (p == MAP_FAILED) fail("mmap of an XDP ring");
  auto* base = static_cast<uint8_t*>(p);
  return {reinterpret_cast<std::atomic<uint32_t>*>(base + off.producer),
          reinterpret_cast<std::atomic<uint32_t>*>(base + off.consumer),
          reinterpret_cast<Desc*>(base + off.desc)};
}

// An AF_XDP socket bound to queue 0 of a device in copy mode, with its UMEM.
struct XdpSocket {
  int fd = -1;
  uint8_t* umem = nullptr;
  Ring<xdp_desc> rx, tx;
  Ring<uint64_t> fill, completion;

  explicit XdpSocket(const std::string& dev) {
    const unsigned ifindex = if_nametoindex(dev.c_str());
    if (ifindex == 0) fail("no device " + dev);
    fd = socket(AF_XDP, SOCK_RAW, 0);
    if (fd < 0) fail("socket(AF_XDP)");
    void* area = mmap(nullptr, size_t{kFrameBytes} * kFrames, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED) fail("mmap of the UMEM");
    umem = static_cast<uint8_t*>(area);
    xdp_umem_reg reg{};
    reg.addr = reinterpret_cast<uint64_t>(umem);
    reg.len = uint64_t{kFrameBytes} * kFrames;
    reg.chunk_size = kFrameBytes;
    if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) != 0) fail("XDP_UMEM_REG");
    const int entries = kRingSize;
    for (int opt : {XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_RX_RING, XDP_TX_RING}) {
      if (setsockopt(fd, SOL_XDP, opt, &entries, sizeof entries) != 0) fail("XDP ring size");
    }
    xdp_mmap_offsets off{};
    socklen_t len = sizeof off;
    if (getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len) != 0) fail("XDP_MMAP_OFFSETS");
    rx = map_ring<xdp_desc>(fd, off.rx, XDP_PGOFF_RX_RING);
    tx = map_ring<xdp_desc>(fd, off.tx, XDP_PGOFF_TX_RING);
    fill = map_ring<uint64_t>(fd, off.fr, XDP_UMEM_PGOFF_FILL_RING);
    completion = map_ring<uint64_t>(fd, off.cr, XDP_UMEM_PGOFF_COMPLETION_RING);
    sockaddr_xdp sa{};
    sa.sxdp_family = AF_XDP;
    sa.sxdp_ifindex = ifindex;
    sa.sxdp_queue_id = 0;
    sa.sxdp_flags = XDP_COPY;  // veth has no zero-copy mode; a NIC's copy mode is the same path
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("bind to " + dev);
  }

  // Hands the first `count` UMEM frames to the kernel to receive into.
  void fill_frames(uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) fill[i] = uint64_t{i} * kFrameBytes;
    fill_at_ = count;
    fill.producer->store(count, std::memory_order_release);
  }
  // Gives the frame of a received descriptor back to the fill ring; publish_fill() makes the
  // frames given back so far the kernel's again.
  void recycle(const xdp_desc& d) { fill[fill_at_++] = d.addr & ~uint64_t{kFrameBytes - 1}; }
  void publish_fill() { fill.producer->store(fill_at_, std::memory_order_release); }

 private:
  uint32_t fill_at_ = 0;
};

long bpf(int cmd, bpf_attr& attr) {
  return syscall(__NR_bpf, cmd, &attr, sizeof attr);
}

// Attaches to `dev` a program redirecting every frame of its receive queue to the socket in
// an XSKMAP (bpf_redirect_map(map, ctx->rx_queue_index, XDP_PASS)). Returns the link's fd:
// the program stays attached while it is open.
int attach_redirect_program(const std::string& dev, int xsk_fd) {
  bpf_attr attr{};
  attr.map_type = BPF_MAP_TYPE_XSKMAP;
  attr.key_size = sizeof(uint32_t);
  attr.value_size = sizeof(uint32_t);
  attr.max_entries = 1;
  const int map = static_cast<int>(bpf(BPF_MAP_CREATE, attr));
  if (map < 0) fail("BPF_MAP_CREATE (XSKMAP)");
  uint32_t key = 0;
  auto value = static_cast<uint32_t>(xsk_fd);
  attr = {};
  attr.map_fd = static_cast<uint32_t>(map);
  attr.key = reinterpret_cast<uint64_t>(&key);
  attr.value = reinterpret_cast<uint64_t>(&value);
  if (bpf(BPF_MAP_UPDATE_ELEM, attr) != 0) fail("XSKMAP update");
  const bpf_insn program[] = {
      // r2 = ctx->rx_queue_index (struct xdp_md, offset 16)
      {BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 16, 0},
      // r1 = the map (a 16-byte load of its fd, resolved by the verifier)
      {BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map},
      {0, 0, 0, 0, 0},
      // r3 = what to do when the queue has no socket
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, XDP_PASS},
      {BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  static char log[4096];
  attr = {};
  attr.prog_type = BPF_PROG_TYPE_XDP;
  attr.insns = reinterpret_cast<uint64_t>(program);
  attr.insn_cnt = sizeof program / sizeof program[0];
  attr.license = reinterpret_cast<uint64_t>("GPL");
  attr.log_buf = reinterpret_cast<uint64_t>(log);
  attr.log_size = sizeof log;
  attr.log_level = 1;
  const int prog = static_cast<int>(bpf(BPF_PROG_LOAD, attr));
  if (prog < 0) fail(std::string("BPF_PROG_LOAD (verifier: ") + log + ")");
  attr = {};
  attr.link_create.prog_fd = static_cast<uint32_t>(prog);
  attr.link_create.target_ifindex = if_nametoindex(dev.c_str());
  attr.link_create.attach_type = BPF_XDP;
  const int link = static_cast<int>(bpf(BPF_LINK_CREATE, attr));
  // veth refuses a program without multi-buffer support above an MTU of about 3.5 KiB
  // (ERANGE): a RoCE MTU of 4096 does not fit in one XDP buffer there.
  if (link < 0) fail("XDP attach to " + dev + " (an MTU above 3506 on veth gives ERANGE)");
  return link;
}

struct Flow {
  uint8_t dst_mac[ETH_ALEN]{};
  wire::IpContext ip{.sport = 49152};  // IPv4-mapped addresses, UDP ports (destination --port)
  uint32_t size = 2064;                // UDP payload: a 2048-byte RoCE payload + BTH + ICRC
};

// Ethernet + IPv4 + UDP as uroce writes them into its captures (wire::encap_frame: checksum
// 0, DF), addressed to the peer's MAC, then `size` bytes of `fill`. Returns the frame's length.
uint32_t build_frame(uint8_t* frame, const Flow& f, uint8_t fill) {
  const std::vector<uint8_t> payload(f.size, fill);  // set-up only, not per frame sent
  const size_t len = wire::encap_frame(f.ip, 0, 64, payload, {frame, kFrameBytes});
  std::memcpy(frame, f.dst_mac, ETH_ALEN);  // encap_frame derives MACs from the addresses
  return static_cast<uint32_t>(len);
}

// The UDP payload of a datagram to `port` in `frame`; nullopt for anything else the queue
// redirects (the link's own IPv6 ND and MLD, ARP).
std::optional<std::span<const uint8_t>> payload_to(uint16_t port, std::span<const uint8_t> frame) {
  wire::RoceFrame found;
  found.roce_port = port;
  if (wire::decap_frame(wire::LinkType::kEthernet, frame, found) != wire::FrameError::kOk) {
    return std::nullopt;
  }
  return found.roce;
}

// Receives for `seconds` after the first datagram to `port`; other frames are counted apart.
// --place copies each payload into a 64 MiB target, back to back, as a driver placing a
// message's packets would; --verify checks each frame's length and that its payload is one
// repeated byte (what `send` writes).
int receive(const std::string& dev, double seconds, uint16_t port, bool place,
            uint32_t verify_size) {
  XdpSocket xsk(dev);
  const int link = attach_redirect_program(dev, xsk.fd);
  xsk.fill_frames(kRingSize);
  std::vector<uint8_t> target(place ? 64u << 20 : 0);
  size_t target_at = 0;
  uint64_t frames = 0, bytes = 0, bad = 0, other = 0;
  double first = 0, last = 0;
  const double give_up = seconds_now() + seconds + 10;
  std::printf("{\"role\":\"xdp_receiver\",\"ready\":true}\n");
  std::fflush(stdout);
  for (;;) {
    uint32_t at = xsk.rx.consumer->load(std::memory_order_relaxed);
    const uint32_t end = xsk.rx.producer->load(std::memory_order_acquire);
    if (at == end) {
      const double t = seconds_now();
      if ((first != 0 && t > first + seconds) || t > give_up) break;
      continue;
    }
    for (; at != end; ++at) {
      const xdp_desc& d = xsk.rx[at];
      const auto payload = payload_to(port, {xsk.umem + d.addr, d.len});
      xsk.recycle(d);  // read before the fill ring is published below
      if (!payload) {
        ++other;
        continue;
      }
      if (first == 0) first = seconds_now();
      if (verify_size != 0) {
        const bool same = payload->size() == verify_size &&
                          std::all_of(payload->begin(), payload->end(),
                                      [&](uint8_t b) { return b == payload->front(); });
        bad += same ? 0 : 1;
      }
      if (place) {
        std::memcpy(target.data() + target_at, payload->data(), payload->size());
        target_at += (payload->size() + 63) & ~size_t{63};  // back to back, as packets land
        if (target_at + kFrameBytes > target.size()) target_at = 0;
      }
      bytes += payload->size();
      ++frames;
    }
    xsk.rx.consumer->store(at, std::memory_order_release);
    xsk.publish_fill();
    last = seconds_now();
  }
  close(link);
  const double span = last > first ? last - first : 0;
  std::printf(
      "{\"role\":\"xdp_receiver\",\"frames\":%lu,\"bytes\":%lu,\"bad\":%lu,\"other\":%lu,"
      "\"seconds\":%.6f,\"mbytes_per_sec\":%.2f,\"mframes_per_sec\":%.3f}\n",
      static_cast<unsigned long>(frames), static_cast<unsigned long>(bytes),
      static_cast<unsigned long>(bad), static_cast<unsigned long>(other), span,
      span > 0 ? static_cast<double>(bytes) / span / 1e6 : 0,
      span > 0 ? static_cast<double>(frames) / span / 1e6 : 0);
  return frames > 0 && bad == 0 ? 0 : 1;
}

// Sends for `seconds`: up to 64 descriptors per kick (sendto), completions reaped each turn.
int send(const std::string& dev, const Flow& flow, double seconds) {
  XdpSocket xsk(dev);
  std::vector<uint64_t> free_frames;
  uint32_t frame_len = 0;
  for (uint32_t f = 0; f < kFrames; ++f) {
    frame_len = build_frame(xsk.umem + size_t{f} * kFrameBytes, flow, static_cast<uint8_t>(f));
    free_frames.push_back(uint64_t{f} * kFrameBytes);
  }
  uint32_t tx_at = 0, completion_at = 0;
  uint64_t sent = 0, kicks = 0;
  const double start = seconds_now();
  double now = start;
  while (now < start + seconds) {
    const uint32_t done = xsk.completion.producer->load(std::memory_order_acquire);
    for (; completion_at != done; ++completion_at, ++sent) {
      free_frames.push_back(xsk.completion[completion_at]);
    }
    xsk.completion.consumer->store(completion_at, std::memory_order_release);
    const uint32_t room = kRingSize - (tx_at - xsk.tx.consumer->load(std::memory_order_acquire));
    const uint32_t n = std::min({room, static_cast<uint32_t>(free_frames.size()), 64u});
    for (uint32_t i = 0; i < n; ++i) {
      xsk.tx[tx_at++] = xdp_desc{free_frames.back(), frame_len, 0};
      free_frames.pop_back();
    }
    xsk.tx.producer->store(tx_at, std::memory_order_release);
    // Copy mode sends only from a system call (at most 32 frames per socket per call).
    if (sendto(xsk.fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0 && errno != EAGAIN &&
        errno != ENOBUFS && errno != EBUSY) {
      fail("sendto (XDP kick)");
    }
    ++kicks;
    now = seconds_now();
  }
  const double span = now - start;
  // Frames still in the ring when time ran out go too: count them once the kernel is done.
  for (const double stop = now + 0.2; completion_at != tx_at && seconds_now() < stop;) {
    sendto(xsk.fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0);
    const uint32_t done = xsk.completion.producer->load(std::memory_order_acquire);
    sent += done - completion_at;
    completion_at = done;
  }
  std::printf(
      "{\"role\":\"xdp_sender\",\"frames\":%lu,\"kicks\":%lu,\"seconds\":%.6f,"
      "\"mbytes_per_sec\":%.2f,\"mframes_per_sec\":%.3f}\n",
      static_cast<unsigned long>(sent), static_cast<unsigned long>(kicks), span,
      static_cast<double>(sent) * flow.size / span / 1e6, static_cast<double>(sent) / span / 1e6);
  return sent > 0 ? 0 : 1;
}

// One frame in flight, both sides busy-polling their receive ring; the client prints the
// one-way median and p99 (half the round trip), as sockperf ping-pong does.
int ping_pong(const std::string& dev, const Flow& flow, double seconds, bool server) {
  XdpSocket xsk(dev);
  const int link = attach_redirect_program(dev, xsk.fd);
  xsk.fill_frames(kRingSize);  // frames 0..kRingSize-1 receive; the next one sends
  const uint64_t tx_frame = uint64_t{kRingSize} * kFrameBytes;
  const uint32_t frame_len = build_frame(xsk.umem + tx_frame, flow, 0x5a);
  uint32_t tx_at = 0;
  const auto transmit = [&] {
    xsk.tx[tx_at++] = xdp_desc{tx_frame, frame_len, 0};
    xsk.tx.producer->store(tx_at, std::memory_order_release);
    if (sendto(xsk.fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0 && errno != EAGAIN) {
      fail("sendto (XDP kick)");
    }
    // One frame in flight: its completion only returns the same frame.
    xsk.completion.consumer->store(xsk.completion.producer->load(std::memory_order_acquire),
                                   std::memory_order_release);
  };
  const auto arrived = [&](double deadline) {
    for (;;) {
      const uint32_t at = xsk.rx.consumer->load(std::memory_order_relaxed);
      if (xsk.rx.producer->load(std::memory_order_acquire) != at) {
        const xdp_desc& d = xsk.rx[at];
        const bool ours = payload_to(flow.ip.dport, {xsk.umem + d.addr, d.len}).has_value();
        xsk.recycle(d);
        xsk.rx.consumer->store(at + 1, std::memory_order_release);
        xsk.publish_fill();
        if (ours) return true;  // else the link's own traffic (IPv6 ND, MLD)
      }
      if (seconds_now() > deadline) return false;
    }
  };
  std::printf("{\"role\":\"xdp_ping_pong\",\"ready\":true}\n");
  std::fflush(stdout);
  const double start = seconds_now();
  if (server) {
    while (arrived(start + seconds + 10)) transmit();
    close(link);
    return 0;
  }
  std::vector<double> one_way_us;
  uint64_t lost = 0;
  while (seconds_now() < start + seconds) {
    const double t0 = seconds_now();
    transmit();
    if (!arrived(t0 + 0.1)) {
      ++lost;
      continue;
    }
    one_way_us.push_back((seconds_now() - t0) * 1e6 / 2);
  }
  close(link);
  if (one_way_us.empty()) return 1;
  std::sort(one_way_us.begin(), one_way_us.end());
  std::printf(
      "{\"role\":\"xdp_ping_pong\",\"round_trips\":%zu,\"lost\":%lu,\"median_us\":%.3f,"
      "\"p99_us\":%.3f}\n",
      one_way_us.size(), static_cast<unsigned long>(lost), one_way_us[one_way_us.size() / 2],
      one_way_us[one_way_us.size() * 99 / 100]);
  return 0;
}

// `text` as an IPv4 address, stored IPv4-mapped as IpContext keeps it.
bool set_ipv4(const std::string& text, std::array<uint8_t, 16>& out) {
  const std::optional<net::IpAddr> a = net::IpAddr::parse(text);
  if (!a || !a->is_v4()) return false;
  out = a->bytes;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"AF_XDP baseline: raw frames through XDP sockets in copy mode"};
  app.require_subcommand(1);
  std::string dev, dst_mac, src = "10.0.0.1", dst = "10.0.0.2";
  double seconds = 3;
  bool place = false, server = false;
  uint32_t verify_size = 0;
  Flow flow;
  const auto add_flow = [&](CLI::App* c) {
    c->add_option("--dst-mac", dst_mac, "the receiving device's MAC address")->required();
    c->add_option("--src", src, "source IPv4 address");
    c->add_option("--dst", dst, "destination IPv4 address");
    c->add_option("--port", flow.ip.dport, "UDP destination port");
    c->add_option("--size", flow.size, "UDP payload bytes per frame")
        ->check(CLI::Range(1u, kFrameBytes - kHeaders));
  };
  CLI::App* rx = app.add_subcommand("receive", "receive for --seconds after the first frame");
  CLI::App* tx = app.add_subcommand("send", "send for --seconds");
  CLI::App* pp = app.add_subcommand("ping-pong", "one frame in flight; prints one-way latency");
  for (CLI::App* c : {rx, tx, pp}) {
    c->add_option("--dev", dev, "the device (queue 0)")->required();
    c->add_option("--seconds", seconds, "how long")->check(CLI::PositiveNumber);
  }
  rx->add_option("--port", flow.ip.dport, "the UDP port counted (other frames are not)");
  rx->add_flag("--place", place, "copy each payload into a 64 MiB target, as a driver would");
  rx->add_option("--verify", verify_size, "check each frame: this payload size, one byte");
  add_flow(tx);
  add_flow(pp);
  pp->add_flag("--server", server, "echo frames back (run it first)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (rx->parsed()) return receive(dev, seconds, flow.ip.dport, place, verify_size);
    if (std::sscanf(dst_mac.c_str(), "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &flow.dst_mac[0],
                    &flow.dst_mac[1], &flow.dst_mac[2], &flow.dst_mac[3], &flow.dst_mac[4],
                    &flow.dst_mac[5]) != ETH_ALEN ||
        !set_ipv4(src, flow.ip.src) || !set_ipv4(dst, flow.ip.dst)) {
      std::fprintf(stderr, "xdp_pair: --dst-mac wants aa:bb:cc:dd:ee:ff, --src/--dst IPv4\n");
      return 2;
    }
    if (tx->parsed()) return send(dev, flow, seconds);
    return ping_pong(dev, flow, seconds, server);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xdp_pair: %s\n", e.what());
    return 1;
  }
}
