// The real-time loop of `uroce switch` (switch_forwarder.hpp has what it does and does not
// emulate). One thread: transmit what the model says is due, read every port in bursts,
// offer the frames to the model, transmit again, then sleep in ppoll until a frame arrives
// or the next departure is due.
#include "cli/switch_forwarder.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/switch_hold_queue.hpp"
#include "fabric/ecn_frame.hpp"
#include "fabric/mac_table.hpp"
#include "fabric/udp_gso.hpp"
#include "net/af_packet_port.hpp"

namespace uroce::cli {
namespace {

using net::AfPacketPort;
constexpr uint32_t kHdr = AfPacketPort::kVnetHeaderBytes;
constexpr int kBurst = AfPacketPort::kMaxBurst;
// A model rate for --rate unlimited: 1 TB/s, serialization well under a nanosecond per frame.
constexpr uint64_t kUnlimitedRate = 1'000'000'000'000;

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_dump = 0;

void on_stop(int) {
  g_stop = 1;
}
void on_dump(int) {
  g_dump = 1;
}

void install(int sig, void (*fn)(int)) {
  struct sigaction sa {};
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: ppoll returns at once
  ::sigaction(sig, &sa, nullptr);
}

TimePoint mono_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimePoint(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec);
}

uint64_t sysfs_counter(const std::string& ifname, const char* name) {
  std::ifstream in("/sys/class/net/" + ifname + "/statistics/" + name);
  uint64_t v = 0;
  in >> v;
  return v;
}

struct PortStats {
  uint64_t rx_frames = 0, rx_bytes = 0, tx_frames = 0, tx_bytes = 0;
  uint64_t flooded = 0, filtered = 0, held = 0, held_max = 0, oversized = 0;
  uint64_t superseded = 0;     // held frames a go-back-N resend of their QP replaced
  uint64_t gso_segmented = 0;  // UDP GSO super-frames cut into datagrams
  uint64_t tx_dropped_at_start = 0;
  // Per priority, frames of this ingress held while (ingress, priority) was paused; held_max
  // above is the largest of the priorities' held_max.
  std::array<uint64_t, fabric::kMaxPriorities> prio_held{}, prio_held_max{}, prio_superseded{};
};

class Forwarder {
 public:
  Forwarder(const SwitchRunOptions& o, std::vector<std::unique_ptr<AfPacketPort>> ports,
            const fabric::SwitchQueueConfig& qc)
      : o_(o),
        ports_(std::move(ports)),
        model_(qc),
        pool_(size_t{o.frame_slots} * o.slot_bytes),
        lens_(o.frame_slots),
        stats_(ports_.size()),
        backlog_(ports_.size()),
        classes_(qc.priorities) {
    free_.reserve(o.frame_slots);
    superseded_.reserve(o.frame_slots);
    for (uint32_t s = o.frame_slots; s-- > 0;) free_.push_back(s);
    // One hold queue per (ingress, priority), each with room for every frame slot.
    holds_.reserve(ports_.size() * classes_);
    for (size_t i = 0; i < ports_.size() * classes_; ++i) holds_.emplace_back(o.frame_slots);
    for (size_t i = 0; i < ports_.size(); ++i) {
      stats_[i].tx_dropped_at_start = sysfs_counter(ports_[i]->name(), "tx_dropped");
      pfds_.push_back({.fd = ports_[i]->fd(), .events = POLLIN, .revents = 0});
    }
  }

