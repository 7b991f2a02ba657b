#include "device/device.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "common/library_thread.hpp"

namespace uroce::device {

namespace {

constexpr size_t kBurst = 64;

uint32_t id_of(CqId cq) {
  return static_cast<uint32_t>(cq);
}

}  // namespace

uint64_t node_guid_from_mac(const std::array<uint8_t, 6>& mac) {
  const std::array<uint8_t, 8> eui = {
      static_cast<uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]};
  uint64_t v = 0;
  for (uint8_t b : eui) v = (v << 8) | b;
  return v;
}

TimePoint Device::now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimePoint(static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec);
}

Device::Device(DeviceConfig config, std::unique_ptr<PacketIo> io)
    : config_(std::move(config)), io_(std::move(io)), engine_(config_.engine) {
  rx_storage_.resize(kBurst * kPacketBufferSize);
  rx_.resize(kBurst);
  for (size_t i = 0; i < kBurst; ++i) {
    rx_[i].buf = std::span<uint8_t>(rx_storage_.data() + i * kPacketBufferSize, kPacketBufferSize);
  }
  tx_storage_.resize(kBurst * kPacketBufferSize);
  tx_.resize(kBurst);
  for (size_t i = 0; i < kBurst; ++i) {
    tx_[i].buf = std::span<uint8_t>(tx_storage_.data() + i * kPacketBufferSize, kPacketBufferSize);
  }
  events_scratch_.resize(kBurst);
  held_storage_.resize(kMaxHeldAcks * kHeldAckBytes);
  held_.resize(kMaxHeldAcks);
  for (size_t i = 0; i < kMaxHeldAcks; ++i) {
    held_[i].buf = std::span<uint8_t>(held_storage_.data() + i * kHeldAckBytes, kHeldAckBytes);
  }
  // A handoff shorter than kTimerParkMin would have the polls push the timer (a system call)
  // every few microseconds: the thread then waits on park_cv_ as before.
  if (config_.progress.thread && config_.progress.app_handoff >= kTimerParkMin) {
    park_timer_ = std::make_unique<ParkTimer>();
    if (!park_timer_->ok()) park_timer_.reset();  // out of descriptors: park_cv_ serves
  }
  engine_.set_payload_by_reference(io_->takes_payload_by_reference());
  if (config_.progress.thread) {
    thread_ = common::start_library_thread([this] { progress_loop(); });
    // Named so that top -H, ps -L and taskset -p can tell it from the application's threads;
    // by this thread, so the name is there when the device is (not once the thread runs).
    pthread_setname_np(thread_.native_handle(), "uroce-progress");
  }
}

Device::~Device() {
  flush_held_acks();
  stop_.store(true);
  unpark();
  if (thread_.joinable()) {
    io_->wake();
    thread_.join();
  }
  if (config_.observer) config_.observer->on_close(*this);
  for (auto& [lkey, range] : pinned_) munlock(range.addr, range.length);
}

// ---------------------------------------------------------------------------------------
// Attributes.

DeviceAttr Device::query_device() const {
  const transport::DeviceLimits& l = config_.engine.limits;
  DeviceAttr a;
  a.node_guid = config_.node_guid;
  a.sys_image_guid = config_.node_guid;
  a.max_mr_size = l.max_mr_size;
  a.max_qp = static_cast<int>(l.max_qp);
  a.max_qp_wr = static_cast<int>(l.max_qp_wr);
  a.device_cap_flags = kDeviceBadPkeyCntr | kDeviceBadQkeyCntr | kDevicePortActiveEvent |
                       kDeviceSysImageGuid | kDeviceRcRnrNakGen | kDeviceSrqResize |
                       kDeviceMemWindow | kDeviceMemWindowType2B;
  a.max_sge = static_cast<int>(l.max_sge);
  a.max_sge_rd = static_cast<int>(l.max_sge);
  a.max_cq = static_cast<int>(l.max_cq);
  a.max_cqe = static_cast<int>(l.max_cqe);
  a.max_mr = static_cast<int>(l.max_mr);
  a.max_mw = static_cast<int>(l.max_mw);
  a.max_pd = static_cast<int>(l.max_pd);
  a.max_qp_rd_atom = static_cast<int>(l.max_qp_rd_atom);
  a.max_res_rd_atom = static_cast<int>(l.max_qp_rd_atom * l.max_qp);
  a.max_qp_init_rd_atom = static_cast<int>(l.max_qp_init_rd_atom);
  a.atomic_cap = AtomicCap::kHca;
  a.max_srq = static_cast<int>(l.max_srq);
  a.max_srq_wr = static_cast<int>(l.max_srq_wr);
  a.max_srq_sge = static_cast<int>(l.max_srq_sge);
  a.phys_port_cnt = static_cast<uint8_t>(config_.ports.size());
  a.max_inline_data = static_cast<int>(l.max_inline_data);
  return a;
}

