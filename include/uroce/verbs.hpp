// The uroce C++ verbs API: ibverbs-shaped, RAII, status results on the data path.
//
//   auto opened = uroce::Device::open({.name = "uroce_lo", .bind = {"127.0.0.1"}});
//   if (!opened) { std::cerr << opened.error().message << "\n"; return 1; }
//   uroce::Device& dev = opened.value();
//   auto pd = dev.alloc_pd().value();                       // Result<T>: check is_ok() first
//   auto mr = pd.reg_mr(buf, len, uroce::kAccessLocalWrite | uroce::kAccessRemoteWrite);
//   auto cq = dev.create_cq(256);
//   auto qp = pd.create_qp({.qp_type = uroce::QpType::kRc, .send_cq = cq->id(), ...});
//   qp->modify(attr, mask);  qp->post_send(wr);  cq->poll(wcs);
//
// Every object holds the device alive (shared ownership) and destroys its resource in its
// destructor. As in ibverbs, destroy children before parents (QPs before their CQs, PD, SRQ;
// MRs before their PD): a parent destroyed while in use stays allocated in the device (the
// destructor cannot report EBUSY), so call destroy() explicitly where that matters.
//
// Thread safety: all calls are thread-safe (the device serialises them). Progress is made by
// the device's progress thread; see docs/api.md.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "uroce/types.hpp"

namespace uroce {
namespace device {
class Device;
}

class Device;
class CompletionQueue;

struct OpenOptions {
  // "uroce_<netdev>" (as Device::list() names them); empty: the first device in list order
  // (the default route's netdev first, loopback last). "uroce0" is a deprecated alias of
  // the first device.
  std::string name;
  std::vector<std::string> netdevs;  // only these netdevs get devices; empty: every one up
  std::vector<std::string> bind;     // addresses to bind; empty: every GID's address
  uint16_t udp_port = 4791;
  uint32_t active_mtu = 0;   // bytes; 0: derived from the netdev MTU
  bool share_port = true;    // share each address's UDP port with other processes
  std::string registry_dir;  // reuseport registry; empty: $XDG_RUNTIME_DIR/uroce or /tmp
  uint64_t seed = 0;         // lkey/rkey randomness; 0: time and pid
  transport::DeviceLimits limits;
  ProgressOptions progress;

  // Defaults overridden by the environment (UROCE_UDP_PORT, UROCE_NETDEVS, UROCE_DEVICE_ADDR,
  // UROCE_MTU, UROCE_SPIN_US; docs/configuration.md), parsed as the drop-in and the CLI
  // parse them. nullopt with `error` set (one line naming the variable) when one is malformed.
  [[nodiscard]] static std::optional<OpenOptions> from_env(std::string& error);
};

struct OpenError {
  int code = 0;  // errno value
  std::string message;
};

struct PortInfo {
  uint8_t port_num = 1;
  std::string netdev;
  PortState state = PortState::kDown;
  Mtu active_mtu = Mtu::k1024;
  std::vector<Gid> gids;  // index order; all-zero = empty entry
};

struct DeviceInfo {
  std::string name;
  uint64_t node_guid = 0;
  std::vector<PortInfo> ports;
};

class MemoryRegion {
 public:
  MemoryRegion(MemoryRegion&&) noexcept;
  MemoryRegion& operator=(MemoryRegion&&) noexcept;
  ~MemoryRegion();

  [[nodiscard]] uint32_t lkey() const { return info_.lkey; }
  [[nodiscard]] uint32_t rkey() const { return info_.rkey; }
  [[nodiscard]] void* addr() const { return reinterpret_cast<void*>(info_.addr); }
  [[nodiscard]] uint64_t length() const { return info_.length; }
  [[nodiscard]] const MrInfo& info() const { return info_; }
  // An SGE over [addr + offset, addr + offset + length).
  [[nodiscard]] Sge sge(uint64_t offset, uint32_t length) const {
    return Sge{info_.addr + offset, length, info_.lkey};
  }
  Status destroy();  // ibv_dereg_mr

