// `uroce perf` client loops: see perf_run.hpp.
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

#include "cli/peer_diagnosis.hpp"
#include "cli/perf_pattern.hpp"
#include "cli/perf_run.hpp"

namespace uroce::cli {
namespace {

using transport::Sge;
using transport::Wc;
using transport::WcStatus;
using transport::WrOpcode;

constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();
constexpr int kQpShift = 40;
constexpr uint64_t kItMask = (1ull << kQpShift) - 1;
// A run with no completion for this long has lost its peer or its packets.
constexpr auto kStallLimit = std::chrono::seconds(10);
// How often a bandwidth run without completions looks whether ACKs still move its QPs on.
constexpr int64_t kAckCheckNs = 1'000'000'000;
// How long a ping-pong byte check may wait for the rest of a message whose last byte
// already arrived (the device copies a packet with memcpy, whose byte order is unspecified).
constexpr auto kSettleLimit = std::chrono::milliseconds(100);
constexpr Nanos kClientEventWait = std::chrono::milliseconds(100);
// How often the loops look whether the server closed the side channel (its process died).
constexpr int64_t kChannelWatchNs = 10'000'000;

// The server never writes to the side channel during a run, so a readable end means it
// closed: its process is gone. Checked every kChannelWatchNs, not per completion.
class ChannelWatch {
 public:
  explicit ChannelWatch(const OobSocket& sock) : sock_(sock) {}
  bool server_gone(PerfOutcome& out) {
    const int64_t t = steady_now_ns();
    if (t - last_ < kChannelWatchNs) return false;
    last_ = t;
    if (!sock_.peer_closed()) return false;
    out.ok = false;
    out.error =
        "the server closed the side channel during the run: its process is gone (killed or "
        "crashed)";
    return true;
  }

 private:
  const OobSocket& sock_;
  int64_t last_ = 0;
};

std::string no_completion(PerfContext& ctx, int q, bool sends_outstanding) {
  return fmt::format("no completion for {} s: {}", kStallLimit.count(),
                     stall_reason(ctx.dev(), ctx.qpn(q), ctx.remote()[static_cast<size_t>(q)].gid,
                                  sends_outstanding, ctx.setup().mtu));
}

// Time that counts for the measurement: the pauses for --verify round trips are left out.
class ActiveClock {
 public:
  ActiveClock() : start_(steady_now_ns()) {}
  void pause() { paused_at_ = steady_now_ns(); }
  void resume() { paused_total_ += steady_now_ns() - paused_at_; }
  [[nodiscard]] int64_t elapsed() const { return steady_now_ns() - start_ - paused_total_; }

 private:
  int64_t start_;
  int64_t paused_at_ = 0;
  int64_t paused_total_ = 0;
};

bool wc_failed(const Wc& wc, PerfOutcome& out) {
  if (wc.status == WcStatus::kSuccess) return false;
  out.ok = false;
  out.error =
      fmt::format("completion with error: {} ({}) for wr_id {} on QP 0x{:06x}",
                  wc_status_str(wc.status), static_cast<int>(wc.status), wc.wr_id, wc.qp_num);
  return true;
}

bool exchange(OobSocket& sock, const nlohmann::json& request, nlohmann::json& reply,
              PerfOutcome& out) {
  std::string line;
  if (!sock.send_line(request.dump()) || !sock.recv_line(line, deadline_after(60))) {
    out.ok = false;
    out.error = "the server closed the side channel";
    return false;
  }
  reply = nlohmann::json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.value("ok", false)) {
    out.ok = false;
    out.error = reply.is_discarded() ? "the server sent garbage"
                                     : "server: " + reply.value("error", std::string("failed"));
    return false;
  }
  return true;
}

// The one loop behind write/read/atomic/send BW and read/atomic latency.
class WindowRunner {
 public:
  WindowRunner(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size, PerfOutcome& out)
      : ctx_(ctx), sock_(sock), s_(ctx.setup()), test_(test), size_(size), out_(out) {
    qps_ = s_.num_qps;
    latency_ = test.kind == PerfKind::kLatency;
    depth_ = static_cast<uint64_t>(latency_ ? 1 : s_.tx_depth);
    cq_mod_ = static_cast<uint64_t>(latency_ ? 1 : s_.cq_mod);
    rounds_ = s_.verify && (test.verb == PerfVerb::kWrite || test.verb == PerfVerb::kRead);
    ring_ = s_.ring_slots;
    posted_.assign(static_cast<size_t>(qps_), 0);
    done_.assign(static_cast<size_t>(qps_), 0);
    target_.assign(static_cast<size_t>(qps_), s_.duration > 0 ? kNoLimit : s_.iters);
    post_ns_.assign(static_cast<size_t>(depth_), 0);
  }