const PortInfo* Device::port(uint8_t port_num) const {
  for (const PortInfo& p : config_.ports) {
    if (p.port_num == port_num) return &p;
  }
  return nullptr;
}

Status Device::query_port(uint8_t port_num, PortAttr& attr) const {
  const PortInfo* p = port(port_num);
  if (p == nullptr) return Status(EINVAL, "no such port (ports are numbered from 1)");
  attr = PortAttr{};
  attr.state = p->state;
  attr.max_mtu = transport::Mtu::k4096;
  attr.active_mtu = p->active_mtu;
  attr.gid_tbl_len = static_cast<int>(p->gids.size());
  attr.max_msg_sz = 0x80000000u;
  attr.pkey_tbl_len = 1;
  attr.phys_state = p->state == PortState::kActive ? 5 : 3;
  attr.link_layer = kLinkLayerEthernet;
  attr.netdev_mtu = p->netdev_mtu;
  attr.speed_mbps = p->speed_mbps;
  attr.netdev = p->netdev;
  // ibv width/speed encodings for the netdev speed, as ib_get_eth_speed does.
  const int64_t s = p->speed_mbps;
  if (s >= 100000) {
    attr.active_width = 2, attr.active_speed = 64;  // 4X EDR
  } else if (s >= 40000) {
    attr.active_width = 2, attr.active_speed = 8;  // 4X QDR
  } else if (s >= 25000) {
    attr.active_width = 1, attr.active_speed = 32;  // 1X EDR
  } else if (s >= 10000) {
    attr.active_width = 1, attr.active_speed = 16;  // 1X FDR10
  } else {
    attr.active_width = 1, attr.active_speed = 1;  // 1X SDR
  }
  return Status::ok();
}

Status Device::query_gid(uint8_t port_num, uint32_t index, Gid& gid) const {
  const PortInfo* p = port(port_num);
  if (p == nullptr) return Status(EINVAL, "no such port (ports are numbered from 1)");
  if (index >= p->gids.size()) return Status(EINVAL, "GID index beyond the GID table");
  if (p->gids[index].empty()) return Status(ENODATA, "GID table entry is empty");
  gid = p->gids[index].gid;
  return Status::ok();
}

