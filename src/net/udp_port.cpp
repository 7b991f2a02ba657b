#include "net/udp_port.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>

#include "common/ppoll_timeout.hpp"
#include "net/netdev.hpp"
#include "net/rx_ring.hpp"
#include "wire/byte_order.hpp"

namespace uroce::net {
namespace {

int64_t mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int read_sysctl_int(const char* path) {
  std::ifstream in(path);
  long long v = -1;
  in >> v;
  return static_cast<int>(v);
}

uint64_t random_token() {
  std::random_device rd;
  uint64_t t = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(mono_ns());
  return t == 0 ? 1 : t;
}

// Sets SO_{RCV,SND}BUF and reads back what the kernel granted (it doubles the value for its
// own bookkeeping and caps the request at net.core.{r,w}mem_max). If capped, tries the
// *FORCE variant, which works with CAP_NET_ADMIN and fails harmlessly otherwise.
int set_buffer(int fd, int opt, int force_opt, int bytes) {
  setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
  int got = 0;
  socklen_t len = sizeof got;
  getsockopt(fd, SOL_SOCKET, opt, &got, &len);
  if (got / 2 < bytes && setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) == 0) {
    len = sizeof got;
    getsockopt(fd, SOL_SOCKET, opt, &got, &len);
  }
  return got / 2;
}

// The size of the datagrams a received UDP GRO message of `len` bytes holds (its UDP_GRO
// cmsg; the last may be shorter); `len` for a plain datagram.
size_t gro_segment_size(const msghdr& h, size_t len) {
  for (const cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&h), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int seg = 0;
      std::memcpy(&seg, CMSG_DATA(c), sizeof seg);
      if (seg > 0 && static_cast<size_t>(seg) < len) return static_cast<size_t>(seg);
    }
  }
  return len == 0 ? 1 : len;
}

}  // namespace

UdpPort::UdpPort(const UdpPortConfig& config) : config_(config), port_(config.port) {
  family_ = config.local.is_v4() ? AF_INET : AF_INET6;
}

NetResult<std::unique_ptr<UdpPort>> UdpPort::open(const UdpPortConfig& config) {
  std::unique_ptr<UdpPort> port(new UdpPort(config));
  auto r = port->setup();
  if (!r) return r.error();
  return port;
}

NetResult<bool> UdpPort::create_socket() {
  fd_ = socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    int err = errno;
    return NetError{err, std::string("socket() failed: ") + std::strerror(err)};
  }
  const int one = 1;
  if (config_.share && setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    int err = errno;
    return NetError{err, std::string("SO_REUSEPORT failed: ") + std::strerror(err)};
  }
  buffers_.rcvbuf_requested = config_.rcvbuf_bytes;
  buffers_.sndbuf_requested = config_.sndbuf_bytes;
  buffers_.rcvbuf_effective = set_buffer(fd_, SO_RCVBUF, SO_RCVBUFFORCE, config_.rcvbuf_bytes);
  buffers_.sndbuf_effective = set_buffer(fd_, SO_SNDBUF, SO_SNDBUFFORCE, config_.sndbuf_bytes);
  buffers_.rcvbuf_capped = buffers_.rcvbuf_effective < config_.rcvbuf_bytes;
  buffers_.sndbuf_capped = buffers_.sndbuf_effective < config_.sndbuf_bytes;
  if (buffers_.rcvbuf_capped || buffers_.sndbuf_capped) {
    std::string what, fix;
    auto add = [&](const char* opt, int got, int want, const char* sysctl) {
      if (got >= want) return;
      const std::string max =
          std::to_string(read_sysctl_int((std::string("/proc/sys/") + sysctl).c_str()));
      std::string name = sysctl;
      std::replace(name.begin(), name.end(), '/', '.');
      what += std::string(what.empty() ? "" : ", ") + opt + " " + std::to_string(got) + " of " +
              std::to_string(want) + " bytes (" + name + "=" + max + ")";
      fix += " " + name + "=" + std::to_string(want);
    };
    add("SO_RCVBUF", buffers_.rcvbuf_effective, config_.rcvbuf_bytes, "net/core/rmem_max");
    add("SO_SNDBUF", buffers_.sndbuf_effective, config_.sndbuf_bytes, "net/core/wmem_max");
    buffers_.note = "socket buffer capped: " + what +
                    "; bursts may be dropped; raise with `sysctl -w" + fix + "`";
  }
  // DF on every packet. For an unconnected socket Linux then writes IP ID 0 (measured, see
  // docs/networking.md), which is what the ICRC of our packets assumes.
  if (family_ == AF_INET) {
    const int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    setsockopt(fd_, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
    setsockopt(fd_, IPPROTO_IP, IP_RECVTTL, &one, sizeof one);
    setsockopt(fd_, IPPROTO_IP, IP_RECVERR, &one, sizeof one);
  } else {
    const int pmtu = IPV6_PMTUDISC_DO;
    setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    setsockopt(fd_, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
    setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
    setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
    setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one, sizeof one);
    setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVERR, &one, sizeof one);
  }
  // Each datagram then says how many the kernel dropped at this socket (rx_discards).
  setsockopt(fd_, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
  if (config_.gro) {
    gro_ = setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
    if (gro_) gro_area_ = std::make_unique_for_overwrite<uint8_t[]>(kGroEntries * kGroBytes);
  }
  // A kernel without UDP_SEGMENT (before 4.18) would ignore the cmsg and send one huge
  // datagram: use GSO only where the option is known.
  if (config_.gso) {
    int seg = 0;
    socklen_t seg_len = sizeof seg;
    gso_ = getsockopt(fd_, SOL_UDP, UDP_SEGMENT, &seg, &seg_len) == 0;
  }
  SockAddr local = SockAddr::make(config_.local, config_.port, config_.scope_id);
  if (bind(fd_, local.get(), local.len) != 0) return bind_error(errno);
  if (config_.port == 0) {
    SockAddr got;
    got.len = sizeof got.storage;
    if (getsockname(fd_, got.get(), &got.len) == 0) {
      if (auto split = SockAddr::split(got.get())) port_ = split->second;
    }
  }
  return true;
}