  void run(bool gbits) {
    round_end_ = rounds_ ? ring_ : kNoLimit;
    if (rounds_ && test_.verb == PerfVerb::kRead && !request_fill()) return;
    clock_ = ActiveClock();
    int64_t last_progress = steady_now_ns();
    int64_t last_ack_check = last_progress;
    acked_moved();  // the starting PSNs
    std::array<Wc, 64> wcs;
    ChannelWatch watch(sock_);
    while (!finished()) {
      if (watch.server_gone(out_)) return;
      if (s_.duration > 0 && !stopping_ &&
          clock_.elapsed() >= static_cast<int64_t>(s_.duration * 1e9)) {
        stop_posting();
      }
      for (int q = 0; q < qps_; ++q) {
        auto& p = posted_[static_cast<size_t>(q)];
        while (p < target_[static_cast<size_t>(q)] && p < round_end_ &&
               p - done_[static_cast<size_t>(q)] < depth_) {
          if (!post(q, p)) return;
          ++p;
        }
      }
      const int n = ctx_.poll(wcs, kClientEventWait);
      if (n < 0) {
        fail("polling the CQ failed");
        return;
      }
      const int64_t t = clock_.elapsed();
      for (int i = 0; i < n; ++i) {
        if (wc_failed(wcs[static_cast<size_t>(i)], out_)) return;
        if (!complete(wcs[static_cast<size_t>(i)], t)) return;
      }
      if (n > 0) {
        samples_.push_back({total_done(), t, static_cast<size_t>(n) < wcs.size()});
        last_progress = steady_now_ns();
      } else if (steady_now_ns() - last_ack_check > kAckCheckNs) {
        last_ack_check = steady_now_ns();
        if (acked_moved()) last_progress = last_ack_check;
      }
      if (n == 0 &&
          steady_now_ns() - last_progress > std::chrono::nanoseconds(kStallLimit).count()) {
        int stalled = 0;
        for (int q = 0; q < qps_; ++q) {
          if (posted_[static_cast<size_t>(q)] > done_[static_cast<size_t>(q)]) stalled = q;
        }
        fail(no_completion(ctx_, stalled, true));
        return;
      }
      if (rounds_ && round_complete() && !end_round()) return;
    }
    out_.sent = done_;
    if (latency_) {
      out_.lat = compute_lat(size_, lat_us_);
    } else {
      out_.bw = compute_bw(size_, samples_, gbits, static_cast<uint64_t>(qps_) * (cq_mod_ - 1));
      out_.bw.iterations = total_done() / static_cast<uint64_t>(qps_);
    }
  }