  int run() {
    start_ = mono_now();
    const TimePoint end =
        o_.duration_s > 0 ? start_ + Nanos(static_cast<int64_t>(o_.duration_s * 1e9)) : kNever;
    const Nanos trace_every(static_cast<int64_t>(o_.trace_interval_us * 1e3));
    const Nanos stats_every(static_cast<int64_t>(o_.stats_every_s * 1e9));
    TimePoint next_trace = start_, next_stats = start_ + stats_every;
    if (!o_.trace_path.empty()) {
      trace_ = std::fopen(o_.trace_path.c_str(), "w");
      if (trace_ == nullptr) {
        fmt::print(stderr, "uroce switch: cannot write --trace {}: {}\n", o_.trace_path,
                   std::strerror(errno));
        return kExitUsage;
      }
      std::fputs("time_ns,port,depth_bytes,ecn_marked,dropped,paused,tx_bytes\n", trace_);
    }
    std::string names;
    for (const auto& p : ports_) names += (names.empty() ? "" : ", ") + p->name();
    fmt::print(stderr, "uroce switch: forwarding between {} ({}, rate {})\n", names,
               switch_mode_name(o_.mode),
               o_.unlimited ? std::string("unlimited")
                            : fmt::format("{} bytes/s", model_.config().line_rate_bytes_per_sec));
    while (g_stop == 0) {
      TimePoint now = mono_now();
      if (now >= end) break;
      bool busy = transmit_due(now);
      busy = receive_all(now) || busy;
      busy = transmit_due(now) || busy;
      if (trace_ != nullptr && now >= next_trace) {
        write_trace(now);
        next_trace = now + trace_every;
      }
      if (o_.stats_every_s > 0 && now >= next_stats) {
        fmt::print(stderr, "{}\n", stats_json(now).dump());
        next_stats = now + stats_every;
      }
      if (g_dump != 0) {
        g_dump = 0;
        fmt::print(stderr, "{}\n", stats_json(now).dump());
      }
      if (!busy)
        sleep_until_work(now, std::min({end, trace_ ? next_trace : kNever,
                                        o_.stats_every_s > 0 ? next_stats : kNever}));
    }
    const TimePoint now = mono_now();
    if (trace_ != nullptr) {
      write_trace(now);
      std::fclose(trace_);
    }
    if (o_.json) {
      fmt::print("{}\n", stats_json(now).dump());
    } else {
      print_text(now);
    }
    std::fflush(stdout);
    return kExitOk;
  }

 private:
  uint8_t* slot(uint32_t s) { return pool_.data() + size_t{s} * o_.slot_bytes; }
  std::span<uint8_t> frame(uint32_t s) { return {slot(s) + kHdr, lens_[s] - kHdr}; }
  void release(uint32_t s) { free_.push_back(s); }
  [[nodiscard]] bool any_lossless() const {
    for (uint32_t c = 0; c < classes_; ++c) {
      if (model_.lossless(c)) return true;
    }
    return false;
  }
  HoldQueue& hold_queue(uint32_t in, uint32_t cls) { return holds_[size_t{in} * classes_ + cls]; }
  // The frame's priority from its DSCP (non-IP frames: 0).
  uint8_t priority_of(std::span<const uint8_t> f) const {
    const fabric::FrameEcn e = fabric::frame_ecn(f);
    return e.ip ? o_.dscp_map[e.dscp] : 0;
  }

  // A port's last burst, in arrival order, while part of it waits for frame slots: the
  // frames in slots[i_norm, n_norm) and the port's oversized(i_big, n_big), next segment `seg`
  // of oversized(i_big). The port is not read again until it is done (the kernel's socket
  // buffer holds the rest: backpressure, as when the slots run out between bursts), so the
  // oversized frames in the port's spill area stay valid.
  struct Backlog {
    std::array<uint32_t, kBurst> slots{};
    int n_norm = 0, i_norm = 0, n_big = 0, i_big = 0;
    uint32_t seg = 0;
    [[nodiscard]] bool active() const { return i_norm < n_norm || i_big < n_big; }
  };

  bool receive_all(TimePoint now) {
    bool any = false;
    std::array<uint8_t*, kBurst> bufs{};
    std::array<uint32_t, kBurst> lens{};
    for (uint32_t i = 0; i < ports_.size(); ++i) {
      Backlog& b = backlog_[i];
      if (b.active()) {
        any = drain(i, now) || any;
        if (b.active()) continue;
      }
      // Out of frame slots: leave the frames in the kernel's socket buffer (backpressure).
      if (free_.size() < static_cast<size_t>(kBurst)) continue;
      for (int k = 0; k < kBurst; ++k) {
        b.slots[k] = free_.back();
        free_.pop_back();
        bufs[k] = slot(b.slots[k]);
      }
      const int got = ports_[i]->rx_burst(bufs.data(), o_.slot_bytes, lens.data(), kBurst);
      for (int k = got; k < kBurst; ++k) release(b.slots[k]);
      for (int k = 0; k < got; ++k) lens_[b.slots[k]] = lens[k];
      b.n_norm = got;
      b.n_big = ports_[i]->oversized_count();
      b.i_norm = b.i_big = 0;
      b.seg = 0;
      any = got > 0 || b.n_big > 0 || any;
      (void)drain(i, now);
    }
    return any;
  }

