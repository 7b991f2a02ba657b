// The process's CM service: opening a uroce device for the CM (QP1, receive buffers, agent),
// the thread that moves MADs and timer ticks, and the translation of the agent's events into
// rdma_cm events.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "common/library_thread.hpp"
#include "ibverbs/uroce_private.h"
#include "rdmacm/address.hpp"
#include "rdmacm/state.hpp"
#include "wire/ip_layout.hpp"

namespace uroce::rdmacm {
namespace {

constexpr int kRecvSlots = 128;
constexpr size_t kGrhBytes = 40;
constexpr size_t kSlotBytes = kGrhBytes + cm::kMadSize;
constexpr uint64_t kSendTag = 1ull << 63;  // wr_id of MAD sends; receives carry their slot

// The peer (source) and local (destination) addresses of a received UD packet from the 40
// bytes in front of it: IPv4 puts its header in bytes 20..39, IPv6 fills all 40.
bool addresses_of(const uint8_t* grh, Gid& from, Gid& to) {
  from = {};
  to = {};
  if ((grh[20] >> 4) == 4 && std::all_of(grh, grh + 20, [](uint8_t b) { return b == 0; })) {
    from[10] = from[11] = to[10] = to[11] = 0xFF;
    std::memcpy(&from[12], grh + 20 + 12, 4);
    std::memcpy(&to[12], grh + 20 + 16, 4);
    return true;
  }
  if ((grh[0] >> 4) == 6) {
    std::memcpy(from.data(), grh + 8, 16);
    std::memcpy(to.data(), grh + 24, 16);
    return true;
  }
  return false;
}

}  // namespace

uint32_t random_u32() {
  static std::mt19937 rng(std::random_device{}());
  return rng();
}

void report(const std::string& message) {
  const char* quiet = std::getenv("UROCE_QUIET");
  if (quiet != nullptr && std::string_view(quiet) == "1") return;
  std::fprintf(stderr, "uroce rdmacm: %s\n", message.c_str());
}

Runtime& Runtime::get() {
  // Destroyed at exit before libibverbs' statics (it depends on them), so the thread stops
  // first. Devices stay open: a program that exits without destroying its ids loses nothing.
  static Runtime runtime;
  return runtime;
}

TimePoint Runtime::now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimePoint(static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec);
}

Runtime::Runtime() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = common::start_library_thread([this] { run(); });
}

Runtime::~Runtime() {
  {
    std::lock_guard lock(mu);
    stop_ = true;
    // What the kernel does when a process exits with connections open (its rdma_cm file
    // closes): cm_destroy_id for each, so peers hear a DREQ or REJ now instead of finding
    // out by timeouts.
    for (auto& d : devices) {
      for (const auto& [cm_id, id] : d->conns) d->agent->destroy(now(), cm_id);
      d->conns.clear();
      cm::OutMad out;
      while (d->agent->poll_out(out)) send_mad(*d, out);
      flush_at_exit(*d);
    }
  }
  eventfd_write(wake_fd_, 1);
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
  close(epoll_fd_);
}