 private:
  // Whether an ACK moved any QP's oldest unacknowledged PSN since the last look. With -Q N a
  // completion comes once per N messages; on a slow or lossy path that can take longer than
  // the stall limit while the peer keeps acknowledging, which is progress, not a stall.
  bool acked_moved() {
    bool moved = false;
    acked_.resize(static_cast<size_t>(qps_));
    for (int q = 0; q < qps_; ++q) {
      const std::optional<uint32_t> psn = ctx_.dev().qp_acked_psn(ctx_.qpn(q));
      std::optional<uint32_t>& seen = acked_[static_cast<size_t>(q)];
      if (psn && psn != seen) {
        moved = moved || seen.has_value();
        seen = psn;
      }
    }
    return moved;
  }
  uint64_t total_done() const {
    uint64_t sum = 0;
    for (uint64_t d : done_) sum += d;
    return sum;
  }
  uint64_t effective_end(int q) const {
    return std::min(round_end_, target_[static_cast<size_t>(q)]);
  }
  bool round_complete() const {
    for (int q = 0; q < qps_; ++q) {
      if (done_[static_cast<size_t>(q)] < effective_end(q)) return false;
    }
    return true;
  }
  bool finished() const {
    for (int q = 0; q < qps_; ++q) {
      if (done_[static_cast<size_t>(q)] < target_[static_cast<size_t>(q)]) return false;
    }
    return !rounds_ || round_closed_;
  }
  void fail(std::string message) {
    out_.ok = false;
    out_.error = std::move(message);
  }

  // -D: stop at the next signaled WR (or the end of the --verify round) so every posted WR
  // is accounted for.
  void stop_posting() {
    stopping_ = true;
    for (int q = 0; q < qps_; ++q) {
      const uint64_t p = posted_[static_cast<size_t>(q)];
      uint64_t t = rounds_ ? round_end_ : (p + cq_mod_ - 1) / cq_mod_ * cq_mod_;
      target_[static_cast<size_t>(q)] = std::max(t, p);
    }
  }

  bool signaled(int q, uint64_t it) const {
    return (it + 1) % cq_mod_ == 0 || it + 1 == target_[static_cast<size_t>(q)] ||
           it + 1 == round_end_;
  }

  bool post(int q, uint64_t it) {
    const uint64_t k = it % ring_;
    uint8_t* local = ctx_.slot(q, k);
    const uint64_t id = perf_pattern_id(q, it, size_);
    Sge sge{reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(size_), ctx_.lkey()};
    // One WR reused, as perftest does: a fresh `transport::SendWr wr;` was zeroed with
    // `rep stos`, whose start-up cost was half this loop's time in a 64-byte WRITE run
    // (`perf annotate`). A runner posts one verb, so every post sets the same fields.
    transport::SendWr& wr = wr_;
    wr.wr_id = static_cast<uint64_t>(q) << kQpShift | it;
    wr.sg_list = std::span<const Sge>(&sge, 1);
    wr.send_flags = signaled(q, it) ? transport::kSendSignaled : 0u;
    const bool may_inline = size_ <= ctx_.max_inline();
    switch (test_.verb) {
      case PerfVerb::kWrite:
        if (s_.verify) fill_pattern({local, size_}, id);
        wr.opcode = WrOpcode::kRdmaWrite;
        wr.rdma.remote_addr = ctx_.remote_slot(q, s_.verify ? k : 0);
        wr.rdma.rkey = ctx_.remote()[static_cast<size_t>(q)].rkey;
        if (may_inline) wr.send_flags |= transport::kSendInline;
        break;
      case PerfVerb::kRead:
        wr.opcode = WrOpcode::kRdmaRead;
        wr.rdma.remote_addr = ctx_.remote_slot(q, s_.verify ? k : 0);
        wr.rdma.rkey = ctx_.remote()[static_cast<size_t>(q)].rkey;
        break;
      case PerfVerb::kAtomic:
        sge.length = 8;
        wr.atomic.remote_addr = ctx_.remote_slot(q, 0);
        wr.atomic.rkey = ctx_.remote()[static_cast<size_t>(q)].rkey;
        if (s_.atomic == AtomicType::kFetchAndAdd) {
          wr.opcode = WrOpcode::kAtomicFetchAndAdd;
          wr.atomic.compare_add = 1;
        } else {
          // The counter holds `it` before this WR when every earlier one succeeded in order.
          wr.opcode = WrOpcode::kAtomicCmpAndSwp;
          wr.atomic.compare_add = it;
          wr.atomic.swap = it + 1;
        }
        break;
      case PerfVerb::kSend:
        if (s_.verify) {
          fill_pattern({local, size_}, id);
          wr.opcode = WrOpcode::kSendWithImm;
          wr.imm_data = static_cast<uint32_t>(it);
        } else {
          wr.opcode = WrOpcode::kSend;
        }
        if (may_inline) wr.send_flags |= transport::kSendInline;
        if (s_.conn == PerfConnection::kUd) {
          wr.ud.ah = ctx_.ah(q);
          wr.ud.remote_qpn = ctx_.remote()[static_cast<size_t>(q)].qpn;
          wr.ud.remote_qkey = kPingpongQkey;
        }
        break;
    }
    if (latency_) post_ns_[it % depth_] = clock_.elapsed();
    if (const auto st = ctx_.dev().post_send(ctx_.qpn(q), wr); !st) {
      fail(fmt::format("couldn't post send: {}", st.message()));
      return false;
    }
    return true;
  }