NetError UdpPort::bind_error(int err) const {
  const std::string ep = endpoint_string(config_.local, config_.port);
  if (err == EADDRINUSE) {
    return NetError{
        err, "UDP " + ep +
                 " is in use by a socket that is not a uroce member of this user's group (another "
                 "program, another user's uroce, or the kernel's Soft-RoCE, which binds *:" +
                 std::to_string(config_.port) +
                 " while an rxe device exists); see `ss -ulpn 'sport = :" +
                 std::to_string(config_.port) +
                 "'` and `rdma link` (`rdma link delete rxe0` frees it), or run uroce in its own "
                 "network "
                 "namespace"};
  }
  if (err == EACCES || err == EPERM) {
    return NetError{
        err,
        "binding UDP " + ep + " was refused (" + std::strerror(err) +
            "): ports below net.ipv4.ip_unprivileged_port_start need CAP_NET_BIND_SERVICE, and an "
            "LSM (SELinux/AppArmor) or seccomp policy may forbid it"};
  }
  if (err == EADDRNOTAVAIL) {
    std::string host = "(unknown)";
    auto ifs = discover_interfaces();
    if (ifs) host = describe_host_addresses(ifs.value());
    return NetError{
        err, "address " + config_.local.to_string() +
                 " is not assigned to any interface of this host; its addresses are: " + host};
  }
  return NetError{err, "binding UDP " + ep + " failed: " + std::strerror(err)};
}

NetResult<bool> UdpPort::setup() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    int err = errno;
    return NetError{err, std::string("eventfd failed: ") + std::strerror(err)};
  }
  if (!config_.share) return create_socket();
  if (config_.port == 0) {
    // The registry is keyed by port number; an ephemeral port has no group to share.
    return NetError{
        EINVAL, "a shared UdpPort needs a fixed UDP port (port 0 only works with share = false)"};
  }

  auto reg = RegistryFile::open(config_.registry_dir, config_.port);
  if (!reg) return reg.error();
  registry_.emplace(std::move(reg.value()));
  token_ = random_token();
  // Bind, registry update and program attach happen under the lock, so the registry's idea of
  // positions and the kernel's socks[] change together.
  auto lock = registry_->lock();
  RegistryState state = registry_->load();
  prune_dead_members(state);
  auto slot = choose_slot(state, config_.local, config_.slot);
  if (!slot) {
    return NetError{EBUSY,
                    config_.slot >= 0
                        ? "QPN slot " + std::to_string(config_.slot) + " on " +
                              endpoint_string(config_.local, config_.port) +
                              " is taken by another uroce process (see " + registry_->path() + ")"
                        : "all " + std::to_string(kSlotCount) + " QPN slots on " +
                              endpoint_string(config_.local, config_.port) +
                              " are taken by live uroce processes (see " + registry_->path() + ")"};
  }
  auto created = create_socket();
  if (!created) {
    registry_->store(state);  // keep the pruning
    return created.error();
  }
  slot_ = *slot;
  qpn_range_ = qpn_range_of_slot(*slot);
  join_group_locked(state);
  registry_->store(state);
  last_prune_ns_ = mono_ns();
  return true;
}

void UdpPort::join_group_locked(RegistryState& state) {
  RegistryMember me;
  me.pid = getpid();
  me.start_time = process_start_time(me.pid);
  me.token = token_;
  me.slot = *slot_;
  me.addr = config_.local;
  // bind() appended our socket to the kernel's array.
  me.position = static_cast<uint32_t>(members_on(state, config_.local).size());
  me.verified_epoch = state.epoch;
  state.members.push_back(me);
  position_ = me.position;
  attach_program(state);
  remember_group(state);
}

int UdpPort::attach_program(const RegistryState& state) {
  std::vector<SteeringEntry> entries;
  std::vector<CmListenerEntry> listeners;
  for (const RegistryMember& m : members_on(state, config_.local)) {
    entries.push_back({m.slot, m.position, m.cm_capable});
    for (uint64_t service : m.listens) listeners.push_back({service, m.position});
  }
  std::vector<sock_filter> prog = build_steering_program(entries, listeners);
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  last_attach_error_ =
      setsockopt(fd_, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fprog, sizeof fprog) == 0 ? 0 : errno;
  return last_attach_error_;
}

void UdpPort::remember_group(const RegistryState& state) {
  slot_owned_by_other_.fill(false);
  services_of_others_.clear();
  for (const RegistryMember& m : members_on(state, config_.local)) {
    if (m.token == token_) continue;
    slot_owned_by_other_[m.slot] = true;
    services_of_others_.insert(m.listens.begin(), m.listens.end());
  }
  watch_members(state);
}

void UdpPort::watch_members(const RegistryState& state) {
  std::unordered_map<pid_t, int> keep;
  const pid_t self = getpid();
  unwatched_members_ = false;
  for (const RegistryMember& m : state.members) {
    if (m.pid == self || keep.count(m.pid) != 0) continue;
    if (auto it = member_pidfds_.find(m.pid); it != member_pidfds_.end()) {
      keep.emplace(m.pid, it->second);
      member_pidfds_.erase(it);
      continue;
    }
    // pidfd_open (Linux 5.3) needs no privilege. Checked against the start time after opening,
    // so a recycled pid is not watched in place of the member.
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, m.pid, 0));
    if (fd < 0) {
      unwatched_members_ = true;
      continue;
    }
    if (!process_alive(m.pid, m.start_time)) {
      close(fd);
      unwatched_members_ = true;  // gone already: the next prune takes it out
      continue;
    }
    keep.emplace(m.pid, fd);
  }
  for (auto& [pid, fd] : member_pidfds_) close(fd);
  member_pidfds_ = std::move(keep);
}

bool UdpPort::a_watched_member_exited() const {
  // On the stack, a chunk at a time: a busy device asks up to once a millisecond.
  std::array<pollfd, kSlotCount> fds{};
  size_t n = 0;
  for (const auto& [pid, fd] : member_pidfds_) {
    fds[n++] = {fd, POLLIN, 0};
    if (n == fds.size()) {
      if (poll(fds.data(), n, 0) > 0) return true;
      n = 0;
    }
  }
  return n > 0 && poll(fds.data(), n, 0) > 0;
}

