#include "net/udp_device.hpp"

#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/ppoll_timeout.hpp"
#include "fault/impair_spec.hpp"
#include "net/cc_env.hpp"
#include "net/impaired_packet_io.hpp"
#include "net/recovery_env.hpp"
#include "telemetry/device_telemetry.hpp"
#include "wire/icrc.hpp"

namespace uroce::net {

// ---------------------------------------------------------------------------------------
// UdpPacketIo

UdpPacketIo::UdpPacketIo(std::vector<std::unique_ptr<UdpPort>> ports, uint16_t udp_port,
                         std::shared_ptr<PathErrorLog> path_log, std::unique_ptr<RxRing> ring)
    : ports_(std::move(ports)),
      udp_port_(udp_port),
      path_log_(std::move(path_log)),
      ring_(std::move(ring)),
      ring_in_use_(ring_ != nullptr),
      ring_markers_passed_(ports_.size(), 0),
      port_read_in_pass_(ports_.size(), 0),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      rx_poll_(ports_.size()) {}

UdpPacketIo::~UdpPacketIo() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

UdpPort* UdpPacketIo::port_for(const std::array<uint8_t, 16>& src) const {
  for (const auto& p : ports_) {
    if (wire::same_address(p->local().bytes, src)) return p.get();
  }
  return nullptr;
}

bool UdpPacketIo::can_send_from(const device::Gid& source) const {
  return port_for(source) != nullptr;
}

device::PathReport UdpPacketIo::path_report(const device::Gid& peer) const {
  if (!path_log_) {
    device::PathReport none;
    none.udp_port = udp_port_;
    return none;
  }
  IpAddr a;
  a.bytes = peer;
  return path_log_->report(a, udp_port_);
}

device::IoCounters UdpPacketIo::io_counters() const {
  device::IoCounters c = path_log_ ? path_log_->totals() : device::IoCounters{};
  if (ring_) {
    c.rx_discards += ring_->rx_discards();
    c.rx_ring_datagrams = ring_->datagrams_seen();
    c.rx_ring_marker_timeouts = ring_->marker_timeouts_seen();
    c.rx_ring_given_back = ring_in_use_.load(std::memory_order_relaxed) ? 0 : 1;
  }
  for (const auto& p : ports_) {
    c.rx_discards += p->rx_discards();
    c.rx_misdelivered += p->rx_misdelivered();
    c.rx_no_owner += p->rx_no_owner();
  }
  return c;
}

void UdpPacketIo::fill_meta(const RxDatagram& d, device::RxPacket& p) const {
  // Field by field, every one: `p.meta = PacketMeta{}` first made GCC build a zeroed
  // temporary and copy it with loads overlapping its narrower stores, a store-forwarding
  // stall per packet received (finish_packet had the same on the send side).
  p.len = d.len;
  p.meta.ip = d.ip;
  if (p.meta.ip.dport == udp_port_) p.meta.ip.dport = kRoceV2Port;
  p.meta.tos = d.tos;
  p.meta.ttl = d.ttl;
  p.meta.ip_id_known = false;
}

size_t UdpPacketIo::read_port(size_t idx, std::span<device::RxPacket> out) {
  if (!ring_in_use_.load(std::memory_order_relaxed)) {
    return read_port_once(idx, out, UdpPort::kMaxBurst);
  }
  // Ring mode: one receive message per port and pass. One at a time, because what the
  // ring holds after a large message's marker must wait for that message, and what
  // follows it on the socket must wait for its own marker; once per pass, because the
  // datagrams handed out lie in the port's memory until its next receive.
  if (port_read_in_pass_[idx] != 0) return 0;
  port_read_in_pass_[idx] = 1;
  return read_port_once(idx, out, 1);
}

size_t UdpPacketIo::read_port_once(size_t idx, std::span<device::RxPacket> out,
                                   size_t max_messages) {
  const size_t room = std::min(out.size(), rx_scratch_.size());
  for (size_t i = 0; i < room; ++i) rx_scratch_[i].buf = out[i].buf;
  const size_t n =
      ports_[idx]->recv_burst(std::span<RxDatagram>(rx_scratch_.data(), room), max_messages);
  for (size_t i = 0; i < n; ++i) {
    const RxDatagram& d = rx_scratch_[i];
    device::RxPacket& p = out[i];
    // A UDP GRO datagram stays where the port received it (valid until the next rx_burst:
    // the device is done with it by then). Otherwise recv_burst may have dropped datagrams
    // in between: copy from the slot whose buffer the datagram actually landed in, which
    // is slot i only if nothing was dropped.
    p.data = d.in_port ? d.buf.data() : nullptr;
    if (!d.in_port && d.buf.data() != p.buf.data()) {
      std::memcpy(p.buf.data(), d.buf.data(), d.len);
    }
    fill_meta(d, p);  // a socket does not tell the IPv4 ID: ip_id_known stays false
  }
  return n;
}

size_t UdpPacketIo::read_ring(std::span<device::RxPacket> out) {
  const size_t room = std::min(out.size(), rx_scratch_.size());
  const size_t n = ring_->read(std::span<RxDatagram>(rx_scratch_.data(), room));
  for (size_t i = 0; i < n; ++i) {
    const RxDatagram& d = rx_scratch_[i];
    device::RxPacket& p = out[i];
    p.data = d.buf.data();  // in a ring frame, returned at the next rx_burst (release())
    fill_meta(d, p);
    p.meta.ip_id_known = d.ip_id_known;
  }
  return n;
}

bool UdpPacketIo::pass_ring_marker(std::span<device::RxPacket> out, size_t& total) {
  const wire::IpContext& ip = ring_->marker_ip();
  size_t idx = 0;
  while (idx < ports_.size() && ports_[idx]->local().bytes != ip.dst) ++idx;
  if (idx == ports_.size()) {  // the filter knows only our addresses: cannot happen
    ring_->pass_marker(false);
    return true;
  }
  auto owed = [&] {
    return ports_[idx]->counters().rx_ring_large_messages > ring_markers_passed_[idx];
  };
  bool found_empty = false;  // the socket was asked and had nothing at all
  if (!owed()) {
    const bool asked = port_read_in_pass_[idx] == 0;
    const size_t n = read_port(idx, out.subspan(total));
    total += n;
    found_empty = asked && n == 0 && !ports_[idx]->has_pending();
  }
  if (owed()) {
    ++ring_markers_passed_[idx];
    ring_->pass_marker(false);
    ring_marker_wait_since_ = {};
    return true;
  }
  // Not on the socket yet: the kernel fills the ring frame first, then queues the message
  // to the socket. One the socket dropped (its buffer full) never comes: once the socket has
  // been found empty kRingMarkerPatience after the first look, the ring goes on without it
  // (the engine recovers lost packets), and the count starts over from what the socket
  // delivered. Time alone proves nothing: this thread may have been off the CPU.
  const auto now = std::chrono::steady_clock::now();
  if (ring_marker_wait_since_ == std::chrono::steady_clock::time_point{}) {
    ring_marker_wait_since_ = now;
  } else if (found_empty && now - ring_marker_wait_since_ >= kRingMarkerPatience) {
    ring_markers_passed_[idx] = ports_[idx]->counters().rx_ring_large_messages;
    ring_->pass_marker(true);
    ring_marker_wait_since_ = {};
    return true;
  }
  return false;
}

void UdpPacketIo::give_back_ring() {
  const int refused = ring_->stop_taking();
  ring_->refresh_drops();  // for the message below
  for (auto& p : ports_) {
    if (const int err = p->keep_ring_data(); err != 0) {
      std::fprintf(stderr,
                   "uroce: cannot give UDP port %u its data back from the receive ring: %s\n",
                   static_cast<unsigned>(udp_port_), std::strerror(err));
    }
  }
  std::fprintf(stderr,
               "uroce: the receive ring (UROCE_RX_RING=1) had no free frame for %llu "
               "datagram(s): this load is more than it holds (its QPs' windows), so the device "
               "reads its UDP sockets from now on (unset UROCE_RX_RING for such loads)%s\n",
               static_cast<unsigned long long>(ring_->rx_discards()),
               refused != 0 ? "; the ring could not be stopped and still costs a copy" : "");
}

void UdpPacketIo::finish_ring() {
  for (auto& p : ports_) p->forget_ring();
  ring_in_use_.store(false, std::memory_order_relaxed);
  // The ring object stays for its counters (other threads read them); its frames go. A
  // failure keeps them mapped, which costs memory only.
  (void)ring_->free_frames();
}

size_t UdpPacketIo::rx_burst_ring(std::span<device::RxPacket> out) {
  ring_->release();  // the device is done with the last pass's datagrams
  if (ring_->stopped() && ring_->drained()) {
    finish_ring();
    return rx_burst(out);
  }
  std::fill(port_read_in_pass_.begin(), port_read_in_pass_.end(), 0);
  size_t total = 0;
  // The rest of a message a port handed out in part arrived before anything the ring holds
  // now: it goes first.
  for (size_t idx = 0; idx < ports_.size() && total < out.size(); ++idx) {
    if (ports_[idx]->has_pending()) total += read_port(idx, out.subspan(total));
  }
  while (total < out.size()) {
    total += read_ring(out.subspan(total));
    if (!ring_->at_marker() || total == out.size()) break;
    // A message too large for a frame: read it from its socket before what follows it.
    if (!pass_ring_marker(out, total)) break;
  }
  // An overflow lost datagrams that go-back-N then resends into the same full ring: with
  // many QPs (each keeps up to 128 packets in flight, each GSO message a frame or a marker)
  // that became a collapse, 75-88 % of the packets sent being resends. The sockets' buffers
  // hold every window (UdpPortConfig::rcvbuf_bytes), so the ring hands over to them.
  if (!ring_->stopped() && ring_->overflowed()) give_back_ring();
  // The sockets carry what the ring leaves (QP1's CM MADs, the group's probes, GSO messages
  // larger than a frame): read on every pass while they deliver, else on the quiet-look
  // schedule of a second socket (full_look_due), so that an empty poll costs no system call.
  const bool any_pending = rx_pending_.load(std::memory_order_relaxed);
  if (total == out.size() || (!rx_sockets_hot_ && !any_pending && !full_look_due() &&
                              !rx_full_check_.exchange(false, std::memory_order_relaxed))) {
    ++rx_hot_passes_;
    wake_if_pending();
    return total;
  }
  rx_hot_passes_ = 0;
  bool unused = false;
  const size_t from_sockets = read_all_ports(out.subspan(total), &unused);
  rx_sockets_hot_ = from_sockets > 0;
  note_full_look(from_sockets > 0);
  wake_if_pending();
  return total + from_sockets;
}

size_t UdpPacketIo::rx_burst(std::span<device::RxPacket> out) {
  if (ring_in_use_.load(std::memory_order_relaxed)) return rx_burst_ring(out);
  const size_t n_ports = ports_.size();
  // Only rx_burst changes what a port holds, and the last one recorded it.
  const bool any_pending = rx_pending_.load(std::memory_order_relaxed);
  // Several sockets (an IPv4 and an IPv6 address, say), but traffic usually on one: read
  // that one directly, and look at all of them (a ppoll, then a recvmmsg for each readable
  // one) only now and then (full_look_due) and after wait() saw a socket readable. A system
  // call costs a microsecond or more on a VM, and a busy-polling ping-pong would pay ppoll +
  // recvmmsg per message against one recvmmsg here.
  if (n_ports > 1 && !any_pending && rx_hot_port_ < n_ports && !full_look_due() &&
      !rx_full_check_.exchange(false, std::memory_order_relaxed)) {
    ++rx_hot_passes_;
    const size_t n = read_port(rx_hot_port_, out);
    wake_if_pending();
    return n;
  }
  rx_hot_passes_ = 0;
  bool quiet_delivered = false;  // a socket other than the one read directly had something
  const size_t total = read_all_ports(out, &quiet_delivered);
  if (n_ports > 1) note_full_look(quiet_delivered);
  wake_if_pending();
  return total;
}

size_t UdpPacketIo::read_all_ports(std::span<device::RxPacket> out, bool* quiet_delivered) {
  const size_t n_ports = ports_.size();
  const size_t hot_before = rx_hot_port_;
  size_t total = 0;
  // One zero-timeout ppoll tells which sockets have something, instead of one empty
  // recvmmsg per socket. POLLERR counts (an ICMP error to read).
  bool check_ready = n_ports > 1;
  if (check_ready) {
    for (size_t k = 0; k < n_ports; ++k) rx_poll_[k] = pollfd{ports_[k]->fd(), POLLIN, 0};
    const timespec zero{};
    if (ppoll(rx_poll_.data(), n_ports, &zero, nullptr) < 0) check_ready = false;
  }
  size_t most = 0;
  for (size_t k = 0; k < n_ports && total < out.size(); ++k) {
    const size_t idx = (next_rx_port_ + k) % n_ports;
    if (check_ready && rx_poll_[idx].revents == 0 && !ports_[idx]->has_pending()) continue;
    // Ring mode: the ring was read before this, and a large message's marker reaches the
    // ring before the message reaches its socket, so a message that came in between belongs
    // after what the ring got meanwhile: its marker reads it (pass_ring_marker). Read here
    // anyway if the ring is empty: then no marker stands for it (its frame was dropped).
    if (ring_in_use_.load(std::memory_order_relaxed) && port_read_in_pass_[idx] == 0 &&
        ports_[idx]->next_is_ring_message() && !ring_->drained()) {
      continue;
    }
    const size_t n = read_port(idx, out.subspan(total));
    if (n > most) {
      most = n;
      rx_hot_port_ = idx;
    }
    if (n > 0 && idx != hot_before) *quiet_delivered = true;
    total += n;
  }
  if (n_ports != 0) next_rx_port_ = (next_rx_port_ + 1) % n_ports;
  return total;
}

bool UdpPacketIo::full_look_due() {
  // Every kFullRxEvery-th pass asks the clock, not every pass once the count is reached: a
  // pass through a receive ring (UROCE_RX_RING) is a memory read, and a clock read (26 ns
  // on kvm-clock) would be a large part of it.
  if (rx_hot_passes_ < kFullRxEvery || rx_hot_passes_ % kFullRxEvery != 0) return false;
  // Passes alone would make a ping-pong pay a ppoll every few messages (the full look was
  // a fifth of the system calls of `uroce perf send_lat` on lo, about 0.7 us one way): a
  // socket that stays quiet is asked less and less often, down to once per kQuietLookMost.
  // That bounds what its first datagram waits while passes run back to back (the device
  // busy with another socket, or an application busy-polling it); the progress thread asleep
  // in wait() watches every socket.
  return rx_quiet_interval_ == Nanos::zero() ||
         std::chrono::steady_clock::now() - rx_last_full_look_ >= rx_quiet_interval_;
}

void UdpPacketIo::note_full_look(bool quiet_delivered) {
  if (quiet_delivered) {
    // Traffic on a second socket, or moved to it: look every few passes again.
    rx_quiet_interval_ = Nanos::zero();
  } else {
    rx_quiet_interval_ = std::clamp(rx_quiet_interval_ * 2, kQuietLookFirst, kQuietLookMost);
  }
  rx_last_full_look_ = std::chrono::steady_clock::now();
}

void UdpPacketIo::wake_if_pending() {
  // The rest of a UDP GRO message that a port read but had no room for, and what a shared
  // port's repair stashed, is on no socket, so no poll would see it: wait() must not sleep
  // on it. The progress thread never calls
  // wait() right after a pass that read something, so only a thread already in wait() while
  // an application thread runs this pass needs the eventfd.
  bool pending = ring_in_use_.load(std::memory_order_relaxed) && ring_->has_pending();
  for (auto& p : ports_) pending = pending || p->has_pending();
  // A store only when it changes: a sequentially consistent store is a locked instruction,
  // and an empty poll of a busy-polling program runs this every pass.
  if (pending != rx_pending_.load(std::memory_order_relaxed)) rx_pending_.store(pending);
  if (pending && in_wait_.load()) wake();
}

size_t UdpPacketIo::tx_burst(std::span<const transport::TxSlot> pkts) {
  size_t done = 0;
  while (done < pkts.size()) {
    const auto& src = pkts[done].meta.ip.src;
    UdpPort* port = port_for(src);
    size_t run = 0;
    while (done + run < pkts.size() && run < tx_scratch_.size() &&
           wire::same_address(pkts[done + run].meta.ip.src, src)) {
      const transport::TxSlot& s = pkts[done + run];
      TxDatagram& d = tx_scratch_[run];
      d.data = std::span<const uint8_t>(s.buf.data(), s.len);
      d.payload = s.payload;
      d.payload_at = s.payload_at;
      d.icrc_writable = true;  // the device's own TX slot
      d.ip = s.meta.ip;
      if (port != nullptr && !port->has_source_port(d.ip.sport)) {
        // The packet will leave from the bound port; the ICRC covers the UDP source port, so
        // re-seal it for the port the peer will see (rare: the per-QP port was taken). One
        // already wrong (UROCE_IMPAIR corrupt=) stays wrong rather than sealing the damage;
        // one whose payload is by reference was sealed by the engine a moment ago.
        if (!s.payload.empty() ||
            wire::verify_icrc_udp(s.meta.ip, s.buf.first(s.len)) != wire::IcrcResult::kBad) {
          wire::IpContext sealed = s.meta.ip;
          sealed.sport = port->port();
          transport::write_slot_icrc(sealed, s);
          d.ip.sport = 0;
        }
      }
      if (d.ip.dport == kRoceV2Port) d.ip.dport = udp_port_;
      d.tos = s.meta.tos;
      d.scope_id = 0;
      ++run;
    }
    if (port == nullptr) {
      // The device checks sources when an AV is set, so this is a packet nobody can send:
      // consume it (the requester's retry/timeout reports the failure).
      done += run;
      continue;
    }
    const size_t sent = port->send_burst(std::span<const TxDatagram>(tx_scratch_.data(), run));
    done += sent;
    if (sent < run) break;  // socket buffer full: backpressure
  }
  return done;
}

int UdpPacketIo::cm_capable(bool on) {
  int rc = 0;
  for (auto& p : ports_) {
    if (int r = p->set_cm_capable(on); r != 0 && rc == 0) rc = r;
  }
  wake_if_pending();  // a steering change may have stashed datagrams (UdpPort::reconcile)
  return rc;
}

int UdpPacketIo::cm_listen(uint64_t service_id, bool on) {
  int rc = 0;
  if (on) {
    rc = listen_everywhere(service_id);
  } else {
    for (auto& p : ports_) p->unlisten_service(service_id);
  }
  wake_if_pending();  // as in cm_capable
  return rc;
}

int UdpPacketIo::listen_everywhere(uint64_t service_id) {
  std::vector<UdpPort*> added;
  for (auto& p : ports_) {
    const auto& listened = p->listened_services();
    if (std::find(listened.begin(), listened.end(), service_id) != listened.end()) continue;
    if (int r = p->listen_service(service_id); r != 0) {
      // All addresses or none: undo the ports this call added it to.
      for (UdpPort* q : added) q->unlisten_service(service_id);
      return r;
    }
    added.push_back(p.get());
  }
  return 0;
}

void UdpPacketIo::maintain() {
  for (auto& p : ports_) p->maintain();
  if (ring_) ring_->refresh_drops();
  // Repairing a shared port's group probes the socket and stashes the datagrams it reads on
  // the way (UdpPort::reconcile): they are on no socket now, so the wait() that follows must
  // not sleep on them.
  wake_if_pending();
}

// No maintain() here: wait() runs outside the device's I/O lock, while an application
// thread may be in rx_burst on the same ports (UdpPort is not thread-safe).
bool UdpPacketIo::wait(Nanos timeout, bool want_write) {
  std::array<pollfd, 65> fds{};
  size_t n = 0;
  fds[n++] = pollfd{.fd = wake_fd_, .events = POLLIN, .revents = 0};
  if (ring_in_use_.load(std::memory_order_relaxed)) {
    fds[n++] = pollfd{.fd = ring_->fd(), .events = POLLIN, .revents = 0};
  }
  const size_t ports_at = n;
  for (auto& p : ports_) {
    if (n == fds.size()) break;
    fds[n++] = pollfd{.fd = p->fd(),
                      .events = static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)),
                      .revents = 0};
  }
  timespec ts{};
  const timespec* tsp = common::ppoll_timeout(timeout, ts);
  in_wait_.store(true);
  if (rx_pending_.load()) {
    // An application thread's pass left GRO datagrams in a port: read them now.
    in_wait_.store(false);
    rx_full_check_.store(true, std::memory_order_relaxed);
    return true;
  }
  const int ready = ppoll(fds.data(), n, tsp, nullptr);
  const int err = errno;
  in_wait_.store(false);
  if (ready < 0) return err != EINTR;
  if (ready == 0) return true;
  // Whatever woke us, the next rx_burst looks at every socket (it may be a quiet one).
  rx_full_check_.store(true, std::memory_order_relaxed);
  if ((fds[0].revents & POLLIN) != 0) {
    uint64_t v = 0;
    while (read(wake_fd_, &v, sizeof v) < 0 && errno == EINTR) {
    }
  }
  // An ICMP error queued by IP_RECVERR keeps POLLERR up until read: read it here, or the
  // progress thread would never sleep.
  for (size_t i = ports_at; i < n; ++i) {
    if ((fds[i].revents & POLLERR) != 0) ports_[i - ports_at]->drain_errors();
  }
  return true;
}