  bool complete(const Wc& wc, int64_t t) {
    const int q = static_cast<int>(wc.wr_id >> kQpShift);
    const uint64_t it = wc.wr_id & kItMask;
    if (q < 0 || q >= qps_) {
      fail(fmt::format("completion for unknown wr_id {}", wc.wr_id));
      return false;
    }
    auto& d = done_[static_cast<size_t>(q)];
    if (test_.verb == PerfVerb::kAtomic && s_.verify) {
      for (uint64_t j = d; j <= it; ++j) {
        uint64_t fetched = 0;
        std::memcpy(&fetched, ctx_.slot(q, j % ring_), sizeof fetched);
        if (fetched != j) {
          fail(fmt::format("verify: atomic {} on QP {} fetched {}, expected {}", j, q, fetched, j));
          return false;
        }
        out_.checked_bytes += 8;
      }
    }
    if (latency_) {
      lat_us_.push_back(static_cast<double>(t - post_ns_[it % depth_]) / 1000.0);
    }
    d = it + 1;
    return true;
  }

  bool request_fill() {
    nlohmann::json reply;
    return exchange(sock_, {{"cmd", "fill"}, {"first", round_first_}}, reply, out_);
  }

  bool end_round() {
    clock_.pause();
    const uint64_t count = effective_end(0) - round_first_;
    if (test_.verb == PerfVerb::kWrite) {
      nlohmann::json reply;
      if (!exchange(sock_, {{"cmd", "check"}, {"first", round_first_}, {"count", count}}, reply,
                    out_)) {
        return false;
      }
    } else {
      for (int q = 0; q < qps_; ++q) {
        for (uint64_t k = 0; k < count; ++k) {
          const uint64_t it = round_first_ + k;
          if (const auto bad =
                  check_pattern({ctx_.slot(q, k), size_}, perf_pattern_id(q, it, size_))) {
            fail(
                fmt::format("verify: READ {} on QP {} has a wrong byte at offset {}", it, q, *bad));
            return false;
          }
          out_.checked_bytes += size_;
        }
      }
    }
    const bool more = [&] {
      for (int q = 0; q < qps_; ++q) {
        if (effective_end(q) < target_[static_cast<size_t>(q)]) return true;
      }
      return false;
    }();
    if (!more) {
      round_closed_ = true;
      clock_.resume();
      return true;
    }
    round_first_ = round_end_;
    round_end_ += ring_;
    if (test_.verb == PerfVerb::kRead && !request_fill()) return false;
    clock_.resume();
    return true;
  }