  // Goes on with port `in`'s burst in arrival order; false if nothing could be done (no slot).
  bool drain(uint32_t in, TimePoint now) {
    Backlog& b = backlog_[in];
    bool progress = false;
    for (;;) {
      const int before = b.i_big < b.n_big ? ports_[in]->oversized_after(b.i_big) : b.n_norm;
      while (b.i_norm < before) {
        on_frame(in, b.slots[b.i_norm++], now);
        progress = true;
      }
      if (b.i_big == b.n_big) return progress;
      const std::span<uint8_t> big = ports_[in]->oversized(b.i_big);
      const fabric::UdpGso g = fabric::udp_gso_parse(big);
      // A segment must fit a slot; one that does not (a sender whose MTU is above every
      // switch port's, from which the slots are sized) goes whole, as a TCP super-frame does.
      if (!g.ok || g.segment_bytes(0) > o_.slot_bytes) {
        forward_oversized(in, big, now);
      } else {
        if (b.seg == 0 && !free_.empty()) ++stats_[in].gso_segmented;
        while (b.seg < g.segments) {
          if (free_.empty()) return progress;
          const uint32_t s = free_.back();
          free_.pop_back();
          lens_[s] = fabric::udp_gso_segment(g, big, b.seg++, {slot(s), o_.slot_bytes});
          on_frame(in, s, now);
          progress = true;
        }
      }
      progress = true;
      ++b.i_big;
      b.seg = 0;
    }
  }

  void on_frame(uint32_t in, uint32_t s, TimePoint now) {
    const std::span<uint8_t> f = frame(s);
    PortStats& st = stats_[in];
    ++st.rx_frames;
    st.rx_bytes += f.size();
    if (f.size() < 14) {
      release(s);
      return;
    }
    macs_.learn(fabric::MacTable::mac_at(f.subspan(6, 6)), in, now);
    const auto out = macs_.lookup(fabric::MacTable::mac_at(f.first(6)), now);
    if (!out) {
      flood(in, s);
      return;
    }
    if (*out == in) {
      ++st.filtered;
      release(s);
      return;
    }
    const uint8_t prio = priority_of(f);
    const uint32_t cls = model_.traffic_class(prio);
    if (model_.lossless(cls) && (model_.paused(in, cls) || !hold_queue(in, cls).empty())) {
      hold(in, cls, s, *out);
      return;
    }
    offer(*out, in, s, now);
  }

  // A TCP GSO super-frame (a segment the kernel cuts on the egress: the side channels of the
  // perf runs; UDP ones are cut into datagrams by drain) bypasses the queue model and goes out at
  // once: the model's buffers hold MTU-sized frames, and what is measured is the RoCE traffic,
  // which is never this large.
  void forward_oversized(uint32_t in, std::span<uint8_t> buf, TimePoint now) {
    PortStats& st = stats_[in];
    ++st.rx_frames;
    ++st.oversized;
    st.rx_bytes += buf.size() - kHdr;
    const std::span<uint8_t> f = buf.subspan(kHdr);
    if (f.size() < 14) return;
    macs_.learn(fabric::MacTable::mac_at(f.subspan(6, 6)), in, now);
    const auto out = macs_.lookup(fabric::MacTable::mac_at(f.first(6)), now);
    if (out && *out == in) {
      ++st.filtered;
      return;
    }
    uint8_t* data = buf.data();
    const auto len = static_cast<uint32_t>(buf.size());
    for (uint32_t j = 0; j < ports_.size(); ++j) {
      if (j == in || (out && j != *out)) continue;
      ports_[j]->tx_burst(&data, &len, 1);
      ++stats_[j].tx_frames;
      stats_[j].tx_bytes += len - kHdr;
    }
  }