void Runtime::flush_at_exit(CmDevice& dev) {
  // Posted is not sent: the device's progress thread dies with the process, and a DREQ that
  // rdma_disconnect posted just before the program returned from main would never leave (its
  // peer, an rping server, then waits forever for the disconnect). The kernel's CM sends its
  // MADs whatever becomes of the process; here the device sends what is ready now, and if
  // something stays queued (a full socket buffer, or an RC QP's window) we wait, 100 ms at
  // most, for QP1's own sends to complete.
  if (uroce_flush(dev.ctx) == 0) return;
  const TimePoint until = now() + std::chrono::milliseconds(100);
  while (dev.sends_in_flight > 0 && now() < until) {
    poll_device(dev);
    if (uroce_flush(dev.ctx) == 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

uint16_t Runtime::ephemeral_port(uint16_t ps) {
  // The kernel's default ip_local_port_range.
  constexpr uint16_t kLow = 32768;
  constexpr uint16_t kCount = 61000 - kLow;
  for (int tries = 0; tries < kCount; ++tries) {
    const auto port = static_cast<uint16_t>(kLow + random_u32() % kCount);
    if (!ports.contains({ps, port})) return port;
  }
  return 0;
}

CmDevice* Runtime::open_device(ibv_device* d) {
  auto dev = std::make_unique<CmDevice>();
  ibv_context* ctx = ibv_open_device(d);
  if (ctx == nullptr) return nullptr;
  dev->ctx = ctx;
  auto fail_open = [&](const char* what) -> CmDevice* {
    const int err = errno;
    report(std::string("cannot set up the CM on ") + ibv_get_device_name(d) + ": " + what + ": " +
           std::strerror(err));
    if (dev->qp1 != nullptr) ibv_destroy_qp(dev->qp1);
    if (dev->mr != nullptr) ibv_dereg_mr(dev->mr);
    if (dev->cq != nullptr) ibv_destroy_cq(dev->cq);
    if (dev->channel != nullptr) ibv_destroy_comp_channel(dev->channel);
    if (dev->pd != nullptr) ibv_dealloc_pd(dev->pd);
    ibv_close_device(ctx);
    errno = err;
    return nullptr;
  };
  ibv_device_attr attr{};
  ibv_port_attr port{};
  if (ibv_query_device(ctx, &attr) != 0 || ibv_query_port(ctx, 1, &port) != 0) {
    return fail_open("query");
  }
  dev->node_guid = be64toh(attr.node_guid);
  dev->active_mtu = port.active_mtu;
  dev->max_initiator_depth = static_cast<uint8_t>(std::min(attr.max_qp_init_rd_atom, 255));
  dev->max_responder_resources = static_cast<uint8_t>(std::min(attr.max_qp_rd_atom, 255));
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid g{};
    Gid gid{};
    if (ibv_query_gid(ctx, 1, i, &g) == 0) std::memcpy(gid.data(), g.raw, 16);
    dev->gids.push_back(gid);
  }
  dev->pd = ibv_alloc_pd(ctx);
  if (dev->pd == nullptr) return fail_open("ibv_alloc_pd");
  dev->channel = ibv_create_comp_channel(ctx);
  if (dev->channel == nullptr) return fail_open("ibv_create_comp_channel");
  fcntl(dev->channel->fd, F_SETFL, fcntl(dev->channel->fd, F_GETFL) | O_NONBLOCK);
  dev->cq = ibv_create_cq(ctx, 4 * kRecvSlots, nullptr, dev->channel, 0);
  if (dev->cq == nullptr) return fail_open("ibv_create_cq");
  dev->recv_buffers.resize(kRecvSlots * kSlotBytes);
  dev->mr = ibv_reg_mr(dev->pd, dev->recv_buffers.data(), dev->recv_buffers.size(),
                       IBV_ACCESS_LOCAL_WRITE);
  if (dev->mr == nullptr) return fail_open("ibv_reg_mr");
  ibv_qp_init_attr init{};
  init.send_cq = dev->cq;
  init.recv_cq = dev->cq;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = 2 * kRecvSlots;
  init.cap.max_recv_wr = kRecvSlots;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = cm::kMadSize;
  dev->qp1 = uroce_create_gsi_qp(dev->pd, &init);
  if (dev->qp1 == nullptr) return fail_open("QP1 (is this uroce's libibverbs.so.1?)");
  ibv_qp_attr qa{};
  qa.qp_state = IBV_QPS_INIT;
  qa.pkey_index = 0;
  qa.qkey = 0x80010000;
  // QP1's port is fixed (IBA 10.3.1: no port attribute for QP0/QP1).
  if (ibv_modify_qp(dev->qp1, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_QKEY) != 0) {
    return fail_open("QP1 to INIT");
  }
  qa.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(dev->qp1, &qa, IBV_QP_STATE) != 0) return fail_open("QP1 to RTR");
  qa.qp_state = IBV_QPS_RTS;
  qa.sq_psn = 0;
  if (ibv_modify_qp(dev->qp1, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
    return fail_open("QP1 to RTS");
  }
  for (int slot = 0; slot < kRecvSlots; ++slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(&dev->recv_buffers[slot * kSlotBytes]),
                static_cast<uint32_t>(kSlotBytes), dev->mr->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(dev->qp1, &wr, &bad) != 0) return fail_open("QP1 receive buffers");
  }
  ibv_req_notify_cq(dev->cq, 0);
  cm::CmAgentConfig config;
  config.ca_guid = dev->node_guid;
  // Our comm IDs carry the process's QPN slot (the top 6 bits of its QPNs): replies to them
  // are steered here like the QP's data (docs/cm.md).
  config.slot = static_cast<uint32_t>(uroce_cm_slot(ctx));
  config.id_seed = random_u32();
  config.packet_life_time = kPacketLifeTime;
  config.local_ca_ack_delay = kCaAckDelay;
  dev->agent = std::make_unique<cm::CmAgent>(config);
  // This process answers requests for services nobody here listens on (REJ 8).
  (void)uroce_cm_steer(ctx, UROCE_CM_CAPABLE, 0, 1);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = dev.get();
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, dev->channel->fd, &ev);
  devices.push_back(std::move(dev));
  return devices.back().get();
}