  PerfContext& ctx_;
  OobSocket& sock_;
  const PerfSetup& s_;
  PerfTest test_;
  uint64_t size_;
  PerfOutcome& out_;
  int qps_ = 1;
  bool latency_ = false;
  uint64_t depth_ = 1;
  uint64_t cq_mod_ = 1;
  bool rounds_ = false;
  uint64_t ring_ = 1;
  uint64_t round_first_ = 0;
  uint64_t round_end_ = kNoLimit;
  bool round_closed_ = false;
  bool stopping_ = false;
  std::vector<uint64_t> posted_, done_, target_;
  std::vector<std::optional<uint32_t>> acked_;  // per QP, as acked_moved() last saw it
  std::vector<int64_t> post_ns_;
  std::vector<BwSample> samples_;
  std::vector<double> lat_us_;
  ActiveClock clock_;
  transport::SendWr wr_;  // what post() fills and posts
};

// Waits until the last byte of `buf` is `seq`, then (under --verify) until the rest is the
// pattern too, within kSettleLimit. Returns false on a wrong message.
bool await_bytes(PerfContext& ctx, ChannelWatch& watch, std::span<const uint8_t> buf, uint8_t seq,
                 const int64_t& stall_deadline, bool verify, uint64_t id, PerfOutcome& out) {
  const uint8_t* last = &buf[buf.size() - 1];
  uint32_t turns = 0;
  while (std::atomic_ref<const uint8_t>(*last).load(std::memory_order_acquire) != seq) {
    // Move packets from this thread too: on a loaded host the progress thread may not run.
    if (!ctx.dev().progress()) ctx.idle_turn();
    if ((++turns & 31) != 0) continue;  // the clocks below every 32nd turn
    if (watch.server_gone(out)) return false;
    if (steady_now_ns() > stall_deadline) {
      out.error = fmt::format(
          "no reply for {} s: {}", kStallLimit.count(),
          stall_reason(ctx.dev(), ctx.qpn(0), ctx.remote()[0].gid, false, ctx.setup().mtu));
      return false;
    }
  }
  if (!verify) return true;
  const int64_t settle = steady_now_ns() + std::chrono::nanoseconds(kSettleLimit).count();
  for (;;) {
    const auto bad = check_pattern(buf.first(buf.size() - 1), id);
    if (!bad) return true;
    if (steady_now_ns() > settle) {
      out.error = fmt::format("verify: wrong byte at offset {}", *bad);
      return false;
    }
  }
}

bool post_reply_receive(PerfContext& ctx, PerfOutcome& out) {
  const auto st = ctx.post_recv_slot(0, 0, static_cast<uint32_t>(ctx.setup().slot_size));
  if (st) return true;
  out.ok = false;
  out.error = fmt::format("couldn't post receive: {}", st.message());
  return false;
}

void run_pingpong(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size,
                  PerfOutcome& out) {
  ChannelWatch watch(sock);
  const PerfSetup& s = ctx.setup();
  const bool write = test.verb == PerfVerb::kWrite;
  const bool ud = s.conn == PerfConnection::kUd;
  const uint64_t recv_offset = ud ? 40 : 0;
  std::vector<double> lat;
  std::array<Wc, 16> wcs;
  const uint64_t iters = s.duration > 0 ? kNoLimit : s.iters;
  lat.reserve(s.duration > 0 ? size_t{1} << 20 : iters);  // no reallocation inside a round trip
  // A ping's latency runs from its post to the next post (half of it, one way), as
  // perftest counts it: one clock read per round trip, and what the program does between a
  // reply and its next ping counts too. With --verify the pattern is written first.
  int64_t t0 = steady_now_ns();
  const int64_t end = s.duration > 0 ? t0 + static_cast<int64_t>(s.duration * 1e9) : INT64_MAX;
  // The receive a reply used goes back after the next ping has left: a latency-minded
  // program sends first and tidies up while it waits. Only with another receive still
  // posted for the next reply (-r 1 reposts at once).
  const bool repost_late = s.rx_depth > 1;
  bool repost = false;
  for (uint64_t it = 0; it < iters; ++it) {
    if (t0 >= end) break;
    uint8_t* src = ctx.aux(0);
    if (s.verify) {
      fill_pattern({src, size}, perf_pattern_id(0, it, size));
      t0 = steady_now_ns();
    }
    src[size - 1] = pingpong_seq(it);
    Sge sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(size), ctx.lkey()};
    const transport::SendWr wr = pingpong_wr(ctx, sge, it, write, ud);
    const int64_t stall_deadline = t0 + std::chrono::nanoseconds(kStallLimit).count();
    if (const auto st = ctx.dev().post_send(ctx.qpn(0), wr); !st) {
      out.ok = false;
      out.error = fmt::format("couldn't post send: {}", st.message());
      return;
    }
    if (repost) {
      if (!post_reply_receive(ctx, out)) return;
      repost = false;
    }
    bool sent = false;
    bool received = false;
    uint32_t recv_len = 0;
    uint32_t turns = 0;
    while (!sent || (!received && !write)) {
      const int n = ctx.poll(wcs, kClientEventWait);
      for (int i = 0; i < n; ++i) {
        const Wc& wc = wcs[static_cast<size_t>(i)];
        if (wc_failed(wc, out)) return;
        if (wc.opcode == transport::WcOpcode::kRecv) {
          received = true;
          recv_len = wc.byte_len;
          repost = repost_late;
          if (!repost_late && !post_reply_receive(ctx, out)) return;
        } else {
          sent = true;
        }
      }
      // Busy polling, the clocks below every 32nd turn; with -e a turn may sleep, so each.
      if (n >= 0 && !ctx.events() && (++turns & 31) != 0) continue;
      if (watch.server_gone(out)) return;
      if (n < 0 || steady_now_ns() > stall_deadline) {
        out.ok = false;
        out.error = n < 0 ? std::string("polling the CQ failed") : no_completion(ctx, 0, !sent);
        return;
      }
    }
    std::span<const uint8_t> reply(ctx.slot(0, 0) + recv_offset, size);
    if (!write && recv_len != size + recv_offset) {
      out.ok = false;
      out.error =
          fmt::format("reply {} is {} bytes, expected {}", it, recv_len, size + recv_offset);
      return;
    }
    if (!await_bytes(ctx, watch, reply, pingpong_seq(it), stall_deadline, s.verify,
                     perf_pattern_id(1, it, size), out)) {
      out.ok = false;
      out.error = fmt::format("iteration {}: {}", it, out.error);
      return;
    }
    const int64_t t1 = steady_now_ns();
    lat.push_back(static_cast<double>(t1 - t0) / 2000.0);
    t0 = t1;
    if (s.verify) out.checked_bytes += size;
  }
  out.sent = {lat.size()};
  out.lat = compute_lat(size, lat);
}

}  // namespace