  void hold(uint32_t in, uint32_t cls, uint32_t s, uint32_t out) {
    HoldQueue& h = hold_queue(in, cls);
    superseded_.clear();
    h.push({s, out}, rc_request_of(frame(s), o_.roce_ports), superseded_);
    PortStats& st = stats_[in];
    for (const uint32_t gone : superseded_) release(gone);
    st.superseded += superseded_.size();
    st.prio_superseded[cls] += superseded_.size();
    ++st.held;
    ++st.prio_held[cls];
    st.prio_held_max[cls] = std::max<uint64_t>(st.prio_held_max[cls], h.size());
    st.held_max = std::max(st.held_max, st.prio_held_max[cls]);
  }

  void flood(uint32_t in, uint32_t s) {
    ++stats_[in].flooded;
    uint8_t* buf = slot(s);
    const uint32_t len = lens_[s];
    for (uint32_t j = 0; j < ports_.size(); ++j) {
      if (j == in) continue;
      ports_[j]->tx_burst(&buf, &len, 1);
      ++stats_[j].tx_frames;
      stats_[j].tx_bytes += len - kHdr;
    }
    release(s);
  }

  void offer(uint32_t out, uint32_t in, uint32_t s, TimePoint now) {
    const std::span<uint8_t> f = frame(s);
    const fabric::FrameEcn ecn = fabric::frame_ecn(f);
    const fabric::Packet p{.bytes = static_cast<uint32_t>(f.size()),
                           .ingress = in,
                           .cookie = s,
                           .ect = ecn.ect(),
                           .priority = ecn.ip ? o_.dscp_map[ecn.dscp] : uint8_t{0}};
    const fabric::EnqueueResult r = model_.enqueue(out, p, now);
    if (r.verdict != fabric::EnqueueVerdict::kQueued) {
      release(s);
      return;
    }
    if (r.marked) (void)fabric::mark_ce(f);
  }

  // Sends every frame whose transmission the model has started by `now`.
  bool transmit_due(TimePoint now) {
    bool any = false;
    std::array<uint8_t*, kBurst> bufs{};
    std::array<uint32_t, kBurst> lens{};
    std::array<uint32_t, kBurst> slots{};
    for (uint32_t e = 0; e < ports_.size(); ++e) {
      for (;;) {
        int n = 0;
        while (n < kBurst) {
          const auto d = model_.dequeue(e, now);
          if (!d) break;
          const auto s = static_cast<uint32_t>(d->packet.cookie);
          if (d->marked) (void)fabric::mark_ce(frame(s));
          slots[n] = s;
          bufs[n] = slot(s);
          lens[n] = lens_[s];
          ++n;
          if (d->resume) {
            release_hold(d->packet.ingress, model_.traffic_class(d->packet.priority), now);
          }
        }
        if (n == 0) break;
        any = true;
        ports_[e]->tx_burst(bufs.data(), lens.data(), n);
        for (int k = 0; k < n; ++k) {
          ++stats_[e].tx_frames;
          stats_[e].tx_bytes += lens[k] - kHdr;
          release(slots[k]);
        }
      }
    }
    return any;
  }

  // XON for (ingress `in`, priority `cls`): its held frames enter the queues, oldest first,
  // until it is paused again.
  void release_hold(uint32_t in, uint32_t cls, TimePoint now) {
    HoldQueue& h = hold_queue(in, cls);
    while (!h.empty() && !model_.paused(in, cls)) {
      const HeldFrame f = h.pop();
      offer(f.egress, in, f.slot, now);
    }
  }

  void sleep_until_work(TimePoint now, TimePoint limit) {
    TimePoint wake = limit;
    for (uint32_t e = 0; e < ports_.size(); ++e) wake = std::min(wake, model_.next_dequeue(e));
    if (wake <= now) return;
    const bool room = free_.size() >= static_cast<size_t>(kBurst);
    for (size_t i = 0; i < pfds_.size(); ++i)
      pfds_[i].events = room && !backlog_[i].active() ? POLLIN : 0;
    const int64_t ns = std::min<int64_t>((wake - now).count(), 100'000'000);
    const timespec ts{.tv_sec = ns / 1'000'000'000, .tv_nsec = ns % 1'000'000'000};
    (void)ppoll(pfds_.data(), pfds_.size(), &ts, nullptr);
  }

