// RAII objects of the C++ API: each holds the device and one id, and releases it on
// destruction. Moves leave the source empty (its destructor does nothing).
#include <utility>

#include "device/device.hpp"
#include "uroce/verbs.hpp"

namespace uroce {

// ---- MemoryRegion
MemoryRegion::MemoryRegion(std::shared_ptr<device::Device> dev, MrInfo info)
    : dev_(std::move(dev)), info_(info) {}
MemoryRegion::MemoryRegion(MemoryRegion&& o) noexcept : dev_(std::move(o.dev_)), info_(o.info_) {}
MemoryRegion& MemoryRegion::operator=(MemoryRegion&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    dev_ = std::move(o.dev_);
    info_ = o.info_;
  }
  return *this;
}
MemoryRegion::~MemoryRegion() {
  (void)destroy();
}
Status MemoryRegion::destroy() {
  if (!dev_) return Status::ok();
  Status st = dev_->dereg_mr(info_.lkey);
  if (st) dev_.reset();
  return st;
}

// ---- MemoryWindow
MemoryWindow::MemoryWindow(std::shared_ptr<device::Device> dev, uint32_t rkey, MwType type)
    : dev_(std::move(dev)), rkey_(rkey), type_(type) {}
MemoryWindow::MemoryWindow(MemoryWindow&& o) noexcept
    : dev_(std::move(o.dev_)), rkey_(o.rkey_), type_(o.type_) {}
MemoryWindow& MemoryWindow::operator=(MemoryWindow&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    dev_ = std::move(o.dev_);
    rkey_ = o.rkey_;
    type_ = o.type_;
  }
  return *this;
}
MemoryWindow::~MemoryWindow() {
  (void)destroy();
}
Status MemoryWindow::destroy() {
  if (!dev_) return Status::ok();
  Status st = dev_->dealloc_mw(rkey_);
  if (st) dev_.reset();
  return st;
}

// ---- CompletionChannel
CompletionChannel::CompletionChannel(std::shared_ptr<device::Device> dev, device::ChannelId id)
    : dev_(std::move(dev)), id_(id) {}
CompletionChannel::CompletionChannel(CompletionChannel&& o) noexcept
    : dev_(std::move(o.dev_)), id_(o.id_) {}
CompletionChannel& CompletionChannel::operator=(CompletionChannel&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    dev_ = std::move(o.dev_);
    id_ = o.id_;
  }
  return *this;
}
CompletionChannel::~CompletionChannel() {
  (void)destroy();
}
int CompletionChannel::fd() const {
  return dev_ ? dev_->channel_fd(id_) : -1;
}
Result<CqId> CompletionChannel::get_event(Nanos timeout) {
  if (!dev_) return Status(EINVAL, "completion channel destroyed");
  return dev_->get_cq_event(id_, timeout);
}
Status CompletionChannel::destroy() {
  if (!dev_) return Status::ok();
  Status st = dev_->destroy_comp_channel(id_);
  if (st) dev_.reset();
  return st;
}

// ---- CompletionQueue
CompletionQueue::CompletionQueue(std::shared_ptr<device::Device> dev, CqId id)
    : dev_(std::move(dev)), id_(id), live_(true) {}
CompletionQueue::CompletionQueue(CompletionQueue&& o) noexcept
    : dev_(std::move(o.dev_)), id_(o.id_), live_(std::exchange(o.live_, false)) {}
CompletionQueue& CompletionQueue::operator=(CompletionQueue&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    dev_ = std::move(o.dev_);
    id_ = o.id_;
    live_ = std::exchange(o.live_, false);
  }
  return *this;
}
CompletionQueue::~CompletionQueue() {
  (void)destroy();
}
uint32_t CompletionQueue::capacity() const {
  return live_ ? dev_->cq_capacity(id_) : 0;
}
int CompletionQueue::poll(std::span<Wc> out) {
  return live_ ? dev_->poll_cq(id_, out) : -EINVAL;
}
Status CompletionQueue::req_notify(bool solicited_only) {
  if (!live_) return Status(EINVAL, "completion queue destroyed");
  return dev_->req_notify_cq(id_, solicited_only);
}
void CompletionQueue::ack_events(uint32_t count) {
  if (live_) dev_->ack_cq_events(id_, count);
}
Status CompletionQueue::destroy() {
  if (!live_) return Status::ok();
  Status st = dev_->destroy_cq(id_);
  if (st) live_ = false;
  return st;
}

// ---- SharedReceiveQueue
SharedReceiveQueue::SharedReceiveQueue(std::shared_ptr<device::Device> dev, SrqId id)
    : dev_(std::move(dev)), id_(id), live_(true) {}
SharedReceiveQueue::SharedReceiveQueue(SharedReceiveQueue&& o) noexcept
    : dev_(std::move(o.dev_)), id_(o.id_), live_(std::exchange(o.live_, false)) {}
SharedReceiveQueue& SharedReceiveQueue::operator=(SharedReceiveQueue&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    dev_ = std::move(o.dev_);
    id_ = o.id_;
    live_ = std::exchange(o.live_, false);
  }
  return *this;
}
SharedReceiveQueue::~SharedReceiveQueue() {
  (void)destroy();
}
Status SharedReceiveQueue::post_recv(const RecvWr& wr) {
  if (!live_) return Status(EINVAL, "shared receive queue destroyed");
  return dev_->post_srq_recv(id_, wr);
}
Status SharedReceiveQueue::modify(const SrqAttr& attr, uint32_t mask) {
  if (!live_) return Status(EINVAL, "shared receive queue destroyed");
  return dev_->modify_srq(id_, attr, mask);
}
Status SharedReceiveQueue::query(SrqAttr& attr) const {
  if (!live_) return Status(EINVAL, "shared receive queue destroyed");
  return dev_->query_srq(id_, attr);
}
Status SharedReceiveQueue::destroy() {
  if (!live_) return Status::ok();
  Status st = dev_->destroy_srq(id_);
  if (st) live_ = false;
  return st;
}