 private:
  friend class ProtectionDomain;
  MemoryRegion(std::shared_ptr<device::Device> dev, MrInfo info);
  std::shared_ptr<device::Device> dev_;
  MrInfo info_;
};

// A memory window (ibv_alloc_mw). Bind it with a kBindMw SendWr whose bind_mw.mw_rkey is
// rkey() and whose bind_mw.rkey is the key it gets (next_rkey(): the key byte moved on). The
// window learns the new key only when the bind completes, so keep it: set_rkey() records it
// for next_rkey() and destroy(). A type 2 window is then usable through that QP only, until a
// LOCAL_INV or a peer's SEND with Invalidate frees it.
class MemoryWindow {
 public:
  MemoryWindow(MemoryWindow&&) noexcept;
  MemoryWindow& operator=(MemoryWindow&&) noexcept;
  ~MemoryWindow();

  [[nodiscard]] uint32_t rkey() const { return rkey_; }
  [[nodiscard]] MwType type() const { return type_; }
  // The R_Key with the next key byte (ibv_inc_rkey), for the next BIND_MW.
  [[nodiscard]] uint32_t next_rkey() const { return (rkey_ & ~0xFFu) | ((rkey_ + 1) & 0xFFu); }
  void set_rkey(uint32_t rkey) { rkey_ = rkey; }
  Status destroy();  // ibv_dealloc_mw (unbinds first)

 private:
  friend class ProtectionDomain;
  MemoryWindow(std::shared_ptr<device::Device> dev, uint32_t rkey, MwType type);
  std::shared_ptr<device::Device> dev_;
  uint32_t rkey_ = 0;
  MwType type_ = MwType::kType1;
};

class AddressHandle {
 public:
  // The resolved address vector (sgid filled from sgid_index): put it in SendWr::ud.ah.
  [[nodiscard]] const AhAttr& attr() const { return attr_; }

 private:
  friend class ProtectionDomain;
  explicit AddressHandle(const AhAttr& attr) : attr_(attr) {}
  AhAttr attr_;
};

class CompletionChannel {
 public:
  CompletionChannel(CompletionChannel&&) noexcept;
  CompletionChannel& operator=(CompletionChannel&&) noexcept;
  ~CompletionChannel();

  // Readable (poll/epoll POLLIN) while a completion event is queued.
  [[nodiscard]] int fd() const;
  // ibv_get_cq_event: the CQ that got a completion after req_notify; waits up to `timeout`
  // (0: poll, negative: forever); EAGAIN when none. Ack it with CompletionQueue::ack_events.
  Result<CqId> get_event(Nanos timeout = Nanos(-1));
  [[nodiscard]] device::ChannelId id() const { return id_; }
  Status destroy();

 private:
  friend class Device;
  CompletionChannel(std::shared_ptr<device::Device> dev, device::ChannelId id);
  std::shared_ptr<device::Device> dev_;
  device::ChannelId id_{};
};

class CompletionQueue {
 public:
  CompletionQueue(CompletionQueue&&) noexcept;
  CompletionQueue& operator=(CompletionQueue&&) noexcept;
  ~CompletionQueue();

  [[nodiscard]] CqId id() const { return id_; }
  [[nodiscard]] uint32_t capacity() const;
  // ibv_poll_cq: up to out.size() completions; the count, or -EINVAL.
  int poll(std::span<Wc> out);
  // ibv_req_notify_cq: one event on the channel for the next (solicited) completion.
  Status req_notify(bool solicited_only = false);
  void ack_events(uint32_t count);  // ibv_ack_cq_events
  Status destroy();

 private:
  friend class Device;
  CompletionQueue(std::shared_ptr<device::Device> dev, CqId id);
  std::shared_ptr<device::Device> dev_;
  CqId id_{};
  bool live_ = false;
};

class SharedReceiveQueue {
 public:
  SharedReceiveQueue(SharedReceiveQueue&&) noexcept;
  SharedReceiveQueue& operator=(SharedReceiveQueue&&) noexcept;
  ~SharedReceiveQueue();

  [[nodiscard]] SrqId id() const { return id_; }
  Status post_recv(const RecvWr& wr);
  Status modify(const SrqAttr& attr, uint32_t mask);
  Status query(SrqAttr& attr) const;
  Status destroy();

 private:
  friend class ProtectionDomain;
  SharedReceiveQueue(std::shared_ptr<device::Device> dev, SrqId id);
  std::shared_ptr<device::Device> dev_;
  SrqId id_{};
  bool live_ = false;
};

class QueuePair {
 public:
  QueuePair(QueuePair&&) noexcept;
  QueuePair& operator=(QueuePair&&) noexcept;
  ~QueuePair();