void UdpPacketIo::wake() {
  uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

// ---------------------------------------------------------------------------------------
// open_udp_device

namespace {

std::string mtu_text(uint32_t bytes) {
  return std::to_string(bytes);
}

device::PortInfo port_info_of(const PortGids& pg, uint32_t active_mtu) {
  device::PortInfo p;
  p.port_num = pg.port_num;
  p.netdev = pg.netdev.name;
  p.netdev_mtu = pg.netdev.mtu;
  p.active_mtu = static_cast<transport::Mtu>(ib_mtu_enum(active_mtu));
  const bool up = pg.netdev.admin_up && pg.netdev.running &&
                  (pg.netdev.oper == OperState::kUp || pg.netdev.oper == OperState::kUnknown);
  p.state = up ? device::PortState::kActive : device::PortState::kDown;
  p.speed_mbps = pg.netdev.speed_mbps;
  for (const GidEntry& g : pg.gids) {
    if (g.index >= p.gids.size()) p.gids.resize(g.index + 1);
    p.gids[g.index] = device::GidTableEntry{g.gid, g.netdev};
  }
  return p;
}

struct BindTarget {
  IpAddr addr;
  uint32_t scope_id = 0;
};

}  // namespace

// "" if the progress thread may run on every CPU of `cpus` (ProgressOptions::cpus), else the
// one-line reason: the process's own mask (taskset, cgroup cpusets) bounds what a thread
// of it can be given, and a CPU outside it would leave the thread where it started.
std::string check_progress_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return {};
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    return std::string("UROCE_PROGRESS_CPUS: cannot read this process's CPU affinity: ") +
           std::strerror(errno);
  }
  std::vector<int> mask;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) mask.push_back(c);
  }
  for (const int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed)) {
      return "UROCE_PROGRESS_CPUS: CPU " + std::to_string(c) +
             " is not one this process may run on (" + config::format_cpu_list(mask) +
             "); name CPUs from that list, or widen the process's affinity (taskset)";
    }
  }
  return {};
}