std::optional<uint32_t> UdpPort::probe_position(size_t group_size) {
  ++counters_.reuseport_probes;
  int probe_fd = socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (probe_fd < 0) return std::nullopt;
  SockAddr from = SockAddr::make(config_.local, 0, config_.scope_id);
  SockAddr to = SockAddr::make(config_.local, port_, config_.scope_id);
  std::optional<uint32_t> found;
  int hits = 0;
  if (bind(probe_fd, from.get(), from.len) == 0) {
    for (size_t k = 0; k < group_size && k < 256; ++k) {
      auto probe = make_probe(static_cast<uint8_t>(k), token_);
      sendto(probe_fd, probe.data(), probe.size(), 0, to.get(), to.len);
    }
    // Loopback delivery normally completes inside sendto(); allow a little slack for the rest.
    const int64_t deadline = mono_ns() + 200'000'000;
    std::vector<uint8_t> scratch(65536);
    while (mono_ns() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, hits > 0 ? 1 : 20) <= 0) {
        if (hits > 0) break;
        continue;
      }
      for (;;) {
        iovec iov{scratch.data(), scratch.size()};
        msghdr h{};
        h.msg_name = &names_[0];
        h.msg_namelen = sizeof names_[0];
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = cmsgs_[0].bytes;
        h.msg_controllen = sizeof cmsgs_[0].bytes;
        ssize_t n = recvmsg(fd_, &h, MSG_DONTWAIT);
        if (n < 0) break;
        const std::span<const uint8_t> bytes(scratch.data(), static_cast<size_t>(n));
        auto pr = parse_probe(bytes);
        if (!pr) {
          // Data that arrived meanwhile is kept and handed out by the next recv_burst().
          if (stash_.size() >= kMaxStash) {
            ++counters_.rx_drop_repair;
            continue;
          }
          // A GRO message is stashed as the datagrams it holds.
          RxDatagram meta;
          fill_meta(h, meta);
          const size_t seg = gro_segment_size(h, bytes.size());
          for (size_t off = 0; off < bytes.size() && stash_.size() < kMaxStash; off += seg) {
            Stashed st;
            st.bytes.assign(
                bytes.begin() + static_cast<std::ptrdiff_t>(off),
                bytes.begin() + static_cast<std::ptrdiff_t>(std::min(bytes.size(), off + seg)));
            st.meta = meta;
            st.meta.len = st.bytes.size();
            stash_.push_back(std::move(st));
          }
        } else if (pr->token != token_) {
          ++counters_.rx_probes;
        } else {
          ++hits;
          found = pr->position;
        }
      }
    }
  }
  close(probe_fd);
  // Two of our own probes here means the group is smaller than the registry says (the kernel
  // hashed an out-of-range index to us): no answer rather than a wrong one.
  if (hits != 1) {
    ++counters_.reuseport_probe_failures;
    return std::nullopt;
  }
  return found;
}

void UdpPort::reconcile(bool force_verify, bool new_epoch) {
  if (!registry_ || fd_ < 0) return;
  auto lock = registry_->lock();
  reconcile_locked(force_verify, new_epoch);
}

void UdpPort::reconcile_locked(bool force_verify, bool new_epoch) {
  RegistryState state = registry_->load();
  // Our own QP1 records are ours to say: a change of them (listen_service, or an older uroce
  // that rewrote the file without them) is no repair.
  for (RegistryMember& m : state.members) {
    if (m.token != token_) continue;
    m.cm_capable = cm_capable_;
    m.listens.clear();
    for (uint64_t service : listens_) {
      if (listener_on(state, config_.local, service, token_) == nullptr)
        m.listens.push_back(service);
    }
  }
  const RegistryState before = state;
  prune_dead_members(state);
  last_prune_ns_ = mono_ns();
  auto me = std::find_if(state.members.begin(), state.members.end(),
                         [&](const RegistryMember& m) { return m.token == token_; });
  if (me == state.members.end()) {
    // Our record vanished (the file was deleted or rewritten by hand): re-register; the
    // position is unknown, so verify it.
    RegistryMember m;
    m.pid = getpid();
    m.start_time = process_start_time(m.pid);
    m.token = token_;
    m.slot = *slot_;
    m.addr = config_.local;
    m.position = position_.value_or(0);
    m.cm_capable = cm_capable_;
    for (uint64_t service : listens_) {
      if (listener_on(state, config_.local, service, token_) == nullptr)
        m.listens.push_back(service);
    }
    state.members.push_back(m);
    ++state.epoch;
    me = state.members.end() - 1;
    force_verify = true;
  }
  if (new_epoch) {
    ++state.epoch;
    force_verify = true;
  }
  if (force_verify || me->verified_epoch < state.epoch) {
    // Attach what we believe first: the probe branch of the program is the same in every
    // version, and other traffic keeps flowing by the best guess meanwhile.
    attach_program(state);
    const size_t group = members_on(state, config_.local).size();
    if (auto pos = probe_position(group)) {
      if (*pos != me->position) {
        // Whoever the registry placed at our real position is misplaced too: swap, the
        // cheapest correction when exactly two entries are crossed; they re-verify anyway.
        for (RegistryMember& m : state.members) {
          if (m.addr == config_.local && m.token != token_ && m.position == *pos) {
            m.position = me->position;
            m.verified_epoch = 0;
          }
        }
        me->position = *pos;
        ++state.epoch;
      }
      me->verified_epoch = state.epoch;
    }
  }
  position_ = me->position;
  attach_program(state);
  remember_group(state);
  if (!(state == before)) ++counters_.reuseport_repairs;
  registry_->store(state);
}

int UdpPort::set_cm_capable(bool on) {
  if (cm_capable_ == on) return 0;
  cm_capable_ = on;
  reconcile(false);
  return 0;
}

int UdpPort::listen_service(uint64_t service_id) {
  if (std::find(listens_.begin(), listens_.end(), service_id) != listens_.end()) return 0;
  if (!registry_ || fd_ < 0) {
    listens_.push_back(service_id);
    return 0;
  }
  auto lock = registry_->lock();
  RegistryState state = registry_->load();
  prune_dead_members(state);  // a dead member's listeners do not count (reconcile stores this)
  if (listener_on(state, config_.local, service_id, token_) != nullptr) return EADDRINUSE;
  if (listener_count_on(state, config_.local) >= kMaxCmListeners) return ENOSPC;
  listens_.push_back(service_id);
  reconcile_locked(false);
  if (last_attach_error_ != 0) {
    // The kernel refused the longer program (net.core.optmem_max): back to the last one.
    listens_.pop_back();
    reconcile_locked(false);
    return ENOSPC;
  }
  return 0;
}

void UdpPort::unlisten_service(uint64_t service_id) {
  auto it = std::find(listens_.begin(), listens_.end(), service_id);
  if (it == listens_.end()) return;
  listens_.erase(it);
  reconcile(false);
}