  [[nodiscard]] uint32_t qp_num() const { return info_.qpn; }
  [[nodiscard]] QpType type() const { return type_; }
  [[nodiscard]] const QpCap& cap() const { return info_.cap; }  // granted capabilities
  // ibv_modify_qp; with kQpAv the source GID comes from ah_attr.sgid_index.
  Status modify(const QpAttr& attr, uint32_t mask);
  Status query(QpAttr& attr, QpInitAttr& init) const;
  [[nodiscard]] QpState state() const;
  Status post_send(const SendWr& wr);
  // Posts wrs in order; stops at the first failure and reports its index in *bad.
  Status post_send(std::span<const SendWr> wrs, size_t* bad = nullptr);
  Status post_recv(const RecvWr& wr);
  [[nodiscard]] std::optional<Counters> counters() const;
  Status destroy();

 private:
  friend class ProtectionDomain;
  QueuePair(std::shared_ptr<device::Device> dev, transport::QpInfo info, QpType type);
  std::shared_ptr<device::Device> dev_;
  transport::QpInfo info_;
  QpType type_ = QpType::kRc;
  bool live_ = false;
};

class ProtectionDomain {
 public:
  ProtectionDomain(ProtectionDomain&&) noexcept;
  ProtectionDomain& operator=(ProtectionDomain&&) noexcept;
  ~ProtectionDomain();

  [[nodiscard]] PdId id() const { return id_; }
  // ibv_reg_mr. pin: mlock the pages (checked against RLIMIT_MEMLOCK).
  Result<MemoryRegion> reg_mr(void* addr, size_t length, uint32_t access, bool pin = false);
  Result<MemoryWindow> alloc_mw(MwType type);  // ibv_alloc_mw
  Result<QueuePair> create_qp(const QpInitAttr& attr);
  Result<SharedReceiveQueue> create_srq(const SrqInitAttr& attr);
  // ibv_create_ah: resolves the source GID from attr.sgid_index (EINVAL beyond the table,
  // ENODATA for an empty entry, EADDRNOTAVAIL when the device cannot send from it).
  Result<AddressHandle> create_ah(const AhAttr& attr);
  Status destroy();

 private:
  friend class Device;
  ProtectionDomain(std::shared_ptr<device::Device> dev, PdId id);
  std::shared_ptr<device::Device> dev_;
  PdId id_{};
  bool live_ = false;
};

class OpenResult;

class Device {
 public:
  // Opens a software RDMA device on real UDP (discovers netdevs, binds the port).
  static OpenResult open(const OpenOptions& options = {});
  // The devices of this host in list order, one per netdev (no socket is bound); `netdevs`
  // restricts them as OpenOptions::netdevs does.
  static std::vector<DeviceInfo> list(const std::vector<std::string>& netdevs = {});
  // Wraps an already assembled device (a test's in-memory PacketIo, the simulator).
  explicit Device(std::shared_ptr<device::Device> dev);

  [[nodiscard]] const std::string& name() const;
  [[nodiscard]] DeviceAttr query_device() const;
  Status query_port(uint8_t port_num, PortAttr& attr) const;
  Status query_gid(uint8_t port_num, uint32_t index, Gid& gid) const;

  Result<ProtectionDomain> alloc_pd();
  Result<CompletionChannel> create_comp_channel();
  Result<CompletionQueue> create_cq(uint32_t cqe, const CompletionChannel* channel = nullptr);

  // ibv_get_async_event (ack is implicit: events are values). fd readable while queued.
  [[nodiscard]] int async_fd() const;
  Result<AsyncEvent> get_async_event(Nanos timeout = Nanos(-1));

  [[nodiscard]] Counters counters() const;
  // The device layer underneath, for drivers and the libibverbs shim.
  [[nodiscard]] device::Device& raw() const { return *dev_; }
  [[nodiscard]] const std::shared_ptr<device::Device>& shared() const { return dev_; }

 private:
  std::shared_ptr<device::Device> dev_;
};

class [[nodiscard]] OpenResult {
 public:
  OpenResult(Device device) : device_(std::move(device)) {}  // NOLINT: implicit on purpose
  OpenResult(OpenError error) : error_(std::move(error)) {}  // NOLINT: implicit on purpose
  [[nodiscard]] bool is_ok() const { return device_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  [[nodiscard]] Device& value() { return *device_; }
  [[nodiscard]] const OpenError& error() const { return error_; }

 private:
  std::optional<Device> device_;
  OpenError error_;
};

}  // namespace uroce