CmDevice* Runtime::device_named(const std::string& name) {
  for (auto& d : devices) {
    if (name == ibv_get_device_name(d->ctx->device)) return d.get();
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  CmDevice* found = nullptr;
  for (int i = 0; list != nullptr && i < n && found == nullptr; ++i) {
    if (name == ibv_get_device_name(list[i])) found = open_device(list[i]);
  }
  if (list != nullptr) ibv_free_device_list(list);
  if (found == nullptr && errno == 0) errno = ENODEV;
  return found;
}

CmDevice* Runtime::device_for(const sockaddr* addr) {
  errno = 0;
  if (is_any(addr)) return nullptr;
  const std::string netdev = netdev_of(addr);
  if (netdev.empty()) {
    errno = EADDRNOTAVAIL;
    return nullptr;
  }
  return device_named("uroce_" + netdev);
}

namespace {

std::vector<std::string> list_device_names() {
  std::vector<std::string> names;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list != nullptr && i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  if (list != nullptr) ibv_free_device_list(list);
  return names;
}

}  // namespace

std::vector<std::string> Runtime::device_names() {
  // The thread keeps the list fresh (run()); only the first call lists in the caller's time.
  if (names_at_ == TimePoint{0}) {
    names_ = list_device_names();
    names_at_ = now();
  }
  return names_;
}

std::vector<CmDevice*> Runtime::all_devices() {
  std::vector<CmDevice*> out;
  for (const std::string& name : device_names()) {
    errno = 0;
    if (CmDevice* d = device_named(name); d != nullptr) out.push_back(d);
  }
  return out;
}

bool Runtime::park(CmDevice& dev, const Gid& from, std::span<const uint8_t> mad) {
  // MAD header: class at byte 1, attribute ID at 16; REQ and SIDR_REQ carry the service ID
  // at message offset 8 (docs/cm.md).
  if (mad.size() != cm::kMadSize || mad[1] != 0x07) return false;
  const uint16_t attr = static_cast<uint16_t>(mad[16] << 8 | mad[17]);
  if (attr != static_cast<uint16_t>(cm::AttrId::kReq) &&
      attr != static_cast<uint16_t>(cm::AttrId::kSidrReq)) {
    return false;
  }
  uint64_t service_id = 0;
  for (size_t i = 0; i < 8; ++i) service_id = service_id << 8 | mad[cm::kMadHeaderSize + 8 + i];
  const auto it = dev.steered.find(service_id);
  if (it == dev.steered.end() || it->second == kNever) return false;  // unknown or listened
  CmDevice::ParkedMad& p = dev.parked.emplace_back();
  p.until = now() + kParkHold;
  p.service_id = service_id;
  p.from = from;
  std::copy(mad.begin(), mad.end(), p.mad.begin());
  return true;
}

void Runtime::replay_parked(CmDevice& dev, uint64_t service_id, bool all) {
  const TimePoint t = now();
  std::erase_if(dev.parked, [&](const CmDevice::ParkedMad& p) {
    if (!(p.service_id == service_id || (all && p.until <= t))) return false;
    dev.agent->on_mad(t, p.from, p.mad);
    return true;
  });
}

int Runtime::steer_listen(CmDevice& dev, uint64_t service_id) {
  auto it = dev.steered.find(service_id);
  if (it != dev.steered.end()) {
    it->second = kNever;  // still steered here from an earlier listener
    replay_parked(dev, service_id, /*all=*/false);
    get().drain(dev);
    return 0;
  }
  const int rc = uroce_cm_steer(dev.ctx, UROCE_CM_LISTEN, service_id, 1);
  if (rc == 0) dev.steered[service_id] = kNever;
  return rc;
}

void Runtime::steer_unlisten(CmDevice& dev, uint64_t service_id) {
  auto it = dev.steered.find(service_id);
  if (it != dev.steered.end()) it->second = now() + kSteerLinger;
}

void Runtime::explain_silence(CmDevice& dev) {
  const uint64_t resends = dev.agent->counters().resent;
  if (resends == dev.resends_seen) return;
  dev.resends_seen = resends;
  for (const auto& [cm_id, id] : dev.conns) {
    if (id->state != IdState::kConnecting) continue;
    Gid peer{};
    std::memcpy(peer.data(), id->id.route.addr.addr.ibaddr.dgid.raw, 16);
    if (dev.silence_explained.contains(peer)) continue;
    struct uroce_path_report r {};
    uroce_query_path(dev.ctx, peer.data(), &r);
    if (r.port_unreachable == 0 && r.unreachable == 0) continue;
    dev.silence_explained.insert(peer);
    const std::string ip = to_string(&id->id.route.addr.dst_addr);
    report(r.port_unreachable != 0
               ? "no answer from " + ip +
                     " to the connection request: it answers ICMP port "
                     "unreachable for UDP 4791, so nothing runs RoCE v2 there (load rdma_rxe "
                     "or start the uroce program on it, or open UDP 4791 in its firewall); "
                     "the request is resent for 74 s"
               : "no answer from " + ip +
                     " to the connection request: the network answers "
                     "host unreachable or administratively prohibited (on this host's subnet: "
                     "nothing answers ARP for it, is it up and the address right?; else a "
                     "firewall or route on the way); the request is resent for 74 s");
  }
}

void Runtime::expire_steering(CmDevice& dev) {
  replay_parked(dev, /*service_id=*/0, /*all=*/true);  // the hold is over: REJ 8
  const TimePoint t = now();
  for (auto it = dev.steered.begin(); it != dev.steered.end();) {
    if (it->second <= t) {
      (void)uroce_cm_steer(dev.ctx, UROCE_CM_LISTEN, it->first, 0);
      it = dev.steered.erase(it);
    } else {
      ++it;
    }
  }
}

int Runtime::source_index(CmDevice& dev, const Gid& peer) {
  if (auto it = dev.source_for_peer.find(peer); it != dev.source_for_peer.end()) {
    return it->second;
  }
  const bool v4 = wire::is_ipv4_mapped(peer);
  for (size_t i = 0; i < dev.gids.size(); ++i) {
    const Gid& g = dev.gids[i];
    if (g == Gid{} || wire::is_ipv4_mapped(g) != v4) continue;
    return static_cast<int>(i);
  }
  return 0;
}

void Runtime::ah_attr_for(CmDevice& dev, const Gid& peer, ibv_ah_attr& ah) {
  std::memset(&ah, 0, sizeof ah);
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, peer.data(), 16);
  ah.grh.sgid_index = static_cast<uint8_t>(source_index(dev, peer));
  ah.grh.hop_limit = 64;
  ah.port_num = 1;
}

