// `uroce perf` loops against perftest's data path: see perftest_run.hpp.
#include "cli/perftest_run.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

namespace uroce::cli {
namespace {

using transport::Sge;
using transport::Wc;
using transport::WcOpcode;
using transport::WcStatus;

// Without progress for this long the peer is gone or runs something else.
constexpr auto kStall = std::chrono::seconds(10);
constexpr auto kSocketCheck = std::chrono::milliseconds(1);
// How long the first ping-pong message may take before we look for it elsewhere.
constexpr auto kSizeCheck = std::chrono::milliseconds(500);
constexpr auto kSizeRescan = std::chrono::milliseconds(200);

constexpr int64_t ns(Nanos d) {
  return d.count();
}

void fail(PerfOutcome& out, std::string message) {
  if (!out.ok) return;
  out.ok = false;
  out.error = std::move(message);
}

std::string wc_error(const Wc& wc) {
  return fmt::format("completion with error: {} ({}) on QP 0x{:06x}", wc_status_str(wc.status),
                     static_cast<int>(wc.status), wc.qp_num);
}

// Is the peer's next TCP message (or its close) waiting? `closed` is set on EOF or error.
bool socket_ready(int fd, bool& closed) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLERR | POLLNVAL)) != 0) {
    closed = true;
    return true;
  }
  char c = 0;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) closed = true;
  return true;
}

// perftest's latency: half the gap between consecutive posts of a ping-pong (print_report_lat
// with rtt_factor 2), iters - 1 samples, reported with the iteration count of the run.
LatResult pingpong_latency(uint64_t size, const std::vector<int64_t>& posted) {
  std::vector<double> usec;
  for (size_t i = 0; i + 1 < posted.size(); ++i) {
    usec.push_back(static_cast<double>(posted[i + 1] - posted[i]) / 2000.0);
  }
  LatResult r = compute_lat(size, usec);
  r.iterations = posted.size();
  return r;
}

class PingPong {
 public:
  PingPong(PerfContext& ctx, uint64_t size, bool server, bool first_size, PerfOutcome& out)
      : ctx_(ctx),
        size_(size),
        server_(server),
        first_size_(first_size),
        out_(out),
        iters_(ctx.setup().iters) {
    posted_.reserve(iters_);
  }

