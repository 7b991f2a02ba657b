#include "net/impaired_packet_io.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>

#include "device/device.hpp"
#include "fault/corrupt.hpp"

namespace uroce::net {

ImpairedPacketIo::ImpairedPacketIo(std::unique_ptr<device::PacketIo> inner,
                                   const fault::ImpairSpec& spec, uint64_t seed, Clock clock)
    : inner_(std::move(inner)), spec_(spec), clock_(clock) {
  const uint64_t s = spec.seed.value_or(seed);
  // RED draws from its own stream per direction, apart from the model's (streams 0 and 1).
  auto queue = [&](uint64_t stream) {
    return std::make_unique<Queue>(fault::bottleneck_config(*spec.bottleneck, spec.limit,
                                                            s ^ (0x9E3779B97F4A7C15ull * stream)),
                                   device::kPacketBufferSize);
  };
  if (spec.impairs_tx()) {
    tx_model_ = std::make_unique<fault::ImpairModel>(spec, s, 0);
    tx_line_ = std::make_unique<Line>(spec.limit, device::kPacketBufferSize);
    if (spec.bottleneck) tx_queue_ = queue(2);
  }
  if (spec.impairs_rx()) {
    rx_model_ = std::make_unique<fault::ImpairModel>(spec, s, 1);
    rx_line_ = std::make_unique<Line>(spec.limit, device::kPacketBufferSize);
    if (spec.bottleneck) rx_queue_ = queue(3);
  }
}

namespace {

bool ect(uint8_t tos) {
  return (tos & 3) != 0;  // ECT(0), ECT(1) or already CE, as the switch model counts them
}

}  // namespace

void ImpairedPacketIo::drain(Queue& q, Line& line, TimePoint now, bool tx) {
  while (!line.full() && q.due(now)) {
    Queue::Departed d = q.depart(now);
    if (d.marked) d.meta.tos |= 3;
    if (tx) {
      hold_tx(d.tx_end, d.bytes, d.meta);
    } else {
      hold_rx(d.tx_end, d.bytes, d.meta);
    }
    q.done();
  }
}

void ImpairedPacketIo::hold_tx(TimePoint at, std::span<const uint8_t> bytes,
                               const transport::PacketMeta& original) {
  const fault::Verdict v = tx_model_->decide(at, original.tos & 3);
  if (v.drop) return;
  transport::PacketMeta meta = original;
  if (v.ce) meta.tos |= 3;
  std::span<uint8_t> copy;
  if (!tx_line_->push(v.release, bytes, meta, &copy)) {
    ++tx_model_->counters().overflow;  // longer than a slot, or a bottleneck left it no room
    return;
  }
  if (v.dup && !tx_line_->push(v.release, bytes, meta)) ++tx_model_->counters().overflow;
  if (v.corrupt) (void)fault::corrupt_packet(meta.ip, copy, v.corrupt_bit);
}

void ImpairedPacketIo::hold_rx(TimePoint at, std::span<const uint8_t> bytes,
                               const transport::PacketMeta& original) {
  const fault::Verdict v = rx_model_->decide(at, original.tos & 3);
  if (v.drop) return;
  transport::PacketMeta meta = original;
  if (v.ce) meta.tos |= 3;
  std::span<uint8_t> copy;
  if (!rx_line_->push(v.release, bytes, meta, &copy)) {
    ++rx_model_->counters().overflow;
    return;
  }
  if (v.dup && !rx_line_->push(v.release, bytes, meta)) ++rx_model_->counters().overflow;
  if (v.corrupt) (void)fault::corrupt_packet(meta.ip, copy, v.corrupt_bit);
}

TimePoint ImpairedPacketIo::now() const {
  return clock_ != nullptr ? clock_() : device::Device::now();
}

void ImpairedPacketIo::flush_tx(TimePoint now) {
  inner_blocked_ = false;
  if (!tx_line_) return;
  if (tx_queue_) drain(*tx_queue_, *tx_line_, now, true);
  while (true) {
    const size_t n = tx_line_->take(now, std::span<Line::Packet>(batch_));
    if (n == 0) return;
    for (size_t i = 0; i < n; ++i) {
      batch_slots_[i].buf = batch_[i].bytes;
      batch_slots_[i].len = batch_[i].bytes.size();
      batch_slots_[i].meta = batch_[i].meta;
    }
    const size_t sent =
        inner_->tx_burst(std::span<const transport::TxSlot>(batch_slots_.data(), n));
    tx_line_->settle(sent);
    if (sent < n) {
      inner_blocked_ = true;
      return;
    }
  }
}

size_t ImpairedPacketIo::tx_burst(std::span<const transport::TxSlot> pkts) {
  if (!tx_model_) return inner_->tx_burst(pkts);
  const TimePoint t = now();
  flush_tx(t);
  size_t consumed = 0;
  for (; consumed < pkts.size(); ++consumed) {
    const transport::TxSlot& s = pkts[consumed];
    const auto bytes = std::span<const uint8_t>(s.buf.data(), s.len);
    if (tx_queue_) {
      // A full queue (`limit` packets) is backpressure; beyond queue= bytes the model
      // drops (counted as queue_dropped).
      if (tx_queue_->full()) break;
      (void)tx_queue_->offer(t, bytes, s.meta, fault::wire_bytes(s.len, s.meta.ip.ipv6),
                             ect(s.meta.tos));
      continue;
    }
    // Backpressure before deciding, so every packet is decided exactly once.
    if (tx_line_->full()) break;
    hold_tx(t, bytes, s.meta);
  }
  flush_tx(t);
  publish();
  return consumed;
}

size_t ImpairedPacketIo::deliver_held(TimePoint now, std::span<device::RxPacket> out) {
  size_t n = 0;
  while (n < out.size() && rx_line_->due(now)) {
    const Line::Packet p = rx_line_->front();
    std::memcpy(out[n].buf.data(), p.bytes.data(), p.bytes.size());
    out[n].len = p.bytes.size();
    out[n].meta = p.meta;
    out[n].data = nullptr;
    rx_line_->pop();
    ++n;
  }
  return n;
}

size_t ImpairedPacketIo::impair_received(TimePoint now, std::span<device::RxPacket> out, size_t n) {
  if (rx_queue_) {
    // Everything crosses the bottleneck first and is delivered from the line when due.
    for (size_t i = 0; i < n; ++i) {
      const device::RxPacket& p = out[i];
      if (rx_queue_->full()) {
        ++rx_model_->counters().overflow;
        continue;
      }
      (void)rx_queue_->offer(now, std::span<const uint8_t>(p.buf.data(), p.len), p.meta,
                             fault::wire_bytes(p.len, p.meta.ip.ipv6), ect(p.meta.tos));
    }
    return 0;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    device::RxPacket& p = out[i];
    const fault::Verdict v = rx_model_->decide(now, p.meta.tos & 3);
    if (v.drop) continue;
    if (v.ce) p.meta.tos |= 3;
    const auto bytes = std::span<uint8_t>(p.buf.data(), p.len);
    // The original goes first and takes the corruption; the duplicate is the packet as it came.
    std::span<uint8_t> original = bytes;
    const bool hold = v.release > now;
    if (hold && !rx_line_->push(v.release, bytes, p.meta, &original)) {
      ++rx_model_->counters().overflow;
      continue;
    }
    if (v.dup && !rx_line_->push(v.release, bytes, p.meta)) ++rx_model_->counters().overflow;
    if (v.corrupt) (void)fault::corrupt_packet(p.meta.ip, original, v.corrupt_bit);
    if (hold) continue;
    if (kept != i) {
      std::memcpy(out[kept].buf.data(), p.buf.data(), p.len);
      out[kept].len = p.len;
      out[kept].meta = p.meta;
    }
    ++kept;
  }
  return kept;
}

size_t ImpairedPacketIo::rx_burst(std::span<device::RxPacket> out) {
  const TimePoint t = now();
  // The device calls rx_burst on every pass but tx_burst only when the engine built
  // something: this is where held transmissions leave once due.
  if (tx_model_) flush_tx(t);
  if (!rx_model_) {
    if (tx_model_) publish();
    return inner_->rx_burst(out);
  }
  if (rx_queue_) drain(*rx_queue_, *rx_line_, t, false);
  const size_t held = deliver_held(t, out);
  const size_t fresh = inner_->rx_burst(out.subspan(held));
  // The impairments change, hold and duplicate packets in their own buffers: take the ones
  // the port handed out in place (UDP GRO) into them first.
  for (device::RxPacket& p : out.subspan(held, fresh)) {
    if (p.data == nullptr) continue;
    std::memcpy(p.buf.data(), p.data, p.len);
    p.data = nullptr;
  }
  const size_t n = held + impair_received(t, out.subspan(held), fresh);
  publish();
  return n;
}

void ImpairedPacketIo::publish() {
  fault::ImpairCounters c;
  if (tx_model_) c += tx_model_->counters();
  if (rx_model_) c += rx_model_->counters();
  for (const Queue* q : {tx_queue_.get(), rx_queue_.get()}) {
    if (q == nullptr) continue;
    c.queue_dropped += q->counters().dropped_tail;
    c.queue_marked += q->counters().ecn_marked;
    c.queue_max_bytes = std::max(c.queue_max_bytes, q->counters().max_depth_bytes);
  }
  const uint64_t v[10] = {c.dropped,      c.duplicated,     c.corrupted, c.ce_marked,
                          c.delayed,      c.reordered,      c.overflow,  c.queue_dropped,
                          c.queue_marked, c.queue_max_bytes};
  for (size_t i = 0; i < published_.size(); ++i) {
    published_[i].store(v[i], std::memory_order_relaxed);
  }
  TimePoint next = kNever;
  if (tx_line_) next = std::min(next, tx_line_->next_release());
  if (rx_line_) next = std::min(next, rx_line_->next_release());
  if (tx_queue_) next = std::min(next, tx_queue_->next_departure());
  if (rx_queue_) next = std::min(next, rx_queue_->next_departure());
  // An application thread's post sends through tx_burst while the progress thread may be
  // asleep in wait() with a timeout computed before this packet was held: wake it when the
  // earliest release moved closer, or the packet would wait for its next wake-up.
  const TimePoint before = next_release_.exchange(next);
  want_write_.store(inner_blocked_);
  if (next < before) inner_->wake();
}

bool ImpairedPacketIo::wait(Nanos timeout, bool want_write) {
  // Per thread: an application thread blocked in get_cq_event sleeps here too, for the
  // same held packets.
  thread_local bool slack_set = false;
  if ((spec_.delay.count() != 0 || spec_.bottleneck) && !slack_set) {
    // The kernel's default 50 us timer slack would add up to 50 us to every held packet's
    // wake-up; this thread sleeps to release them on time.
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    slack_set = true;
  }
  const TimePoint next = next_release_.load();
  if (next != kNever) {
    const Nanos until = std::max(next - now(), Nanos::zero());
    timeout = timeout.count() < 0 ? until : std::min(timeout, until);
  }
  // The device asks for POLLOUT when this decorator took fewer packets than offered, which is
  // a full line more often than a full socket: only the latter is worth waking on.
  return inner_->wait(timeout, tx_model_ ? want_write_.load() : want_write);
}

fault::ImpairCounters ImpairedPacketIo::impair_counters() const {
  fault::ImpairCounters c;
  c.dropped = published_[0].load(std::memory_order_relaxed);
  c.duplicated = published_[1].load(std::memory_order_relaxed);
  c.corrupted = published_[2].load(std::memory_order_relaxed);
  c.ce_marked = published_[3].load(std::memory_order_relaxed);
  c.delayed = published_[4].load(std::memory_order_relaxed);
  c.reordered = published_[5].load(std::memory_order_relaxed);
  c.overflow = published_[6].load(std::memory_order_relaxed);
  c.queue_dropped = published_[7].load(std::memory_order_relaxed);
  c.queue_marked = published_[8].load(std::memory_order_relaxed);
  c.queue_max_bytes = published_[9].load(std::memory_order_relaxed);
  return c;
}

device::IoCounters ImpairedPacketIo::io_counters() const {
  device::IoCounters io = inner_->io_counters();
  const fault::ImpairCounters c = impair_counters();
  io.impair_dropped = c.dropped;
  io.impair_duplicated = c.duplicated;
  io.impair_corrupted = c.corrupted;
  io.impair_ce_marked = c.ce_marked;
  io.impair_delayed = c.delayed;
  io.impair_reordered = c.reordered;
  io.impair_overflow = c.overflow;
  io.impair_queue_dropped = c.queue_dropped;
  io.impair_queue_marked = c.queue_marked;
  io.impair_queue_max_bytes = c.queue_max_bytes;
  return io;
}

}  // namespace uroce::net