void Runtime::send_mad(CmDevice& dev, const cm::OutMad& out) {
  ibv_ah*& ah = dev.ahs[out.to];
  if (ah == nullptr) {
    ibv_ah_attr a{};
    ah_attr_for(dev, out.to, a);
    ah = ibv_create_ah(dev.pd, &a);
    if (ah == nullptr) {
      dev.ahs.erase(out.to);
      return;  // the agent resends what needs an answer
    }
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(out.bytes.data()), cm::kMadSize, 0};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kSendTag;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = 1;
  wr.wr.ud.remote_qkey = 0x80010000;
  if (ibv_post_send(dev.qp1, &wr, &bad) == 0) ++dev.sends_in_flight;
}

void Runtime::poll_device(CmDevice& dev) {
  ibv_cq* cq = nullptr;
  void* cq_context = nullptr;
  while (ibv_get_cq_event(dev.channel, &cq, &cq_context) == 0) ibv_ack_cq_events(cq, 1);
  ibv_req_notify_cq(dev.cq, 0);
  ibv_wc wcs[32];
  int n = 0;
  while ((n = ibv_poll_cq(dev.cq, 32, wcs)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if ((wc.wr_id & kSendTag) != 0) {
        --dev.sends_in_flight;
        continue;
      }
      const auto slot = static_cast<size_t>(wc.wr_id);
      uint8_t* buf = &dev.recv_buffers[slot * kSlotBytes];
      Gid from{};
      Gid to{};
      if (wc.status == IBV_WC_SUCCESS && wc.byte_len >= kGrhBytes && addresses_of(buf, from, to)) {
        for (size_t g = 0; g < dev.gids.size(); ++g) {
          if (dev.gids[g] == to) dev.source_for_peer[from] = static_cast<int>(g);
        }
        const std::span<const uint8_t> mad(buf + kGrhBytes, wc.byte_len - kGrhBytes);
        if (!park(dev, from, mad)) dev.agent->on_mad(now(), from, mad);
      }
      if (wc.status == IBV_WC_WR_FLUSH_ERR) continue;
      ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(kSlotBytes),
                  dev.mr->lkey};
      ibv_recv_wr wr{};
      ibv_recv_wr* bad = nullptr;
      wr.wr_id = slot;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_post_recv(dev.qp1, &wr, &bad);
    }
  }
}

