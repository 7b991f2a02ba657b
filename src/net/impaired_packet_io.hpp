// ImpairedPacketIo: a PacketIo decorator that applies UROCE_IMPAIR (fault::ImpairSpec) to the
// packets another PacketIo moves, for real processes and without root: what it sends
// (dir=tx, the default), what it receives (dir=rx), or both. The decisions come from
// fault::ImpairModel (seeded, one per direction); delayed and duplicated packets wait in a
// fault::DelayLine of `limit` preallocated slots.
//
//   tx_burst   each packet: decide, copy into the line (CE/corruption applied to the copy),
//              then send whatever is due. A full line is backpressure (fewer consumed).
//   rx_burst   first sends due held transmissions (the device calls rx_burst on every pass,
//              also when it has nothing new to send), then delivers due held receptions, then
//              receives and decides; a held reception that finds the line full is dropped
//              (counted as impair_overflow).
//   wait       sleeps at most until the earliest release, so held packets leave on time.
//
// With rate= (a bottleneck, fault::BottleneckQueue: the switch queue model of `uroce switch`)
// a packet of the impaired direction first joins the queue at `now` (a full queue of `limit`
// packets is backpressure on transmit, a drop on receive; beyond queue= bytes the model
// tail-drops it), and once it has crossed the bottleneck (its tx_end) the rest of the spec
// decides it as above, with `now` = tx_end and CE already set when RED marked it: a switch,
// then a wire.
//
// The observer (capture, round-trip tracker) sees what the engine sent and what this
// decorator delivered: a packet dropped on transmit is in a capture, one dropped on receive
// is not.
#pragma once

#include <atomic>
#include <memory>

#include "device/packet_io.hpp"
#include "fault/bottleneck.hpp"
#include "fault/delay_line.hpp"
#include "fault/impair_model.hpp"
#include "fault/impair_spec.hpp"

namespace uroce::net {

class ImpairedPacketIo final : public device::PacketIo {
 public:
  using Clock = TimePoint (*)();

  // `seed` is used when the spec names none. `clock` gives `now` (Device::now by default; a
  // test may pass a virtual one).
  ImpairedPacketIo(std::unique_ptr<device::PacketIo> inner, const fault::ImpairSpec& spec,
                   uint64_t seed, Clock clock = nullptr);

  size_t rx_burst(std::span<device::RxPacket> out) override;
  size_t tx_burst(std::span<const transport::TxSlot> pkts) override;
  void maintain() override { inner_->maintain(); }
  bool wait(Nanos timeout, bool want_write) override;
  void wake() override { inner_->wake(); }
  int cm_capable(bool on) override { return inner_->cm_capable(on); }
  int cm_listen(uint64_t service_id, bool on) override { return inner_->cm_listen(service_id, on); }
  [[nodiscard]] bool can_send_from(const device::Gid& source) const override {
    return inner_->can_send_from(source);
  }
  [[nodiscard]] device::PathReport path_report(const device::Gid& peer) const override {
    return inner_->path_report(peer);
  }
  [[nodiscard]] device::IoCounters io_counters() const override;

  // Thread-safe (what io_counters() adds to the inner driver's).
  [[nodiscard]] fault::ImpairCounters impair_counters() const;
  // The earliest release time held in either direction, kNever when none. Thread-safe.
  [[nodiscard]] TimePoint next_release() const { return next_release_.load(); }
  [[nodiscard]] device::PacketIo& inner() { return *inner_; }

 private:
  using Line = fault::DelayLine<transport::PacketMeta>;
  using Queue = fault::BottleneckQueue<transport::PacketMeta>;

  [[nodiscard]] TimePoint now() const;
  void flush_tx(TimePoint now);
  // Decides a packet that reaches the wire part of the spec at `at` and holds it in the
  // direction's line (for rx also when due at once: deliver_held hands it over).
  void hold_tx(TimePoint at, std::span<const uint8_t> bytes, const transport::PacketMeta& meta);
  void hold_rx(TimePoint at, std::span<const uint8_t> bytes, const transport::PacketMeta& meta);
  // Moves the packets that crossed a bottleneck into the line, while the line has room.
  void drain(Queue& q, Line& line, TimePoint now, bool tx);
  size_t deliver_held(TimePoint now, std::span<device::RxPacket> out);
  // Decides the fresh packets out[0..n), keeps those delivered now at the front; returns
  // how many.
  size_t impair_received(TimePoint now, std::span<device::RxPacket> out, size_t n);
  void publish();

  std::unique_ptr<device::PacketIo> inner_;
  fault::ImpairSpec spec_;
  Clock clock_;
  std::unique_ptr<fault::ImpairModel> tx_model_;  // null: that direction passes untouched
  std::unique_ptr<fault::ImpairModel> rx_model_;
  std::unique_ptr<Line> tx_line_;
  std::unique_ptr<Line> rx_line_;
  std::unique_ptr<Queue> tx_queue_;  // null without rate=
  std::unique_ptr<Queue> rx_queue_;
  std::array<Line::Packet, 64> batch_{};
  std::array<transport::TxSlot, 64> batch_slots_{};
  bool inner_blocked_ = false;  // the inner driver took fewer due packets than offered

  // Written after every burst (under the device's I/O lock), read by wait() and exporters.
  std::atomic<TimePoint> next_release_{kNever};
  std::atomic<bool> want_write_{false};
  std::array<std::atomic<uint64_t>, 10> published_{};
};

}  // namespace uroce::net