  void write_trace(TimePoint now) {
    const int64_t t = (now - start_).count();
    for (uint32_t e = 0; e < ports_.size(); ++e) {
      const fabric::PortCounters& c = model_.port(e);
      std::fprintf(trace_, "%lld,%s,%llu,%llu,%llu,%d,%llu\n", static_cast<long long>(t),
                   ports_[e]->name().c_str(), static_cast<unsigned long long>(c.depth_bytes),
                   static_cast<unsigned long long>(c.ecn_marked),
                   static_cast<unsigned long long>(c.dropped_tail + c.dropped_headroom),
                   model_.paused(e) ? 1 : 0, static_cast<unsigned long long>(stats_[e].tx_bytes));
    }
  }

  // Egress queue e's counters per priority, with the PFC state of port e as an ingress.
  nlohmann::json priority_json(uint32_t e, TimePoint now) const {
    nlohmann::json a = nlohmann::json::array();
    const PortStats& st = stats_[e];
    for (uint32_t c = 0; c < classes_; ++c) {
      const fabric::PortCounters& q = model_.port(e, c);
      const fabric::IngressCounters in = model_.ingress(e, c, now);
      a.push_back({{"priority", c},
                   {"enqueued", q.enqueued},
                   {"dequeued", q.dequeued},
                   {"dequeued_bytes", q.dequeued_bytes},
                   {"dropped_tail", q.dropped_tail},
                   {"dropped_headroom", q.dropped_headroom},
                   {"ecn_marked", q.ecn_marked},
                   {"depth_bytes", q.depth_bytes},
                   {"max_depth_bytes", q.max_depth_bytes},
                   {"pause_events", in.pause_events},
                   {"paused_ns", in.paused_ns},
                   {"held", st.prio_held[c]},
                   {"held_max", st.prio_held_max[c]},
                   {"superseded", st.prio_superseded[c]}});
    }
    return a;
  }