void UdpPort::read_kernel_drops() {
  std::array<uint32_t, SK_MEMINFO_VARS> mem{};
  socklen_t mem_len = sizeof mem;
  if (getsockopt(fd_, SOL_SOCKET, SO_MEMINFO, mem.data(), &mem_len) == 0 &&
      mem_len > SK_MEMINFO_DROPS * sizeof(uint32_t)) {
    note_kernel_drops(mem[SK_MEMINFO_DROPS]);
  }
}

void UdpPort::maintain() {
  // Drops after the last datagram that got in carry no cmsg: read the count itself (one
  // getsockopt, only when the device goes idle).
  read_kernel_drops();
  if (!registry_) return;
  const int64_t now = mono_ns();
  bool need = a_watched_member_exited() || registry_->changed_since_last_seen();
  // Members whose processes a pidfd watches need no look at /proc: their exit wakes us.
  if (!need && unwatched_members_ && now - last_prune_ns_ >= 1'000'000'000) {
    last_prune_ns_ = now;
    RegistryState state = registry_->load();
    for (const RegistryMember& m : state.members) {
      if (!process_alive(m.pid, m.start_time)) need = true;
    }
  }
  if (need) reconcile(false);
}

UdpPort::~UdpPort() {
  if (registry_ && fd_ >= 0) {
    auto lock = registry_->lock();
    RegistryState state = registry_->load();
    prune_dead_members(state);
    auto me = std::find_if(state.members.begin(), state.members.end(),
                           [&](const RegistryMember& m) { return m.token == token_; });
    if (me != state.members.end()) {
      remove_member_like_kernel(state, static_cast<size_t>(me - state.members.begin()));
      // Point the program at the layout that holds once we are gone, then close: the last
      // member's datagrams come to our position (us) only for the instant in between.
      if (!members_on(state, config_.local).empty()) attach_program(state);
    }
    close(fd_);
    fd_ = -1;
    registry_->store(state);
  }
  if (fd_ >= 0) close(fd_);
  for (auto& [sport, fd] : sport_fds_) close(fd);
  for (auto& [pid, fd] : member_pidfds_) close(fd);
  if (wake_fd_ >= 0) close(wake_fd_);
}

int UdpPort::socket_for_sport(uint16_t sport) {
  if (sport == 0 || sport == port_ || !config_.per_qp_source_port) return fd_;
  // A burst holds runs of one QP's packets (poll_tx's turns): the last socket found serves
  // most lookups. Sockets stay open until the port closes, so the entry never goes stale.
  if (sport == last_sport_) return last_sport_fd_;
  if (auto it = sport_fds_.find(sport); it != sport_fds_.end()) {
    last_sport_ = sport;
    last_sport_fd_ = it->second;
    return it->second;
  }
  if (sport_unavailable_.count(sport) != 0 || sport_fds_.size() >= config_.max_source_port_sockets)
    return -1;
  int fd = socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  // SO_REUSEADDR (not SO_REUSEPORT): uroce processes may share a source port with each
  // other, but such a socket can never join a receiving reuseport group (those set only
  // SO_REUSEPORT), which would shift that group's positions.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  set_buffer(fd, SO_SNDBUF, SO_SNDBUFFORCE, config_.sndbuf_bytes);
  // Nothing is ever received here: a filter returning 0 drops every datagram before it is
  // charged to the receive buffer. What the buffer holds is the error queue: the ICMP
  // messages about what this socket sent (port unreachable, fragmentation needed), each
  // charged at its skb's size (about 2 KiB). The kernel's minimum (SO_RCVBUF 1) had no room
  // for one, so only the socket's pending errno was left, and that can be lost (below).
  const int errors_room = kSendOnlyErrorQueueBytes;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &errors_room, sizeof errors_room);
  sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  sock_fprog fprog{1, drop_all};
  setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog);
  if (family_ == AF_INET) {
    const int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof one);
  } else {
    const int pmtu = IPV6_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVERR, &one, sizeof one);
  }
  SockAddr local = SockAddr::make(config_.local, sport, config_.scope_id);
  if (bind(fd, local.get(), local.len) != 0) {
    close(fd);
    sport_unavailable_.insert(sport);
    return -1;
  }
  sport_fds_.emplace(sport, fd);
  return fd;
}

namespace {

// The kernel's limits for one UDP_SEGMENT message (UDP_MAX_SEGMENTS; the UDP length field
// less the IPv4 and UDP headers).
constexpr size_t kMaxGsoSegments = 64;
constexpr size_t kMaxGsoBytes = 65535 - 20 - 8;

// Datagrams that may share one GSO message: one destination address, port, TOS and
// destination QP. The QP matters because the receiving kernel steers the whole message by its
// first datagram (a shared port's reuseport program reads that one's QPN), so a message
// mixing the QPs of two processes sharing an address would land whole in one of them. QP1
// never merges: its datagrams (CM MADs) are steered by their content (the Service ID of a
// REQ, the Comm ID of a reply), which differs from one MAD to the next.
bool same_flow(const TxDatagram& a, std::optional<uint32_t> a_qpn, const TxDatagram& b) {
  return wire::same_address(a.ip.dst, b.ip.dst) && a.ip.dport == b.ip.dport && a.tos == b.tos &&
         a.scope_id == b.scope_id && a_qpn && *a_qpn != kGsiQpn && a_qpn == dest_qpn_of(b.data);
}
bool same_flow(const TxDatagram& a, const TxDatagram& b) {
  return same_flow(a, dest_qpn_of(a.data), b);
}

}  // namespace

size_t UdpPort::add_iovecs(const TxDatagram& d, size_t end, size_t& v) {
  const size_t before = v;
  const auto put = [&](const uint8_t* p, size_t n) {
    if (n != 0) iovs_[v++] = iovec{const_cast<uint8_t*>(p), n};
  };
  if (d.payload.empty()) {
    iovs_[v++] = iovec{const_cast<uint8_t*>(d.data.data()), end};
    return 1;
  }
  // Headers, the payload where it lies, then pad (the engine's hole lies before the ICRC).
  const size_t hole_end = d.payload_at + d.payload.size();
  put(d.data.data(), d.payload_at);
  put(d.payload.data(), d.payload.size());
  put(d.data.data() + hole_end, end - hole_end);
  return v - before;
}