NetResult<std::vector<HostDevice>> discover_host_devices(const std::vector<std::string>& netdevs) {
  auto all = discover_interfaces();
  if (!all) return all.error();
  std::vector<Interface> selected = select_device_netdevs(all.value(), netdevs);
  if (selected.empty()) {
    std::string wanted;
    for (const auto& n : netdevs) wanted += (wanted.empty() ? "" : ",") + n;
    return NetError{ENODEV,
                    (netdevs.empty() ? std::string("no netdev is up with an address")
                                     : "no netdev among [" + wanted + "] is up with an address") +
                        "; host has: " + describe_host_addresses(all.value())};
  }
  return build_host_devices(selected, read_default_route_netdevs());
}

bool apply_env_options(const config::HostOptions& env, UdpDeviceOptions& options,
                       std::string& error) {
  if (env.udp_port) options.udp_port = *env.udp_port;
  if (!env.netdevs.empty()) options.netdevs = env.netdevs;
  for (const std::string& text : env.device_addrs) {
    auto ip = IpAddr::parse(text);
    if (!ip) {
      error = "UROCE_DEVICE_ADDR: '" + text + "' is not an IPv4 or IPv6 address";
      return false;
    }
    options.bind.push_back(*ip);
  }
  if (env.mtu) options.active_mtu = *env.mtu;
  if (env.spin_us) options.progress.spin = std::chrono::microseconds(*env.spin_us);
  if (env.handoff_us) options.progress.app_handoff = std::chrono::microseconds(*env.handoff_us);
  if (env.batch_posts) options.progress.batch_posts = *env.batch_posts;
  if (!env.progress_cpus.empty()) options.progress.cpus = env.progress_cpus;
  return true;
}