  nlohmann::json stats_json(TimePoint now) {
    nlohmann::json ports = nlohmann::json::array();
    uint64_t dropped = 0, marked = 0, pauses = 0, kernel = 0, enq = 0, superseded = 0;
    for (uint32_t e = 0; e < ports_.size(); ++e) {
      const fabric::PortCounters& c = model_.port(e);
      const fabric::IngressCounters in = model_.ingress(e, now);
      const PortStats& st = stats_[e];
      const uint64_t krx = ports_[e]->kernel_drops();
      const uint64_t ktx = sysfs_counter(ports_[e]->name(), "tx_dropped") - st.tx_dropped_at_start;
      ports.push_back({{"name", ports_[e]->name()},
                       {"rx_frames", st.rx_frames},
                       {"rx_bytes", st.rx_bytes},
                       {"tx_frames", st.tx_frames},
                       {"tx_bytes", st.tx_bytes},
                       {"flooded", st.flooded},
                       {"filtered", st.filtered},
                       {"oversized", st.oversized},
                       {"gso_segmented", st.gso_segmented},
                       {"enqueued", c.enqueued},
                       {"dequeued", c.dequeued},
                       {"dropped_tail", c.dropped_tail},
                       {"dropped_headroom", c.dropped_headroom},
                       {"ecn_marked", c.ecn_marked},
                       {"depth_bytes", c.depth_bytes},
                       {"max_depth_bytes", c.max_depth_bytes},
                       {"pause_events", in.pause_events},
                       {"paused_ns", in.paused_ns},
                       {"held", st.held},
                       {"held_max", st.held_max},
                       {"superseded", st.superseded},
                       {"priorities", priority_json(e, now)},
                       {"kernel_rx_drops", krx},
                       {"kernel_tx_dropped", ktx},
                       {"truncated", ports_[e]->truncated()},
                       {"tx_errors", ports_[e]->tx_errors()}});
      dropped += c.dropped_tail + c.dropped_headroom;
      marked += c.ecn_marked;
      pauses += in.pause_events;
      kernel += krx + ktx + ports_[e]->truncated() + ports_[e]->tx_errors();
      enq += c.enqueued;
      superseded += st.superseded;
    }
    const fabric::SwitchQueueConfig& q = model_.config();
    nlohmann::json j = {{"mode", switch_mode_name(o_.mode)},
                        {"rate_bytes_per_sec", o_.unlimited ? 0 : q.line_rate_bytes_per_sec},
                        {"buffer_bytes", q.port_buffer_bytes},
                        {"shared_buffer_bytes", q.shared_buffer_bytes},
                        {"frame_slots", o_.frame_slots},
                        {"frame_slot_bytes", o_.slot_bytes},
                        {"roce_ports", o_.roce_ports_text},
                        {"elapsed_ns", (now - start_).count()},
                        {"priorities", classes_},
                        {"ports", ports},
                        {"totals",
                         {{"enqueued", enq},
                          {"dropped", dropped},
                          {"ecn_marked", marked},
                          {"pause_events", pauses},
                          {"kernel_drops", kernel},
                          {"superseded", superseded}}}};
    j["ecn"] = q.red.enabled
                   ? nlohmann::json{{"kmin_bytes", q.red.kmin_bytes},
                                    {"kmax_bytes", q.red.kmax_bytes},
                                    {"pmax", q.red.pmax},
                                    {"at", q.red.at == fabric::MarkPoint::kEnqueue ? "enqueue"
                                                                                   : "dequeue"}}
                   : nlohmann::json(nullptr);
    j["pfc"] = any_lossless() ? nlohmann::json{{"xoff_bytes", q.pfc.xoff_bytes},
                                               {"xon_bytes", q.pfc.xon_bytes}}
                              : nlohmann::json(nullptr);
    nlohmann::json sched = nlohmann::json::array();
    for (uint32_t c = 0; c < classes_; ++c) {
      sched.push_back({{"priority", c},
                       {"lossless", model_.lossless(c)},
                       {"strict", q.prio[c].strict},
                       {"dwrr_weight", q.prio[c].dwrr_weight}});
    }
    j["scheduling"] = sched;
    return j;
  }

  void print_text(TimePoint now) {
    const nlohmann::json j = stats_json(now);
    fmt::print("uroce switch: {} ms, mode {}\n", (now - start_).count() / 1'000'000,
               switch_mode_name(o_.mode));
    fmt::print(
        "{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>8} {:>10} {:>12} {:>9} {:>13}\n",
        "port", "rx", "tx", "dropped", "marked", "pauses", "max_depth_B", "held_max", "superseded",
        "kernel_drops", "oversized", "gso_segmented");
    for (const auto& p : j["ports"]) {
      fmt::print(
          "{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>8} {:>10} {:>12} {:>9} {:>13}\n",
          p["name"].get<std::string>(), p["rx_frames"].get<uint64_t>(),
          p["tx_frames"].get<uint64_t>(),
          p["dropped_tail"].get<uint64_t>() + p["dropped_headroom"].get<uint64_t>(),
          p["ecn_marked"].get<uint64_t>(), p["pause_events"].get<uint64_t>(),
          p["max_depth_bytes"].get<uint64_t>(), p["held_max"].get<uint64_t>(),
          p["superseded"].get<uint64_t>(),
          p["kernel_rx_drops"].get<uint64_t>() + p["kernel_tx_dropped"].get<uint64_t>(),
          p["oversized"].get<uint64_t>(), p["gso_segmented"].get<uint64_t>());
    }
    if (classes_ == 1) return;
    // Per priority: egress queue counters, and the port's pauses as an ingress.
    fmt::print("{:<16} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>8}\n", "port", "prio",
               "enqueued", "dequeued", "dropped", "marked", "pauses", "max_depth_B", "held_max");
    for (const auto& p : j["ports"]) {
      for (const auto& c : p["priorities"]) {
        fmt::print("{:<16} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>8}\n",
                   p["name"].get<std::string>(), c["priority"].get<uint32_t>(),
                   c["enqueued"].get<uint64_t>(), c["dequeued"].get<uint64_t>(),
                   c["dropped_tail"].get<uint64_t>() + c["dropped_headroom"].get<uint64_t>(),
                   c["ecn_marked"].get<uint64_t>(), c["pause_events"].get<uint64_t>(),
                   c["max_depth_bytes"].get<uint64_t>(), c["held_max"].get<uint64_t>());
      }
    }
  }