void UdpPort::append_segment(size_t msg, size_t datagram, const TxDatagram& d, size_t segment,
                             size_t& v) {
  msghdr& h = msgs_[msg].msg_hdr;
  const std::span<const uint8_t> bytes = d.data;
  if (family_ != AF_INET || bytes.size() < wire::kIcrcLen) {
    // IPv6 has no ID: the packet leaves as sealed.
    h.msg_iovlen += add_iovecs(d, bytes.size(), v);
    return;
  }
  // The kernel gives segment k of the message IPv4 ID k (the message itself gets ID 0 from an
  // unconnected socket with DF, and inet_gso_segment counts up from there), and the ICRC
  // covers the ID while the engine sealed every packet for ID 0. So the ICRC leaves from a
  // scratch word corrected for ID k; the packet itself is untouched, and a message the kernel
  // refuses is resent one datagram per message, each with ID 0, as sealed.
  wire::Ipv4IdIcrcDelta* delta = nullptr;
  for (auto& id_delta : id_deltas_) {
    if (id_delta.roce_len() == bytes.size()) delta = &id_delta;
  }
  if (delta == nullptr) {  // a run has at most two sizes: full segments and a shorter tail
    delta = &id_deltas_[next_id_delta_];
    next_id_delta_ = (next_id_delta_ + 1) % id_deltas_.size();
    *delta = wire::Ipv4IdIcrcDelta(bytes.size());
  }
  const size_t body = bytes.size() - wire::kIcrcLen;
  const uint32_t fix = (*delta)(static_cast<uint16_t>(segment));
  if (d.icrc_writable) {
    // One iovec fewer per packet: for 64-byte WRITEs the kernel's copy of each small piece
    // cost more than its bytes (send_burst puts the word back after the call).
    auto* word = const_cast<uint8_t*>(bytes.data() + body);
    wire::store_le32(word, wire::load_le32(word) ^ fix);
    in_place_icrc_[in_place_count_++] = InPlaceIcrc{word, fix};
    h.msg_iovlen += add_iovecs(d, bytes.size(), v);
    return;
  }
  wire::store_le32(segment_icrc_[datagram].data(), wire::load_le32(bytes.data() + body) ^ fix);
  h.msg_iovlen += add_iovecs(d, body, v);
  iovs_[v++] = iovec{segment_icrc_[datagram].data(), wire::kIcrcLen};
  h.msg_iovlen += 1;
}

void UdpPort::restore_icrcs() {
  for (size_t k = 0; k < in_place_count_; ++k) {
    uint8_t* word = in_place_icrc_[k].word;
    wire::store_le32(word, wire::load_le32(word) ^ in_place_icrc_[k].delta);
  }
  in_place_count_ = 0;
}

size_t UdpPort::send_burst(std::span<const TxDatagram> pkts) {
  size_t i = 0;
  size_t resent = pkts.size();  // the datagram already sent again after a reported ICMP error
  size_t plain_until = 0;       // datagrams before this index go one per message (GSO refused)
  while (i < pkts.size()) {
    // One sendmmsg per run of datagrams leaving through the same socket. A datagram whose
    // source port cannot be had leaves through the main socket (and counts once it is sent).
    const int first = socket_for_sport(pkts[i].ip.sport);
    const int fd = first < 0 ? fd_ : first;
    const bool gso = gso_ && (gso_refused_.empty() || gso_refused_.count(fd) == 0);
    size_t n = 0;  // datagrams in this call
    size_t m = 0;  // messages in this call
    size_t v = 0;  // iovecs in this call
    size_t run_bytes = 0;
    bool run_closed = false;           // the run's last datagram was shorter: nothing may follow it
    std::optional<uint32_t> head_qpn;  // the destination QP of the last message's first
    while (i + n < pkts.size() && n < kMaxBurst) {
      const TxDatagram& d = pkts[i + n];
      const int fd_n = n == 0 ? first : socket_for_sport(d.ip.sport);
      if ((fd_n < 0 ? fd_ : fd_n) != fd) break;
      fallback_[n] = fd_n < 0;
      if (gso && m > 0 && i + n >= plain_until && !run_closed) {
        // Joins the previous message if the kernel would cut it back out exactly.
        const TxDatagram& head = pkts[i + msg_first_[m - 1]];
        const size_t seg = head.data.size();
        // A shorter datagram ends a run; but a lone head followed by a run of a smaller size
        // (a WRITE's First packet carries a RETH, its Middles do not) is better left alone.
        const bool shorter = d.data.size() < seg;
        const bool starts_run = shorter && msg_count_[m - 1] == 1 && i + n + 1 < pkts.size() &&
                                pkts[i + n + 1].data.size() == d.data.size() &&
                                same_flow(d, pkts[i + n + 1]);
        if (same_flow(head, head_qpn, d) && d.data.size() <= seg && !d.data.empty() &&
            !starts_run && msg_count_[m - 1] < kMaxGsoSegments &&
            run_bytes + d.data.size() <= kMaxGsoBytes) {
          append_segment(m - 1, n, d, msg_count_[m - 1], v);
          ++msg_count_[m - 1];
          run_bytes += d.data.size();
          run_closed = shorter;
          ++n;
          continue;
        }
      }
      IpAddr dst;
      dst.bytes = d.ip.dst;
      auto* name = reinterpret_cast<sockaddr*>(&names_[m]);
      SockAddr to = SockAddr::make(dst, d.ip.dport, d.scope_id);
      std::memcpy(name, &to.storage, to.len);
      msghdr& h = msgs_[m].msg_hdr;
      h = msghdr{};
      h.msg_name = name;
      h.msg_namelen = to.len;
      h.msg_iov = &iovs_[v];
      h.msg_iovlen = add_iovecs(d, d.data.size(), v);
      h.msg_control = cmsgs_[m].bytes;
      msg_first_[m] = static_cast<uint16_t>(n);
      msg_count_[m] = 1;
      head_qpn = dest_qpn_of(d.data);
      run_bytes = d.data.size();
      run_closed = false;
      ++m;
      ++n;
    }
    for (size_t k = 0; k < m; ++k) {
      msghdr& h = msgs_[k].msg_hdr;
      h.msg_controllen = CMSG_SPACE(sizeof(int));
      if (msg_count_[k] > 1) h.msg_controllen += CMSG_SPACE(sizeof(uint16_t));
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = family_ == AF_INET ? IPPROTO_IP : IPPROTO_IPV6;
      c->cmsg_type = family_ == AF_INET ? IP_TOS : IPV6_TCLASS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      const int tos = pkts[i + msg_first_[k]].tos;
      std::memcpy(CMSG_DATA(c), &tos, sizeof tos);
      if (msg_count_[k] > 1) {
        c = CMSG_NXTHDR(&h, c);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const auto seg = static_cast<uint16_t>(pkts[i + msg_first_[k]].data.size());
        std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
      }
    }
    int rc = sendmmsg(fd, msgs_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
    // Whatever happened, the caller's packets are as sealed again: one not taken may go in
    // another segment next time, or alone.
    restore_icrcs();
    if (rc < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS || err == EINTR) {
        ++counters_.tx_would_block;
        return i;
      }
      // IP_RECVERR: an ICMP error about an earlier datagram is reported by this call; the
      // datagram at hand is fine. Record the error and send it once more.
      if (is_reported_icmp_error(err) && resent != i) {
        // The ICMP message may not have been queued (no room in the receive buffer): the
        // errno still says what it was, for this peer.
        if (drain_error_queue(fd, config_.path_log) == 0 && config_.path_log != nullptr) {
          IpAddr dst;
          dst.bytes = pkts[i].ip.dst;
          config_.path_log->record_errno(err, dst);
        }
        resent = i;
        continue;
      }
      const size_t count = msg_count_[0];
      if (count > 1 && (err == EIO || err == EINVAL || err == EMSGSIZE || err == ENOPROTOOPT ||
                        err == EOPNOTSUPP)) {
        // The kernel refused the segmentation, not the datagrams: EIO (no checksum offload
        // on the egress device) or an old kernel stays refused for this socket; EINVAL (a
        // segment larger than the path MTU) is the datagrams' own fault, which sending them
        // one by one reports as EMSGSIZE. Either way nothing is lost.
        ++counters_.tx_gso_fallback;
        if (err == EIO || err == ENOPROTOOPT || err == EOPNOTSUPP) gso_refused_.insert(fd);
        plain_until = i + count;
        continue;
      }
      // The first message of the run failed for good: drop its datagrams (one skb, so
      // a netfilter drop takes the whole run), count why, go on.
      if (err == EMSGSIZE) {
        (void)drain_error_queue(fd, config_.path_log);  // the local error names the MTU
        counters_.tx_drop_too_big += count;
        if (config_.path_log != nullptr) {
          for (size_t k = 0; k < count; ++k) config_.path_log->count_tx_too_big();
        }
      } else {
        counters_.tx_drop_error += count;
        if (config_.path_log != nullptr) {
          for (size_t k = 0; k < count; ++k) config_.path_log->count_tx_error();
        }
      }
      i += count;
      continue;
    }
    if (static_cast<size_t>(rc) < m) {
      // sendmmsg stopped early. If an ICMP error arrived during the call (over a veth the
      // answer to its first datagram can), the next datagram's send took the socket's pending
      // errno and sendmmsg, having sent some, dropped it: the error queue is all that is left.
      (void)drain_error_queue(fd, config_.path_log);
    }
    size_t sent = 0;
    for (int k = 0; k < rc; ++k) {
      const size_t count = msg_count_[static_cast<size_t>(k)];
      if (count > 1) ++counters_.tx_gso_messages;
      for (size_t j = 0; j < count; ++j, ++sent) {
        ++counters_.tx_packets;
        counters_.tx_bytes += pkts[i + sent].data.size();
        if (fallback_[sent]) ++counters_.tx_sport_fallback;
      }
    }
    i += sent;
  }
  return i;
}