// ---- QueuePair
QueuePair::QueuePair(std::shared_ptr<device::Device> dev, transport::QpInfo info, QpType type)
    : dev_(std::move(dev)), info_(info), type_(type), live_(true) {}
QueuePair::QueuePair(QueuePair&& o) noexcept
    : dev_(std::move(o.dev_)),
      info_(o.info_),
      type_(o.type_),
      live_(std::exchange(o.live_, false)) {}
QueuePair& QueuePair::operator=(QueuePair&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    dev_ = std::move(o.dev_);
    info_ = o.info_;
    type_ = o.type_;
    live_ = std::exchange(o.live_, false);
  }
  return *this;
}
QueuePair::~QueuePair() {
  (void)destroy();
}
Status QueuePair::modify(const QpAttr& attr, uint32_t mask) {
  if (!live_) return Status(EINVAL, "queue pair destroyed");
  return dev_->modify_qp(info_.qpn, attr, mask);
}
Status QueuePair::query(QpAttr& attr, QpInitAttr& init) const {
  if (!live_) return Status(EINVAL, "queue pair destroyed");
  return dev_->query_qp(info_.qpn, attr, init);
}
QpState QueuePair::state() const {
  QpAttr attr;
  QpInitAttr init;
  if (!query(attr, init)) return QpState::kErr;
  return attr.qp_state;
}
Status QueuePair::post_send(const SendWr& wr) {
  if (!live_) return Status(EINVAL, "queue pair destroyed");
  return dev_->post_send(info_.qpn, wr);
}
Status QueuePair::post_send(std::span<const SendWr> wrs, size_t* bad) {
  if (!live_) {
    if (bad != nullptr) *bad = 0;
    return Status(EINVAL, "queue pair destroyed");
  }
  for (size_t i = 0; i < wrs.size(); ++i) {
    // One doorbell for the list, after its last WR (or the one that fails).
    Status st = dev_->post_send(info_.qpn, wrs[i], i + 1 == wrs.size());
    if (!st) {
      if (bad != nullptr) *bad = i;
      return st;
    }
  }
  return Status::ok();
}
Status QueuePair::post_recv(const RecvWr& wr) {
  if (!live_) return Status(EINVAL, "queue pair destroyed");
  return dev_->post_recv(info_.qpn, wr);
}
std::optional<Counters> QueuePair::counters() const {
  if (!live_) return std::nullopt;
  return dev_->qp_counters(info_.qpn);
}
Status QueuePair::destroy() {
  if (!live_) return Status::ok();
  Status st = dev_->destroy_qp(info_.qpn);
  if (st) live_ = false;
  return st;
}

// ---- ProtectionDomain
ProtectionDomain::ProtectionDomain(std::shared_ptr<device::Device> dev, PdId id)
    : dev_(std::move(dev)), id_(id), live_(true) {}
ProtectionDomain::ProtectionDomain(ProtectionDomain&& o) noexcept
    : dev_(std::move(o.dev_)), id_(o.id_), live_(std::exchange(o.live_, false)) {}
ProtectionDomain& ProtectionDomain::operator=(ProtectionDomain&& o) noexcept {
  if (this != &o) {
    (void)destroy();
    dev_ = std::move(o.dev_);
    id_ = o.id_;
    live_ = std::exchange(o.live_, false);
  }
  return *this;
}
ProtectionDomain::~ProtectionDomain() {
  (void)destroy();
}

Result<MemoryRegion> ProtectionDomain::reg_mr(void* addr, size_t length, uint32_t access,
                                              bool pin) {
  if (!live_) return Status(EINVAL, "protection domain destroyed");
  auto r = dev_->reg_mr(id_, addr, length, access, pin);
  if (!r) return r.status();
  return MemoryRegion(dev_, *r);
}

Result<MemoryWindow> ProtectionDomain::alloc_mw(MwType type) {
  if (!live_) return Status(EINVAL, "protection domain destroyed");
  auto r = dev_->alloc_mw(id_, type);
  if (!r) return r.status();
  return MemoryWindow(dev_, *r, type);
}

Result<QueuePair> ProtectionDomain::create_qp(const QpInitAttr& attr) {
  if (!live_) return Status(EINVAL, "protection domain destroyed");
  auto r = dev_->create_qp(id_, attr);
  if (!r) return r.status();
  return QueuePair(dev_, *r, attr.qp_type);
}

Result<SharedReceiveQueue> ProtectionDomain::create_srq(const SrqInitAttr& attr) {
  if (!live_) return Status(EINVAL, "protection domain destroyed");
  auto r = dev_->create_srq(id_, attr);
  if (!r) return r.status();
  return SharedReceiveQueue(dev_, *r);
}

Result<AddressHandle> ProtectionDomain::create_ah(const AhAttr& attr) {
  if (!live_) return Status(EINVAL, "protection domain destroyed");
  AhAttr resolved = attr;
  Status st = dev_->resolve_av(resolved);
  if (!st) return st;
  return AddressHandle(resolved);
}

Status ProtectionDomain::destroy() {
  if (!live_) return Status::ok();
  Status st = dev_->dealloc_pd(id_);
  if (st) live_ = false;
  return st;
}

}  // namespace uroce