const char* wc_status_str(WcStatus s) {
  static constexpr std::array<const char*, 22> kNames = {"success",
                                                         "local length error",
                                                         "local QP operation error",
                                                         "local EE context operation error",
                                                         "local protection error",
                                                         "Work Request Flushed Error",
                                                         "memory management operation error",
                                                         "bad response error",
                                                         "local access error",
                                                         "remote invalid request error",
                                                         "remote access error",
                                                         "remote operation error",
                                                         "transport retry counter exceeded",
                                                         "RNR retry counter exceeded",
                                                         "local RDD violation error",
                                                         "remote invalid RD request",
                                                         "aborted error",
                                                         "invalid EE context number",
                                                         "invalid EE context state",
                                                         "fatal error",
                                                         "response timeout error",
                                                         "general error"};
  const auto i = static_cast<size_t>(s);
  return i < kNames.size() ? kNames[i] : "unknown";
}

void run_client_size(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size, bool gbits,
                     PerfOutcome& out) {
  if (test.kind == PerfKind::kLatency &&
      (test.verb == PerfVerb::kWrite || test.verb == PerfVerb::kSend)) {
    run_pingpong(ctx, sock, test, size, out);
    return;
  }
  WindowRunner(ctx, sock, test, size, out).run(gbits);
}

}  // namespace uroce::cli