bool UdpPort::keep_datagram(RxDatagram& d) {
  std::span<const uint8_t> payload(d.buf.data(), d.len);
  if (auto pr = parse_probe(payload)) {
    ++counters_.rx_probes;
    return false;
  }
  if (!registry_) return true;
  auto dqpn = dest_qpn_of(payload);
  if (!dqpn) return true;  // a runt: the engine counts it
  // The multicast QPN belongs to no process's slot; every engine counts it as such.
  if (*dqpn == kMulticastQpn) return true;
  if (*dqpn == kGsiQpn) {
    // QP1: ours unless the program's rule names another live member (a REQ for its service,
    // a reply carrying its slot): then the kernel's positions and the program disagree.
    const Qp1Target t = qp1_route_of(payload);
    const bool others =
        (t.route == Qp1Route::kService && services_of_others_.count(t.service_id) != 0) ||
        (t.route == Qp1Route::kSlot && t.slot != *slot_ && slot_owned_by_other_[t.slot]);
    if (!others) return true;
    ++counters_.rx_drop_misdelivered;
    rx_misdelivered_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const uint32_t slot = slot_of_qpn(*dqpn);
  if (slot == *slot_) return true;
  if (slot_owned_by_other_[slot]) {
    ++counters_.rx_drop_misdelivered;
    rx_misdelivered_.fetch_add(1, std::memory_order_relaxed);
  } else {
    ++counters_.rx_drop_no_owner;
    rx_no_owner_.fetch_add(1, std::memory_order_relaxed);
  }
  return false;
}

int UdpPort::hand_data_to_ring(const std::vector<int>& ifindexes) {
  // The ring's filter and this socket's must judge the same skb: with UDP GRO a GSO message
  // from loopback or a veth reaches the socket whole, as the ring saw it; without, the kernel
  // cuts it first, and a message too large for a ring frame would be dropped here piece by
  // piece as if the ring had it.
  if (!gro_) return EOPNOTSUPP;
  const std::vector<sock_filter> prog = build_socket_drop_filter(slot_, ifindexes);
  const sock_fprog fprog{static_cast<unsigned short>(prog.size()),
                         const_cast<sock_filter*>(prog.data())};
  if (prog.empty() || setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) != 0) {
    return prog.empty() ? EINVAL : errno;
  }
  ring_takes_data_ = true;
  ring_ifindexes_ = ifindexes;
  return 0;
}

bool UdpPort::has_ring_marker(std::span<const uint8_t> head, size_t len, int ifindex) const {
  return ring_takes_data_ && len + 8 > RxRing::kMaxUdpLength && ring_takes_payload(head, slot_) &&
         (ring_ifindexes_.empty() || std::find(ring_ifindexes_.begin(), ring_ifindexes_.end(),
                                               ifindex) != ring_ifindexes_.end());
}