Status Device::resolve_av(transport::AhAttr& ah) const {
  const uint8_t port_num = ah.port_num == 0 ? 1 : ah.port_num;
  Gid sgid{};
  Status st = query_gid(port_num, ah.sgid_index, sgid);
  if (!st) return st;
  if (!io_->can_send_from(sgid)) {
    return Status(EADDRNOTAVAIL,
                  "no UDP socket is bound to the address of this GID index; open the device "
                  "with that address among its bind addresses");
  }
  ah.sgid = sgid;
  ah.port_num = port_num;
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Resources.

Result<PdId> Device::alloc_pd() {
  std::lock_guard lock(engine_mu_);
  return engine_.alloc_pd();
}

Status Device::dealloc_pd(PdId pd) {
  std::lock_guard lock(engine_mu_);
  return engine_.dealloc_pd(pd);
}

Result<transport::MrInfo> Device::reg_mr(PdId pd, void* addr, size_t length, uint32_t access,
                                         bool pin) {
  std::lock_guard lock(engine_mu_);
  if (pin && length > 0) {
    rlimit lim{};
    getrlimit(RLIMIT_MEMLOCK, &lim);
    if (lim.rlim_cur != RLIM_INFINITY && pinned_bytes_ + length > lim.rlim_cur) {
      return Status(ENOMEM,
                    "memlock limit (RLIMIT_MEMLOCK) too low for this pinned registration: raise "
                    "it (ulimit -l, LimitMEMLOCK=, /etc/security/limits.conf) or register "
                    "without pinning");
    }
  }
  Result<transport::MrInfo> r = engine_.reg_mr(pd, addr, length, access);
  if (!r || !pin || length == 0) return r;
  if (mlock(addr, length) != 0) {
    (void)engine_.dereg_mr(r->lkey);
    return Status(errno == EPERM ? EPERM : ENOMEM,
                  "mlock failed for a pinned registration: raise RLIMIT_MEMLOCK (ulimit -l) or "
                  "register without pinning");
  }
  pinned_[r->lkey] = PinnedRange{addr, length};
  pinned_bytes_ += length;
  return r;
}

Result<transport::MrInfo> Device::rereg_mr(uint32_t lkey, PdId pd, void* addr, size_t length,
                                           uint32_t access) {
  std::lock_guard lock(engine_mu_);
  // A pinned range would have to move its mlock with it; the drop-in pins nothing.
  if (pinned_.contains(lkey)) return Status(EOPNOTSUPP, "rereg_mr: the MR is pinned");
  return engine_.rereg_mr(lkey, pd, addr, length, access);
}

Status Device::dereg_mr(uint32_t lkey) {
  std::lock_guard lock(engine_mu_);
  Status st = engine_.dereg_mr(lkey);
  if (!st) return st;
  if (auto it = pinned_.find(lkey); it != pinned_.end()) {
    munlock(it->second.addr, it->second.length);
    pinned_bytes_ -= it->second.length;
    pinned_.erase(it);
  }
  return st;
}

Result<uint32_t> Device::alloc_mw(PdId pd, transport::MwType type) {
  std::lock_guard lock(engine_mu_);
  return engine_.alloc_mw(pd, type);
}

Status Device::dealloc_mw(uint32_t rkey) {
  std::lock_guard lock(engine_mu_);
  return engine_.dealloc_mw(rkey);
}

Result<ChannelId> Device::create_comp_channel() {
  auto queue = std::make_unique<EventQueue<CqId>>();
  if (!queue->valid()) return Status(EMFILE, "eventfd failed: too many open files");
  std::lock_guard lock(channel_mu_);
  const uint32_t id = next_channel_++;
  channels_[id] = Channel{std::move(queue), 0};
  return ChannelId(id);
}

Status Device::destroy_comp_channel(ChannelId ch) {
  std::lock_guard lock(channel_mu_);
  auto it = channels_.find(static_cast<uint32_t>(ch));
  if (it == channels_.end()) return Status(EINVAL, "no such completion channel");
  if (it->second.cqs != 0) return Status(EBUSY, "completion channel still used by a CQ");
  channels_.erase(it);
  return Status::ok();
}

int Device::channel_fd(ChannelId ch) const {
  std::lock_guard lock(channel_mu_);
  auto it = channels_.find(static_cast<uint32_t>(ch));
  return it == channels_.end() ? -1 : it->second.queue->fd();
}

Result<CqId> Device::create_cq(uint32_t cqe, std::optional<ChannelId> channel) {
  std::lock_guard lock(engine_mu_);
  std::lock_guard chan_lock(channel_mu_);
  if (channel && !channels_.contains(static_cast<uint32_t>(*channel))) {
    return Status(EINVAL, "no such completion channel");
  }
  Result<CqId> r = engine_.create_cq(cqe);
  if (!r) return r;
  cqs_[id_of(*r)] = CqState{channel, 0, 0};
  if (channel) ++channels_[static_cast<uint32_t>(*channel)].cqs;
  return r;
}

Status Device::destroy_cq(CqId cq) {
  std::lock_guard lock(engine_mu_);
  std::lock_guard chan_lock(channel_mu_);
  auto it = cqs_.find(id_of(cq));
  if (it != cqs_.end() && it->second.events_got != it->second.events_acked) {
    return Status(EBUSY, "CQ has completion events not acked yet (ack_cq_events)");
  }
  Status st = engine_.destroy_cq(cq);
  if (!st || it == cqs_.end()) return st;
  if (it->second.channel) --channels_[static_cast<uint32_t>(*it->second.channel)].cqs;
  cqs_.erase(it);
  return st;
}

uint32_t Device::cq_capacity(CqId cq) const {
  std::lock_guard lock(engine_mu_);
  return engine_.cq_capacity(cq);
}

Status Device::resize_cq(CqId cq, uint32_t cqe) {
  // Sends already posted that complete without a peer (UD, UC: when their last packet goes
  // out) must count against the new size, as they do on rxe, which runs a post at once. A
  // post's kick builds them only when the I/O is free this instant; waiting for the I/O here
  // and building what is pending makes "post, then shrink below what was posted" fail
  // with EINVAL every time instead of when the progress thread happened to be busy.
  {
    std::lock_guard io(io_mu_);
    for (int pass = 0; pass < kResizeFlushPasses && flush_tx(); ++pass) {
    }
  }
  std::lock_guard lock(engine_mu_);
  return engine_.resize_cq(cq, cqe);
}

Result<SrqId> Device::create_srq(PdId pd, const transport::SrqInitAttr& attr) {
  std::lock_guard lock(engine_mu_);
  return engine_.create_srq(pd, attr);
}

Status Device::modify_srq(SrqId srq, const transport::SrqAttr& attr, uint32_t mask) {
  std::lock_guard lock(engine_mu_);
  return engine_.modify_srq(srq, attr, mask);
}

Status Device::query_srq(SrqId srq, transport::SrqAttr& attr) const {
  std::lock_guard lock(engine_mu_);
  return engine_.query_srq(srq, attr);
}

Status Device::destroy_srq(SrqId srq) {
  std::lock_guard lock(engine_mu_);
  return engine_.destroy_srq(srq);
}

Result<transport::QpInfo> Device::create_qp(PdId pd, const transport::QpInitAttr& attr) {
  Result<transport::QpInfo> r = [&] {
    std::lock_guard lock(engine_mu_);
    return engine_.create_qp(pd, attr);
  }();
  if (r && config_.observer) config_.observer->on_qp_created(r->qpn);
  return r;
}

Status Device::modify_qp(uint32_t qpn, const transport::QpAttr& attr, uint32_t mask) {
  transport::QpAttr resolved = attr;
  if ((mask & transport::kQpAv) != 0) {
    Status st = resolve_av(resolved.ah_attr);
    if (!st) return st;
  }
  bool raised = false;
  Status st = [&] {
    std::lock_guard lock(engine_mu_);
    engine_.set_time(now());  // a move to ERR completes WRs: stamp them with the time of now
    Status s = engine_.modify_qp(qpn, resolved, mask);
    raised = engine_.has_events();
    return s;
  }();
  // A move to ERR flushes the WRs: the CQ events (and a last-WQE event) go out now, not at
  // the next pass, which may be a whole sleep away.
  if (raised) kick();
  if (st && config_.observer) config_.observer->on_qp_modified(qpn, resolved, mask);
  return st;
}

Status Device::query_qp(uint32_t qpn, transport::QpAttr& attr, transport::QpInitAttr& init) const {
  std::lock_guard lock(engine_mu_);
  return engine_.query_qp(qpn, attr, init);
}

Status Device::destroy_qp(uint32_t qpn) {
  flush_held_acks();
  Status st = [&] {
    std::lock_guard lock(engine_mu_);
    return engine_.destroy_qp(qpn);
  }();
  if (st && config_.observer) config_.observer->on_qp_destroyed(qpn);
  return st;
}

// ---------------------------------------------------------------------------------------
// Data path.

Status Device::post_send(uint32_t qpn, const transport::SendWr& wr, bool ring) {
  // Without engine_mu_: the WQE goes into the QP's send queue under that queue's own lock
  // (transport/send_queue.hpp), so a post never waits for a pass the progress thread is in;
  // the pass (or this call's doorbell) takes it.
  bool idle = false;
  const Status st = engine_.submit_send(qpn, wr, ring ? &idle : nullptr);
  const TimePoint t = post_time();
  // A failed WR ends its list: what the list posted before it must still go out.
  if (ring || !st) ring_doorbell_at(t, idle && st);
  return st;
}

Status Device::post_recv(uint32_t qpn, const transport::RecvWr& wr) {
  // Without engine_mu_, as post_send: the WQE goes into the QP's receive queue under that
  // queue's own lock (transport/recv_queue.hpp). A receive needs no pass (a ping-pong posts
  // one per message).
  bool to_engine = false;
  Status st = engine_.submit_recv(qpn, wr, &to_engine);
  if (!st || !to_engine) return st;
  // A QP in ERR: the engine completes the WR at once with a flush, and its CQ event must go
  // out now.
  bool raised = false;
  {
    std::lock_guard lock(engine_mu_);
    st = engine_.post_recv(qpn, wr);
    if (!st) return st;
    raised = engine_.has_events();
  }
  if (raised) kick();
  return Status::ok();
}

Status Device::post_srq_recv(SrqId srq, const transport::RecvWr& wr) {
  // Without engine_mu_: an SRQ has no state that needs the engine (its limit event fires as
  // the engine takes WQEs, not as they are posted).
  return engine_.post_srq_recv(srq, wr);
}

int Device::poll_cq(CqId cq, std::span<transport::Wc> out) {
  // Without engine_mu_: the CQ is the engine's one structure built for a reader on another
  // thread, so a poll never waits for a pass the progress thread is in the middle of.
  int n = engine_.poll_cq(cq, out);
  if (n < 0) return n;
  // An empty poll drives the device; so does one with WQEs posted since the last pass
  // (ring_doorbell left them for it), whose completions then go after those already found.
  if ((n == 0 || posts_waiting_.load(std::memory_order_relaxed)) &&
      config_.progress.app_calls_drive) {
    if (progress() && static_cast<size_t>(n) < out.size()) {
      n += engine_.poll_cq(cq, out.subspan(static_cast<size_t>(n)));
    }
  }
  if (config_.observer) {
    for (int i = 0; i < n; ++i) {
      if (out[i].status != transport::WcStatus::kSuccess) {
        config_.observer->on_completion_error(*this, out[i]);
      }
    }
  }
  return n;
}

Status Device::req_notify_cq(CqId cq, bool solicited_only) {
  // Arming means the application is about to block: the progress thread must not stay
  // parked waiting for polls that will not come.
  end_app_driving();
  std::lock_guard lock(engine_mu_);
  return engine_.req_notify_cq(cq, solicited_only);
}

void Device::ack_cq_events(CqId cq, uint32_t count) {
  std::lock_guard lock(channel_mu_);
  auto it = cqs_.find(id_of(cq));
  if (it == cqs_.end()) return;
  it->second.events_acked = std::min(it->second.events_got, it->second.events_acked + count);
}

// The I/O lock: steering changes touch the shared port's registry and program, as maintain()
// does.
int Device::cm_capable(bool on) {
  std::lock_guard lock(io_mu_);
  observe_held_rx();
  return io_->cm_capable(on);
}

int Device::cm_listen(uint64_t service_id, bool on) {
  std::lock_guard lock(io_mu_);
  observe_held_rx();
  return io_->cm_listen(service_id, on);
}

transport::Counters Device::counters() const {
  std::lock_guard lock(engine_mu_);
  return engine_.counters();
}

std::optional<transport::Counters> Device::qp_counters(uint32_t qpn) const {
  std::lock_guard lock(engine_mu_);
  const transport::Counters* c = engine_.qp_counters(qpn);
  if (c == nullptr) return std::nullopt;
  return *c;
}

std::optional<uint32_t> Device::qp_acked_psn(uint32_t qpn) const {
  std::lock_guard lock(engine_mu_);
  const std::optional<Psn> psn = engine_.qp_acked_psn(qpn);
  if (!psn) return std::nullopt;
  return psn->value();
}

}  // namespace uroce::device
