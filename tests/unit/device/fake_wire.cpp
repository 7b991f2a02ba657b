#include "fake_wire.hpp"

#include <algorithm>
#include <cstring>

namespace uroce::test {

size_t FakeIo::rx_burst(std::span<device::RxPacket> out) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  while (n < out.size() && !queue_.empty()) {
    Packet& p = queue_.front();
    std::memcpy(out[n].buf.data(), p.bytes.data(), p.bytes.size());
    out[n].len = p.bytes.size();
    out[n].meta = p.meta;
    out[n].data = nullptr;
    queue_.pop_front();
    ++n;
  }
  return n;
}

size_t FakeIo::tx_burst(std::span<const transport::TxSlot> pkts) {
  const size_t take =
      wire_.take_per_burst == 0 ? pkts.size() : std::min(pkts.size(), wire_.take_per_burst);
  wire_.deliver(pkts.first(take));
  return take;
}

bool FakeIo::takes_payload_by_reference() const {
  return wire_.by_reference;
}

bool FakeIo::wait(Nanos timeout, bool) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return woken_ || !queue_.empty(); };
  if (timeout.count() < 0) {
    cv_.wait(lock, ready);
  } else {
    cv_.wait_for(lock, timeout, ready);
  }
  woken_ = false;
  return true;
}

void FakeIo::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void FakeWire::attach(FakeIo* io) {
  std::lock_guard lock(mu_);
  ios_.push_back(io);
}

void FakeWire::detach(FakeIo* io) {
  std::lock_guard lock(mu_);
  ios_.erase(std::remove(ios_.begin(), ios_.end(), io), ios_.end());
}

void FakeWire::deliver(std::span<const transport::TxSlot> burst) {
  if (drop_all.load()) return;
  std::lock_guard lock(mu_);
  ++bursts_;
  for (const transport::TxSlot& slot : burst) {
    if (slot.len > 0) log_.push_back(Sent{slot.meta.ip.src[15], slot.buf[0], bursts_});
    for (FakeIo* io : ios_) {
      if (io->gid() != slot.meta.ip.dst) continue;
      {
        std::lock_guard io_lock(io->mu_);
        FakeIo::Packet p{std::vector<uint8_t>(slot.buf.begin(), slot.buf.begin() + slot.len),
                         slot.meta};
        if (!slot.payload.empty()) {
          transport::join_payload(slot, p.bytes);
          ++delivered_by_reference;
        }
        io->queue_.push_back(std::move(p));
      }
      io->cv_.notify_all();
      ++delivered;
    }
  }
}

std::vector<FakeWire::Sent> FakeWire::sent_log() const {
  std::lock_guard lock(mu_);
  return log_;
}

device::Gid fake_gid(uint8_t n) {
  device::Gid g{};
  g[10] = 0xFF;
  g[11] = 0xFF;
  g[12] = 10;
  g[15] = n;
  return g;
}

namespace {

// Detaches its FakeIo from the wire when the device (and so the io) goes away.
class AttachedIo final : public device::PacketIo {
 public:
  AttachedIo(FakeWire& wire, const device::Gid& gid) : wire_(wire), io_(wire, gid) {
    wire_.attach(&io_);
  }
  ~AttachedIo() override { wire_.detach(&io_); }
  size_t rx_burst(std::span<device::RxPacket> out) override { return io_.rx_burst(out); }
  size_t tx_burst(std::span<const transport::TxSlot> p) override { return io_.tx_burst(p); }
  [[nodiscard]] bool takes_payload_by_reference() const override {
    return io_.takes_payload_by_reference();
  }
  bool wait(Nanos t, bool w) override { return io_.wait(t, w); }
  void wake() override { io_.wake(); }
  [[nodiscard]] bool can_send_from(const device::Gid& s) const override {
    return io_.can_send_from(s);
  }

 private:
  FakeWire& wire_;
  FakeIo io_;
};

}  // namespace

std::shared_ptr<device::Device> make_fake_device(FakeWire& wire, uint8_t n, uint32_t qpn_base,
                                                 bool progress_thread, Nanos app_handoff,
                                                 bool app_calls_drive,
                                                 std::shared_ptr<device::DeviceObserver> observer,
                                                 Nanos max_sleep) {
  device::DeviceConfig cfg;
  cfg.name = "fake" + std::to_string(n);
  cfg.node_guid = device::node_guid_from_mac({0x02, 0, 0, 0, 0, n});
  device::PortInfo port;
  port.port_num = 1;
  port.netdev = "fake" + std::to_string(n);
  port.netdev_mtu = 9000;
  port.active_mtu = transport::Mtu::k4096;
  device::Gid ll{};
  ll[0] = 0xFE;
  ll[1] = 0x80;
  ll[15] = n;
  port.gids = {device::GidTableEntry{ll, port.netdev},
               device::GidTableEntry{fake_gid(n), port.netdev}, device::GidTableEntry{}};
  cfg.ports = {port};
  cfg.engine.qpn_base = qpn_base;
  cfg.engine.qpn_count = 4096;
  cfg.engine.seed = n;
  cfg.engine.active_mtu = transport::Mtu::k4096;
  cfg.progress.thread = progress_thread;
  cfg.progress.app_calls_drive = app_calls_drive;
  if (app_handoff >= Nanos::zero()) cfg.progress.app_handoff = app_handoff;
  if (max_sleep >= Nanos::zero()) cfg.progress.max_sleep = max_sleep;
  cfg.observer = std::move(observer);
  return std::make_shared<device::Device>(cfg, std::make_unique<AttachedIo>(wire, fake_gid(n)));
}

}  // namespace uroce::test