bool UdpPort::next_is_ring_message() {
  if (!ring_takes_data_ || has_pending()) return false;
  std::array<uint8_t, 64> head{};  // the BTH and more: what ring_takes_payload reads
  iovec iov{head.data(), head.size()};
  sockaddr_storage from{};
  alignas(cmsghdr) std::array<uint8_t, 256> control{};
  msghdr h{};
  h.msg_name = &from;
  h.msg_namelen = sizeof from;
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = control.data();
  h.msg_controllen = control.size();
  // MSG_TRUNC: the length of the whole message (with UDP GRO, of all its datagrams).
  const ssize_t len = recvmsg(fd_, &h, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
  if (len <= 0) return false;
  RxDatagram d;
  fill_meta(h, d);
  const auto n = static_cast<size_t>(len);
  return has_ring_marker({head.data(), std::min(n, head.size())}, n, d.ifindex);
}

int UdpPort::keep_ring_data() {
  if (!ring_takes_data_) return 0;
  const int unused = 0;  // the kernel wants an int's length for every SOL_SOCKET option
  return setsockopt(fd_, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof unused) == 0 ? 0 : errno;
}

void UdpPort::forget_ring() {
  read_kernel_drops();  // the filter's drops so far: followed, not counted
  ring_takes_data_ = false;
  ring_ifindexes_.clear();
}

void UdpPort::note_kernel_drops(uint32_t cumulative) {
  // The count is the kernel's 32-bit sk_drops: serial arithmetic, so a datagram queued before
  // a later SO_MEMINFO read (an older, smaller count) is no change, and a wrap is growth.
  const auto delta = static_cast<int32_t>(cumulative - kernel_drops_seen_);
  if (delta <= 0) return;
  kernel_drops_seen_ = cumulative;
  // In ring mode the filter's drops are in the count (hand_data_to_ring): followed, not
  // counted, so that a ring given back (forget_ring) counts only the drops after it.
  if (ring_takes_data_) return;
  rx_discards_.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
}

void UdpPort::fill_meta(const msghdr& h, RxDatagram& d) {
  d.ip = wire::IpContext{};
  d.ip.ipv6 = family_ == AF_INET6;
  d.ip.dport = port_;
  d.ip.dst = config_.local.bytes;
  d.tos = 0;
  d.ttl = 0;
  d.ifindex = 0;
  if (auto src = SockAddr::split(static_cast<const sockaddr*>(h.msg_name))) {
    d.ip.src = src->first.bytes;
    d.ip.sport = src->second;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      d.tos = *CMSG_DATA(c);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
      int v = 0;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      d.ttl = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo pi{};
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      d.ip.dst = IpAddr::from_in(pi.ipi_addr).bytes;  // the header's destination
      d.ifindex = pi.ipi_ifindex;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      int v = 0;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      d.tos = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
      int v = 0;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      d.ttl = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi{};
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      d.ip.dst = IpAddr::from_in6(pi.ipi6_addr).bytes;
      d.ifindex = static_cast<int>(pi.ipi6_ifindex);
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
      uint32_t drops = 0;
      std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
      note_kernel_drops(drops);
    }
  }
}

bool UdpPort::deliver_in_place(std::span<uint8_t> bytes, const RxDatagram& m, RxDatagram& d,
                               bool* misdelivered, bool* unowned) {
  // No larger than the caller's room, as if it had been received there.
  if (bytes.size() > d.buf.size()) {
    ++counters_.rx_drop_truncated;
    return false;
  }
  const std::span<uint8_t> room = d.buf;
  d.buf = bytes;
  d.in_port = true;
  d.len = bytes.size();
  d.ip = m.ip;
  d.tos = m.tos;
  d.ttl = m.ttl;
  d.ifindex = m.ifindex;
  const uint64_t misdelivered_before = counters_.rx_drop_misdelivered;
  const uint64_t unowned_before = counters_.rx_drop_no_owner;
  if (!keep_datagram(d)) {
    *misdelivered |= counters_.rx_drop_misdelivered != misdelivered_before;
    *unowned |= counters_.rx_drop_no_owner != unowned_before;
    d.buf = room;
    d.in_port = false;
    return false;
  }
  ++counters_.rx_packets;
  counters_.rx_bytes += d.len;
  return true;
}

void UdpPort::prepare_rx(size_t i, uint8_t* buf, size_t len) {
  if (i >= rx_dirty_ && rx_iovs_[i].iov_base == buf && rx_iovs_[i].iov_len == len) return;
  rx_iovs_[i] = iovec{buf, len};
  msghdr& h = rx_msgs_[i].msg_hdr;
  h = msghdr{};
  h.msg_name = &rx_names_[i];
  h.msg_namelen = sizeof rx_names_[i];
  h.msg_iov = &rx_iovs_[i];
  h.msg_iovlen = 1;
  h.msg_control = rx_cmsgs_[i].bytes;
  h.msg_controllen = sizeof rx_cmsgs_[i].bytes;
  rx_msgs_[i].msg_len = 0;
}