  const SwitchRunOptions& o_;
  std::vector<std::unique_ptr<AfPacketPort>> ports_;
  fabric::SwitchQueues model_;
  fabric::MacTable macs_;
  std::vector<uint8_t> pool_;
  std::vector<uint32_t> lens_;
  std::vector<uint32_t> free_;
  std::vector<HoldQueue> holds_;
  std::vector<uint32_t> superseded_;  // hold()'s scratch: slots a push took out
  std::vector<PortStats> stats_;
  std::vector<Backlog> backlog_;
  std::vector<pollfd> pfds_;
  uint32_t classes_;  // priority queues per port
  std::FILE* trace_ = nullptr;
  TimePoint start_{};
};

}  // namespace

const char* switch_mode_name(SwitchMode m) {
  switch (m) {
    case SwitchMode::kLossy:
      return "lossy";
    case SwitchMode::kEcn:
      return "ecn";
    case SwitchMode::kLossless:
      return "lossless";
  }
  return "?";
}

uint32_t frame_slot_bytes(uint32_t mtu) {
  const uint32_t need = kHdr + 14 + 4 + mtu;
  return std::max(kMinFrameSlotBytes, (need + 63) / 64 * 64);
}

uint32_t default_frame_slots(uint32_t slot_bytes) {
  return static_cast<uint32_t>(
      std::min<uint64_t>(kMaxDefaultFrameSlots, kFramePoolBytes / std::max(slot_bytes, 1u)));
}

int run_switch(const SwitchRunOptions& options) {
  SwitchRunOptions o = options;
  fabric::SwitchQueueConfig qc = o.queue;
  qc.egress_ports = static_cast<uint32_t>(o.ports.size());
  qc.ingress_ports = qc.egress_ports;
  if (o.unlimited) qc.line_rate_bytes_per_sec = kUnlimitedRate;
  qc.mode =
      o.mode == SwitchMode::kLossless ? fabric::BufferMode::kLossless : fabric::BufferMode::kLossy;
  // The frame count is known only once the ports' MTUs are; validate the rest first, so a
  // bad option is reported before the ports need root.
  qc.queue_packets = o.frame_slots != 0 ? o.frame_slots : kMaxDefaultFrameSlots;
  if (const std::string bad = fabric::validate(qc); !bad.empty()) {
    fmt::print(stderr, "uroce switch: {}\n", bad);
    return kExitUsage;
  }
  std::vector<std::unique_ptr<AfPacketPort>> ports;
  uint32_t max_mtu = 0;
  for (const std::string& name : o.ports) {
    std::string error;
    auto p = AfPacketPort::open(name, 8 << 20, error);
    if (!p) {
      fmt::print(stderr, "uroce switch: {}\n", error);
      return kExitFailure;
    }
    max_mtu = std::max(max_mtu, p->mtu());
    ports.push_back(std::move(p));
  }
  // A frame longer than a slot bypasses the model (GSO super-frames only, by design): slots
  // too small for the ports' MTU would let full-size RoCE frames skip the rate and buffers.
  if (o.slot_bytes == 0) o.slot_bytes = frame_slot_bytes(max_mtu);
  if (o.frame_slots == 0) o.frame_slots = default_frame_slots(o.slot_bytes);
  qc.queue_packets = o.frame_slots;
  // The forwarder pauses with no reaction time: one frame past XOFF is the most it queues.
  qc.pfc.headroom_bytes = std::max<uint64_t>(qc.pfc.headroom_bytes, o.slot_bytes);
  install(SIGINT, on_stop);
  install(SIGTERM, on_stop);
  install(SIGUSR1, on_dump);
  // Wake-ups within a microsecond, not the default 50 us timer slack: departures are paced.
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  auto fwd = std::make_unique<Forwarder>(o, std::move(ports), qc);  // o outlives fwd
  return fwd->run();
}

}  // namespace uroce::cli