  void run_write() {
    write_ = true;
    const uint8_t* poll_byte = ctx_.slot(0, 0) + size_ - 1;
    uint8_t* src = ctx_.aux(0);
    const Sge sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(size_), ctx_.lkey()};
    uint64_t scnt = 0, ccnt = 0, rcnt = 0;
    // run_iter_lat_write: wait for the peer's message rcnt (the server skips this before its
    // first post), post ours, reap its completion.
    while (scnt < iters_ || ccnt < iters_ || rcnt < iters_) {
      if (rcnt < iters_ && !(scnt < 1 && server_)) {
        ++rcnt;
        const auto want = static_cast<uint8_t>(rcnt);
        const int64_t deadline = steady_now_ns() + ns(kStall);
        int64_t next_cq_check = steady_now_ns() + ns(kSocketCheck);
        int64_t next_size_scan = 0;
        while (std::atomic_ref<const uint8_t>(*poll_byte).load(std::memory_order_acquire) != want) {
          if (!ctx_.dev().progress()) std::this_thread::yield();
          const int64_t t = steady_now_ns();
          if (t > next_cq_check) {
            next_cq_check = t + ns(kSocketCheck);
            if (!reap()) return;
          }
          if (first_size_ && rcnt == 1 && t > deadline - ns(kStall) + ns(kSizeCheck) &&
              t >= next_size_scan) {
            next_size_scan = t + ns(kSizeRescan);
            if (wrong_size()) return;
          }
          if (t > deadline) {
            fail(out_, fmt::format("no RDMA WRITE {} from the peer for {} s: both sides must run "
                                   "write_lat with the same -s (this side: {})",
                                   rcnt, kStall.count(), size_));
            return;
          }
        }
      }
      if (scnt < iters_) {
        posted_.push_back(steady_now_ns());
        src[size_ - 1] = static_cast<uint8_t>(++scnt);
        if (!post(pingpong_wr(ctx_, sge, scnt, true, false))) return;
      }
      if (ccnt < iters_) {
        if (!await_sends()) return;
        ++ccnt;
      }
    }
    out_.sent = {scnt};
    out_.lat = pingpong_latency(size_, posted_);
  }

  void run_send() {
    const Sge sge{reinterpret_cast<uint64_t>(ctx_.aux(0)), static_cast<uint32_t>(size_),
                  ctx_.lkey()};
    uint64_t scnt = 0, rcnt = 0;
    // run_iter_lat_send: the client posts first; then receive one, send one.
    while (scnt < iters_ || rcnt < iters_) {
      if (rcnt < iters_ && !(scnt < 1 && !server_)) {
        if (!await_receive()) return;
        ++rcnt;
      }
      if (scnt < iters_) {
        posted_.push_back(steady_now_ns());
        ++scnt;
        if (!post(pingpong_wr(ctx_, sge, scnt, false, false))) return;
        if (!await_sends()) return;
      }
    }
    out_.sent = {scnt};
    out_.lat = pingpong_latency(size_, posted_);
  }

 private:
  // Waiting for the first message: a peer with another -s writes its sequence byte elsewhere
  // in our (still zeroed) region. Reports that and returns true.
  // A byte beyond our size proves it at once (a peer of our size writes exactly `size_`
  // bytes); a byte before our sequence byte may be a message of our size still landing, so it
  // counts only when it is still alone on the next scan.
  bool wrong_size() {
    const uint8_t* region = ctx_.slot(0, 0);
    const uint64_t span = ctx_.setup().slot_size;
    for (uint64_t i = span; i-- > 0;) {
      if (i == size_ - 1) continue;
      if (std::atomic_ref<const uint8_t>(region[i]).load(std::memory_order_relaxed) == 0) continue;
      const bool beyond = i > size_ - 1;
      if (!beyond && !short_seen_) {
        short_seen_ = true;
        return false;
      }
      fail(out_, fmt::format("the peer's RDMA WRITEs {} {}, this side's -s is {}: give "
                             "both sides the same -s",
                             beyond ? "reach byte" : "end at byte", i + 1, size_));
      return true;
    }
    return false;
  }

  bool post(const transport::SendWr& wr) {
    if (const auto st = ctx_.dev().post_send(ctx_.qpn(0), wr); !st) {
      fail(out_, fmt::format("couldn't post send: {}", st.message()));
      return false;
    }
    ++pending_sends_;
    return true;
  }

  // Polls once; false (with the outcome failed) on an error or an unexpected message.
  bool reap() {
    std::array<Wc, 16> wcs;
    const int n = ctx_.poll(wcs, Nanos(0));
    if (n < 0) {
      fail(out_, "polling the CQ failed");
      return false;
    }
    for (int i = 0; i < n; ++i) {
      const Wc& wc = wcs[static_cast<size_t>(i)];
      if (wc.status != WcStatus::kSuccess) {
        fail(out_, wc_error(wc));
        return false;
      }
      if (wc.opcode != WcOpcode::kRecv) {
        --pending_sends_;
        continue;
      }
      if (write_) {
        fail(out_, fmt::format("the peer sends SENDs ({} bytes): it runs send_lat or send_bw, "
                               "this side runs write_lat",
                               wc.byte_len));
        return false;
      }
      if (wc.byte_len != size_) {
        fail(out_, fmt::format("the peer's messages are {} bytes, this side's are {}: give "
                               "both sides the same -s",
                               wc.byte_len, size_));
        return false;
      }
      ++receives_;
      const auto slot = static_cast<uint32_t>(ctx_.setup().slot_size);
      if (const auto st = ctx_.post_recv_slot(0, wc.wr_id, slot); !st) {
        fail(out_, fmt::format("couldn't post receive: {}", st.message()));
        return false;
      }
    }
    return true;
  }

  bool await_sends() {
    const int64_t deadline = steady_now_ns() + ns(kStall);
    while (pending_sends_ > 0) {
      if (!reap()) return false;
      if (steady_now_ns() > deadline) {
        fail(out_,
             fmt::format("a send did not complete for {} s: the peer is gone", kStall.count()));
        return false;
      }
    }
    return true;
  }

  bool await_receive() {
    const int64_t deadline = steady_now_ns() + ns(kStall);
    while (receives_ == 0) {
      if (!reap()) return false;
      if (steady_now_ns() > deadline) {
        fail(out_, fmt::format("no SEND from the peer for {} s: both sides must run send_lat with "
                               "the same -s (this side: {})",
                               kStall.count(), size_));
        return false;
      }
    }
    --receives_;
    return true;
  }

  PerfContext& ctx_;
  uint64_t size_;
  bool server_;
  bool first_size_;
  bool write_ = false;
  bool short_seen_ = false;  // wrong_size() found a byte before ours once
  PerfOutcome& out_;
  uint64_t iters_;
  uint64_t pending_sends_ = 0;
  uint64_t receives_ = 0;
  std::vector<int64_t> posted_;
};

}  // namespace

void perftest_pingpong(PerfContext& ctx, PerfTest test, uint64_t size, bool server, bool first_size,
                       PerfOutcome& out) {
  PingPong p(ctx, size, server, first_size, out);
  if (test.verb == PerfVerb::kWrite) {
    p.run_write();
  } else {
    p.run_send();
  }
}