int UdpPort::recv_prepared(size_t want) {
  // recvmmsg writes back only the entries it filled; a failed call (EAGAIN) writes nothing.
  rx_dirty_ = 0;
  const int rc = recvmmsg(fd_, rx_msgs_.data(), static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
  if (rc > 0) rx_dirty_ = static_cast<size_t>(rc);
  return rc;
}

size_t UdpPort::recv_burst_gro(std::span<RxDatagram> out, size_t max_messages) {
  if (gro_next_ == gro_entries_) {
    gro_entries_ = gro_next_ = gro_offset_ = 0;
    const size_t want = std::min({out.size(), kGroEntries, max_messages});
    if (rx_dirty_ != 0 || rx_gro_ready_ < want) {
      for (size_t e = 0; e < want; ++e) prepare_rx(e, gro_area_.get() + e * kGroBytes, kGroBytes);
      rx_gro_ready_ = want;
    }
    const int rc = recv_prepared(want);
    if (rc <= 0) {
      note_recv_error(rc);
      return 0;
    }
    for (size_t e = 0; e < static_cast<size_t>(rc); ++e) {
      const msghdr& h = rx_msgs_[e].msg_hdr;
      gro_len_[e] = rx_msgs_[e].msg_len;
      if ((h.msg_flags & MSG_TRUNC) != 0) {  // cannot happen with 64 KiB areas; never cut
        ++counters_.rx_drop_truncated;
        gro_len_[e] = 0;
      }
      fill_meta(h, gro_meta_[e]);
      gro_seg_[e] = gro_segment_size(h, gro_len_[e]);
      if (gro_seg_[e] < gro_len_[e]) ++counters_.rx_gro_messages;
      if (has_ring_marker({gro_area_.get() + e * kGroBytes, gro_len_[e]}, gro_len_[e],
                          gro_meta_[e].ifindex)) {
        ++counters_.rx_ring_large_messages;
      }
    }
    gro_entries_ = static_cast<size_t>(rc);
  }
  size_t kept = 0;
  bool misdelivered = false;
  bool unowned = false;
  while (gro_next_ < gro_entries_ && kept < out.size()) {
    const size_t e = gro_next_;
    if (gro_offset_ >= gro_len_[e]) {
      ++gro_next_;
      gro_offset_ = 0;
      continue;
    }
    const size_t n = std::min(gro_seg_[e], gro_len_[e] - gro_offset_);
    const std::span<uint8_t> bytes(gro_area_.get() + e * kGroBytes + gro_offset_, n);
    gro_offset_ += n;
    if (deliver_in_place(bytes, gro_meta_[e], out[kept], &misdelivered, &unowned)) ++kept;
  }
  repair_after(misdelivered, unowned);
  return kept;
}

size_t UdpPort::deliver_stash(std::span<RxDatagram> out) {
  size_t kept = 0;
  while (!stash_.empty() && kept < out.size()) {
    Stashed st = std::move(stash_.front());
    stash_.pop_front();
    st.meta.buf = st.bytes;
    if (!keep_datagram(st.meta)) continue;
    RxDatagram& d = out[kept];
    if (st.bytes.size() > d.buf.size()) {
      ++counters_.rx_drop_truncated;
      continue;
    }
    std::memcpy(d.buf.data(), st.bytes.data(), st.bytes.size());
    d.in_port = false;
    d.len = st.bytes.size();
    d.ip = st.meta.ip;
    d.tos = st.meta.tos;
    d.ttl = st.meta.ttl;
    d.ifindex = st.meta.ifindex;
    ++counters_.rx_packets;
    counters_.rx_bytes += d.len;
    ++kept;
  }
  return kept;
}

size_t UdpPort::recv_burst(std::span<RxDatagram> out, size_t max_messages) {
  const size_t want = std::min({out.size(), kMaxBurst, max_messages});
  if (want == 0) return 0;
  // Every path below sets in_port of each entry it returns (an empty poll touches none).
  if (!stash_.empty()) {
    if (size_t n = deliver_stash(out.first(want)); n > 0) return n;
  }
  if (gro_) return recv_burst_gro(out.first(std::min(out.size(), kMaxBurst)), want);
  rx_gro_ready_ = 0;
  for (size_t i = 0; i < want; ++i) prepare_rx(i, out[i].buf.data(), out[i].buf.size());
  const int rc = recv_prepared(want);
  if (rc <= 0) {
    note_recv_error(rc);
    return 0;
  }
  size_t kept = 0;
  bool misdelivered = false;  // for a slot another live member owns
  bool unowned = false;       // for a slot nobody owns (as far as we know)
  for (size_t i = 0; i < static_cast<size_t>(rc); ++i) {
    msghdr& h = rx_msgs_[i].msg_hdr;
    RxDatagram& d = out[i];
    if ((h.msg_flags & MSG_TRUNC) != 0) {
      ++counters_.rx_drop_truncated;
      continue;
    }
    d.len = rx_msgs_[i].msg_len;
    fill_meta(h, d);
    const uint64_t misdelivered_before = counters_.rx_drop_misdelivered;
    const uint64_t unowned_before = counters_.rx_drop_no_owner;
    if (!keep_datagram(d)) {
      misdelivered |= counters_.rx_drop_misdelivered != misdelivered_before;
      unowned |= counters_.rx_drop_no_owner != unowned_before;
      continue;
    }
    ++counters_.rx_packets;
    counters_.rx_bytes += d.len;
    if (kept != i) {
      // Rare path (something was dropped before it): move into the earlier caller buffer.
      RxDatagram& k = out[kept];
      const size_t n = std::min(d.len, k.buf.size());
      std::memcpy(k.buf.data(), d.buf.data(), n);
      k.len = n;
      k.ip = d.ip;
      k.tos = d.tos;
      k.ttl = d.ttl;
      k.ifindex = d.ifindex;
    }
    out[kept].in_port = false;
    ++kept;
  }
  repair_after(misdelivered, unowned);
  return kept;
}

void UdpPort::note_recv_error(int rc) {
  const int err = errno;
  if (rc < 0 && is_reported_icmp_error(err)) {
    (void)drain_error_queue(fd_, config_.path_log);  // IP_RECVERR: not a receive failure
  } else if (rc < 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
    ++counters_.rx_errors;
  }
}

void UdpPort::repair_after(bool misdelivered, bool unowned) {
  if (!misdelivered && !unowned) return;
  // The kernel's positions and the program disagree (a member died, or moved when another
  // left) or a member joined that we have not seen yet: repair. A stale peer that keeps
  // sending to a dead QP must not make that a per-datagram cost: an unowned slot repairs
  // only when the registry changed, a misdelivery at most every 10 ms.
  const int64_t now = mono_ns();
  const bool changed = registry_->changed_since_last_seen();
  if (changed || (misdelivered && now - last_misdelivery_repair_ns_ >= 10'000'000)) {
    last_misdelivery_repair_ns_ = now;
    // A misdelivery that no change of the registry explains means its positions are wrong
    // for someone (edited by hand, or a member's guess after a crash that nobody proved):
    // a new epoch makes every member probe its own, at once here and at the others' next
    // look. Re-reading the same file would attach the same wrong program for good.
    reconcile(false, misdelivered && !changed);
  }
}

WaitResult UdpPort::wait(Nanos timeout, bool want_write) {
  maintain();
  WaitResult r;
  if (has_pending()) {  // already read from the socket: no need to sleep
    r.readable = true;
    return r;
  }
  std::array<pollfd, 2 + kSlotCount> fds{};
  fds[0] = {fd_, static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)), 0};
  fds[1] = {wake_fd_, POLLIN, 0};
  size_t nfds = 2;
  for (const auto& [pid, fd] : member_pidfds_) {
    if (nfds < fds.size()) fds[nfds++] = {fd, POLLIN, 0};
  }
  timespec ts{};
  if (ppoll(fds.data(), nfds, common::ppoll_timeout(timeout, ts), nullptr) <= 0) return r;
  for (size_t i = 2; i < nfds; ++i) {
    if (fds[i].revents != 0) {
      reconcile(false);  // a member process exited: repair now, not at the next datagram
      break;
    }
  }
  r.readable = (fds[0].revents & POLLIN) != 0;
  r.writable = (fds[0].revents & POLLOUT) != 0;
  if ((fds[1].revents & POLLIN) != 0) {
    uint64_t v = 0;
    while (read(wake_fd_, &v, sizeof v) < 0 && errno == EINTR) {
    }
    r.woken = true;
  }
  return r;
}

void UdpPort::wake() {
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

}  // namespace uroce::net