NetResult<std::unique_ptr<device::Device>> open_udp_device(const UdpDeviceOptions& options) {
  auto discovered = discover_host_devices(options.netdevs);
  if (!discovered) return discovered.error();
  const HostDevice* chosen = find_host_device(discovered.value(), options.name);
  if (options.name.empty() && !options.bind.empty()) {
    // No name but addresses to bind: the device those addresses belong to, not the first.
    if (const HostDevice* d = find_device_with_gid(discovered.value(), options.bind.front())) {
      chosen = d;
    }
  }
  if (chosen == nullptr) {
    return NetError{ENODEV, "IB device " + options.name + " not found; uroce provides " +
                                device_names(discovered.value())};
  }
  const std::string name = chosen->name;
  std::vector<PortGids> ports = {chosen->port};
  const std::span<const HostDevice> chosen_only(chosen, 1);

  if (options.active_mtu != 0 && ib_mtu_enum(options.active_mtu) == 0) {
    return NetError{EINVAL, "active MTU " + mtu_text(options.active_mtu) +
                                " is not an IB MTU: use 256, 512, 1024, 2048 or 4096"};
  }
  std::vector<device::PortInfo> infos;
  uint32_t engine_mtu = 4096;
  for (const PortGids& pg : ports) {
    uint32_t mtu = pg.active_mtu;
    if (mtu == 0) {
      return NetError{EINVAL, "netdev " + pg.netdev.name + " has MTU " + mtu_text(pg.netdev.mtu) +
                                  ", too small for RoCE v2 (needs >= 336: 256 + 80 header "
                                  "bytes); raise it with `ip link set " +
                                  pg.netdev.name + " mtu 1500` or leave the netdev out"};
    }
    if (options.active_mtu != 0) {
      if (options.active_mtu > mtu) {
        return NetError{EINVAL, "active MTU " + mtu_text(options.active_mtu) + " exceeds what " +
                                    pg.netdev.name + " (MTU " + mtu_text(pg.netdev.mtu) +
                                    ") carries: at most " + mtu_text(mtu)};
      }
      mtu = options.active_mtu;
    }
    engine_mtu = std::min(engine_mtu, mtu);
    infos.push_back(port_info_of(pg, mtu));
  }

  // Addresses to bind: the given ones (each must be a GID of the device), or every GID's.
  std::vector<BindTarget> targets;
  if (!options.bind.empty()) {
    for (const IpAddr& a : options.bind) {
      auto loc = find_gid(ports, a);
      if (!loc) {
        return NetError{EADDRNOTAVAIL, "no GID of " + name + " has address " + a.to_string() +
                                           "; choose one of: " + format_gid_table(chosen_only)};
      }
      targets.push_back(BindTarget{a, loc->entry->scope_id});
    }
  } else {
    for (const PortGids& pg : ports) {
      for (const GidEntry& g : pg.gids) {
        IpAddr a;
        a.bytes = g.gid;
        bool seen = std::any_of(targets.begin(), targets.end(),
                                [&](const BindTarget& t) { return t.addr == a; });
        if (!seen) targets.push_back(BindTarget{a, g.scope_id});
      }
    }
  }

  if (std::string cpus_error = check_progress_cpus(options.progress.cpus); !cpus_error.empty()) {
    return NetError{EINVAL, cpus_error};
  }
  std::string gso_error;
  const bool gso = config::env_flag("UROCE_GSO", options.gso, gso_error);
  if (!gso_error.empty()) return NetError{EINVAL, gso_error};
  std::string gro_error;
  const bool gro = config::env_flag("UROCE_GRO", options.gro, gro_error);
  if (!gro_error.empty()) return NetError{EINVAL, gro_error};

  std::string ring_error;
  const bool use_ring = config::env_flag("UROCE_RX_RING", options.rx_ring, ring_error);
  if (!ring_error.empty()) return NetError{EINVAL, ring_error};
  if (use_ring && !gro) {
    return NetError{
        EINVAL, "UROCE_RX_RING=1 needs UDP GRO on the sockets: unset UROCE_GRO=0 (or the ring)"};
  }

  std::vector<std::unique_ptr<UdpPort>> udp_ports;
  auto path_log = std::make_shared<PathErrorLog>();
  int slot = options.slot;
  for (const BindTarget& t : targets) {
    UdpPortConfig cfg;
    cfg.local = t.addr;
    cfg.scope_id = t.scope_id;
    cfg.port = options.udp_port;
    cfg.share = options.share;
    cfg.slot = slot;
    cfg.registry_dir = options.registry_dir;
    cfg.per_qp_source_port = options.per_qp_source_port;
    cfg.gso = gso;
    cfg.gro = gro;
    cfg.path_log = path_log.get();
    auto opened = UdpPort::open(cfg);
    if (!opened) {
      if (options.bind.empty() && opened.error().code == EADDRNOTAVAIL) continue;
      return opened.error();
    }
    // Every address must steer this device's QPNs here: the same slot everywhere.
    if (opened.value()->slot()) slot = static_cast<int>(*opened.value()->slot());
    udp_ports.push_back(std::move(opened.value()));
  }
  if (udp_ports.empty()) {
    return NetError{EADDRNOTAVAIL, "could not bind UDP port " + std::to_string(options.udp_port) +
                                       " on any address of " + name +
                                       "; give bind addresses explicitly"};
  }

  std::unique_ptr<RxRing> ring;
  if (use_ring) {
    RxRingConfig rc;
    rc.port = options.udp_port;
    for (const auto& p : udp_ports) rc.addrs.push_back(p->local());
    rc.slot = udp_ports.front()->slot();
    rc.ifindexes.push_back(chosen->port.netdev.ifindex);
    if (const unsigned lo = if_nametoindex("lo");
        lo != 0 && static_cast<int>(lo) != rc.ifindexes[0]) {
      rc.ifindexes.push_back(static_cast<int>(lo));
    }
    auto opened = RxRing::open(rc);
    if (!opened) return opened.error();
    ring = std::move(opened.value());
    for (const auto& p : udp_ports) {
      if (const int err = p->hand_data_to_ring(rc.ifindexes); err != 0) {
        return NetError{err, "UROCE_RX_RING: cannot hand UDP " +
                                 endpoint_string(p->local(), p->port()) + " over to the ring: " +
                                 (err == EOPNOTSUPP ? std::string("the kernel has no UDP GRO")
                                                    : std::string(std::strerror(err)))};
      }
    }
  }

  device::DeviceConfig config;
  config.name = name;
  config.node_guid = chosen->node_guid;
  config.ports = std::move(infos);
  config.progress = options.progress;
  config.engine.limits = options.limits;
  config.engine.limits.phys_port_cnt = static_cast<uint8_t>(config.ports.size());
  config.engine.active_mtu = static_cast<transport::Mtu>(ib_mtu_enum(engine_mtu));
  const QpnRange range = udp_ports.front()->qpn_range();
  config.engine.qpn_base = range.base;
  config.engine.qpn_count = std::min(range.count, options.limits.max_qp);
  uint64_t seed = options.seed;
  // 0: 64 bits from the kernel's CSPRNG; the keys' round keys come from this seed, so it
  // must not be guessable from the time and the pid (docs/robustness.md "R_Keys").
  while (seed == 0) {
    if (getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
      timespec ts{};
      clock_gettime(CLOCK_MONOTONIC, &ts);
      seed = static_cast<uint64_t>(ts.tv_nsec) << 20 ^ static_cast<uint64_t>(getpid());
    }
  }
  config.engine.seed = seed;
  // DCQCN starts at the port's speed (rpg_max_rate in UROCE_DCQCN/--dcqcn overrides it).
  config.engine.cc.line_rate_mbps = line_rate_from_speed(config.ports.front().speed_mbps);
  if (std::string cc_error = cc_config_from_env(config.engine.cc); !cc_error.empty()) {
    return NetError{EINVAL, cc_error};
  }
  if (std::string cc_error = apply_cc_override(options.cc, config.engine.cc); !cc_error.empty()) {
    return NetError{EINVAL, cc_error};
  }
  if (std::string rc_error = recovery_config_from_env(config.engine.recovery); !rc_error.empty()) {
    return NetError{EINVAL, rc_error};
  }

  fault::ImpairSpec impair;
  if (const char* v = std::getenv("UROCE_IMPAIR"); v != nullptr) {
    if (std::string e = fault::parse_impair_spec("UROCE_IMPAIR", v, impair); !e.empty()) {
      return NetError{EINVAL, e};
    }
  }

  std::string telemetry_error;
  config.observer = telemetry::observer_from_env(name, &telemetry_error, options.udp_port);
  if (!config.observer && !telemetry_error.empty()) return NetError{EINVAL, telemetry_error};

  std::unique_ptr<device::PacketIo> io = std::make_unique<UdpPacketIo>(
      std::move(udp_ports), options.udp_port, std::move(path_log), std::move(ring));
  if (impair.active()) {
    // Without seed= each device draws its own decisions (from the engine's random seed).
    io = std::make_unique<ImpairedPacketIo>(std::move(io), impair, seed ^ 0x1A3B5C7D9E0F2468ull);
  }
  return std::make_unique<device::Device>(std::move(config), std::move(io));
}

}  // namespace uroce::net