void Runtime::drain(CmDevice& dev) {
  // Until both queues are empty: handling an event may queue a MAD (a REQ rdma_cm refuses
  // is answered REJ 28 from on_request), and nothing else would send it before the next
  // wake-up, which may be the peer's resend seconds later.
  cm::OutMad out;
  cm::CmEvent e;
  for (bool more = true; more;) {
    while (dev.agent->poll_out(out)) send_mad(dev, out);
    more = false;
    while (dev.agent->poll_event(e)) {
      on_event(dev, e);
      more = true;
    }
  }
  if (std::this_thread::get_id() != thread_.get_id()) eventfd_write(wake_fd_, 1);
}

void Runtime::run() {
  epoll_event evs[16];
  for (;;) {
    int timeout_ms = -1;
    bool refresh = false;
    {
      std::lock_guard lock(mu);
      if (stop_) return;
      TimePoint next = kNever;
      for (auto& d : devices) {
        next = std::min(next, d->agent->next_deadline());
        for (const auto& [sid, until] : d->steered) next = std::min(next, until);
        for (const auto& p : d->parked) next = std::min(next, p.until);
      }
      // Refresh the device list for the next wildcard rdma_listen, off the caller's time.
      if (names_at_ != TimePoint{0}) {
        next = std::min(next, names_at_ + kDeviceListAge);
        refresh = now() - names_at_ >= kDeviceListAge;
      }
      if (next != kNever) {
        const int64_t ns = (next - now()).count();
        timeout_ms = ns <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ns / 1'000'000 + 1, 60'000));
      }
    }
    const int n = epoll_wait(epoll_fd_, evs, 16, timeout_ms);
    std::vector<std::string> fresh;
    if (refresh) fresh = list_device_names();  // without the lock: it asks every netdev
    std::lock_guard lock(mu);
    if (refresh) {
      names_ = std::move(fresh);
      names_at_ = now();
    }
    if (stop_) return;
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.ptr == nullptr) {
        eventfd_t v = 0;
        eventfd_read(wake_fd_, &v);
      }
    }
    for (auto& d : devices) {
      poll_device(*d);
      d->agent->on_timer(now());
      explain_silence(*d);
      expire_steering(*d);
      drain(*d);
    }
  }
}

}  // namespace uroce::rdmacm