void await_peer_message(PerfContext& ctx, int fd, Deadline deadline, uint64_t expect_len,
                        PeerWait& wait) {
  std::array<Wc, 64> wcs;
  const auto slot = static_cast<uint32_t>(ctx.setup().slot_size);
  // After a close, how long to keep reading the CQ: a peer that had an access refused exits
  // at the NAK, and its close can overtake the flush completions of our QP's move to the error
  // state, which say why (the caller's "refused an RDMA access" beats "closed").
  constexpr Nanos kFlushGrace = std::chrono::milliseconds(100);
  std::optional<decltype(Clock::now())> closed_at;
  for (;;) {
    const int n = ctx.poll(wcs, Nanos(0));
    for (int i = 0; i < n; ++i) {
      const Wc& wc = wcs[static_cast<size_t>(i)];
      if (wc.status != WcStatus::kSuccess) {
        if (wc.status == WcStatus::kWrFlushErr) {
          wait.flushed = true;
        } else if (wait.cq_error.empty()) {
          wait.cq_error = wc_error(wc);
        }
        continue;
      }
      if (wc.opcode != WcOpcode::kRecv) continue;
      ++wait.receives;
      wait.last_len = wc.byte_len;
      if (expect_len != 0 && wc.byte_len != expect_len) ++wait.bad_length;
      const int q = ctx.qp_index(wc.qp_num);
      if (q >= 0) (void)ctx.post_recv_slot(q, wc.wr_id, slot);
    }
    if (closed_at) {
      if (wait.flushed || Clock::now() - *closed_at >= kFlushGrace) return;
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (socket_ready(fd, wait.closed)) {
      wait.readable = !wait.closed;
      if (!wait.closed) return;
      closed_at = Clock::now();
      continue;
    }
    if (deadline && Clock::now() >= *deadline) return;
    if (n == 0) {
      pollfd p{fd, POLLIN, 0};
      (void)::poll(&p, 1, 1);
    }
  }
}

void perftest_send_bw_server(PerfContext& ctx, int fd, uint64_t size, bool gbits, PerfOutcome& out,
                             bool& early) {
  const PerfSetup& s = ctx.setup();
  const uint64_t expected = s.iters * static_cast<uint64_t>(s.num_qps);
  const auto slot = static_cast<uint32_t>(s.slot_size);
  std::array<Wc, 64> wcs;
  std::vector<BwSample> samples;
  std::vector<uint64_t> per_qp(static_cast<size_t>(s.num_qps), 0);
  uint64_t received = 0;
  const int64_t start = steady_now_ns();
  int64_t last_progress = start;
  int64_t next_socket_check = start;
  early = false;
  while (received < expected) {
    // Reap no more than the run's SENDs: extra ones stay in the CQ for the caller to count.
    const size_t room = static_cast<size_t>(std::min<uint64_t>(wcs.size(), expected - received));
    const int n = ctx.poll(std::span(wcs).first(room), std::chrono::milliseconds(1));
    if (n < 0) {
      fail(out, "polling the CQ failed");
      return;
    }
    const int64_t t = steady_now_ns();
    for (int i = 0; i < n; ++i) {
      const Wc& wc = wcs[static_cast<size_t>(i)];
      if (wc.status != WcStatus::kSuccess) {
        fail(out,
             wc_error(wc) + (wc.status == WcStatus::kLocLenErr
                                 ? fmt::format(" (the client sends more than {} bytes: give both "
                                               "sides the same -s)",
                                               slot)
                                 : std::string()));
        return;
      }
      const int q = ctx.qp_index(wc.qp_num);
      if (q < 0 || wc.opcode != WcOpcode::kRecv) continue;
      if (wc.byte_len != size) {
        fail(out, fmt::format("the client sends {}-byte messages, this server runs -s {}: give "
                              "both sides the same -s",
                              wc.byte_len, size));
      }
      ++received;
      ++per_qp[static_cast<size_t>(q)];
      if (const auto st = ctx.post_recv_slot(q, wc.wr_id, slot); !st) {
        fail(out, fmt::format("couldn't post receive: {}", st.message()));
        return;
      }
    }
    if (n > 0) {
      samples.push_back({received, t - start, static_cast<size_t>(n) < room});
      last_progress = t;
    } else if (t - last_progress > ns(kStall)) {
      fail(out, fmt::format("no SEND for {} s after {} of {}: the client is gone", kStall.count(),
                            received, expected));
      return;
    }
    if (early) {
      if (n == 0) break;  // drained
      continue;
    }
    if (t >= next_socket_check) {
      next_socket_check = t + ns(kSocketCheck);
      bool closed = false;
      // RC: the client's last SEND was acknowledged before it wrote to the socket, so what
      // it sent is in our CQ already; drain it, then stop.
      if (socket_ready(fd, closed)) early = true;
    }
  }
  out.sent = per_qp;
  out.bw = compute_bw(size, samples, gbits, 0);  // every SEND completes a receive
  out.bw.iterations = received;
  if (early && received == 0 && out.ok) {
    fail(out,
         "the client finished its run without a single SEND: it runs another test than "
         "send_bw (write_bw, read_bw or atomic_bw?)");
  } else if (early && received < expected && out.ok) {
    fail(out, fmt::format("the client finished after {} SENDs per QP, this server expects {} "
                          "(-n): give both sides the same -n",
                          received / static_cast<uint64_t>(s.num_qps), s.iters));
  }
}

}  // namespace uroce::cli
