// `uroce perf` server roles: see perf_run.hpp.
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "cli/perf_pattern.hpp"
#include "cli/perf_run.hpp"
#include "cli/perf_telemetry.hpp"

namespace uroce::cli {
namespace {

using transport::Sge;
using transport::Wc;
using transport::WcStatus;
using transport::WrOpcode;

constexpr Nanos kServerEventWait = std::chrono::milliseconds(10);
// How often a busy loop looks at the side channel when it has nothing else to do.
constexpr auto kChannelCheck = std::chrono::milliseconds(1);
// After the client's "end": how long unreliable transports may stay quiet before the
// receiver stops waiting for messages that were lost.
constexpr auto kDrainQuiet = std::chrono::milliseconds(200);
constexpr auto kRcDrainLimit = std::chrono::seconds(10);
constexpr auto kServerSettleLimit = std::chrono::milliseconds(100);
constexpr auto kUcSettle = std::chrono::seconds(1);
// Before the counters go into the reply: how long the device may receive nothing before the
// client's missing packets count as lost, and the most the reply waits for them.
constexpr auto kReportQuiet = std::chrono::milliseconds(50);
constexpr auto kReportLimit = std::chrono::seconds(5);

// The server's state between the client's "end" and the reply.
struct ServerSize {
  bool ok = true;
  std::string error;
  uint64_t received = 0;
  uint64_t checked_bytes = 0;
  bool end_seen = false;
  nlohmann::json end;

  void fail(std::string message) {
    if (!ok) return;
    ok = false;
    error = std::move(message);
  }
  [[nodiscard]] nlohmann::json reply() const {
    return {{"ok", ok}, {"error", error}, {"received", received}, {"checked_bytes", checked_bytes}};
  }
};

// Reads one side-channel message without blocking. Returns false if the channel broke.
bool poll_channel(OobSocket& sock, ServerSize& st) {
  std::string line;
  bool closed = false;
  if (!sock.try_recv_line(line, closed)) return !closed;
  auto msg = nlohmann::json::parse(line, nullptr, false);
  if (!msg.is_discarded() && msg.value("cmd", std::string()) == "end") {
    st.end_seen = true;
    st.end = std::move(msg);
  }
  return true;
}

uint64_t sum_sent(const nlohmann::json& end) {
  uint64_t total = 0;
  if (end.contains("sent") && end["sent"].is_array()) {
    for (const auto& v : end["sent"]) total += v.get<uint64_t>();
  }
  return total;
}

// The client's "end" travels over TCP and can overtake its last UDP packets: retransmissions it
// sent just before the ACK that completed everything. While they still wait in this device's
// sockets (the progress thread may not have run since, on a loaded machine), a report taken now
// would show fewer packets received than the client sent, on a path that lost nothing. So the
// report waits until the device has received `client_sent` packets (the client's device
// sent_pkts, cumulative like ours). This thread runs the passes itself: the progress thread's
// share of the CPU does not matter, and when kQuietPasses passes in a row over at least
// kReportQuiet receive nothing, the sockets were empty and the rest was lost on the way. At most
// kReportLimit. A client that does not say (an older one) gets the report at once.
void await_client_packets(device::Device& dev, uint64_t client_sent) {
  using transport::Counter;
  constexpr int kQuietPasses = 8;
  const auto start = Clock::now();
  auto last_change = start;
  int quiet_passes = 0;
  uint64_t seen = dev.counters()[Counter::kRcvdPkts];
  while (seen < client_sent) {
    const auto now = Clock::now();
    if (now - start >= kReportLimit) return;
    if (quiet_passes >= kQuietPasses && now - last_change >= kReportQuiet) return;
    (void)dev.progress();
    const uint64_t now_seen = dev.counters()[Counter::kRcvdPkts];
    if (now_seen != seen) {
      last_change = Clock::now();
      quiet_passes = 0;
    } else {
      ++quiet_passes;
      std::this_thread::yield();
    }
    seen = now_seen;
  }
}

// write/read/atomic: the data path needs nothing from us; answer fill/check/end.
bool serve_passive(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size,
                   ServerSize& st) {
  const PerfSetup& s = ctx.setup();
  for (;;) {
    std::string line;
    if (!sock.recv_line(line, std::nullopt)) return false;
    auto msg = nlohmann::json::parse(line, nullptr, false);
    const std::string cmd = msg.is_discarded() ? "" : msg.value("cmd", std::string());
    if (cmd == "fill") {
      const uint64_t first = msg.value("first", uint64_t{0});
      for (int q = 0; q < s.num_qps; ++q) {
        for (uint64_t k = 0; k < s.ring_slots; ++k) {
          fill_pattern({ctx.slot(q, k), size}, perf_pattern_id(q, first + k, size));
        }
      }
      if (!sock.send_line(nlohmann::json{{"ok", true}}.dump())) return false;
    } else if (cmd == "check") {
      const uint64_t first = msg.value("first", uint64_t{0});
      const uint64_t count = std::min(msg.value("count", uint64_t{0}), s.ring_slots);
      // UC completes a WRITE when it is sent, not when it lands: give the last packets of
      // the round time to arrive before calling a byte wrong.
      const auto settle = Clock::now() + (s.conn == PerfConnection::kUc ? kUcSettle : Nanos(0));
      ServerSize round;
      uint64_t round_checked = 0;
      for (;;) {
        round = ServerSize();
        round_checked = 0;
        for (int q = 0; q < s.num_qps && round.ok; ++q) {
          for (uint64_t k = 0; k < count; ++k) {
            if (const auto bad =
                    check_pattern({ctx.slot(q, k), size}, perf_pattern_id(q, first + k, size))) {
              round.fail(fmt::format(
                  "verify: RDMA WRITE {} on QP {} left a wrong byte at offset {}{}", first + k, q,
                  *bad,
                  s.conn == PerfConnection::kUc ? " (UC does not retransmit lost packets)" : ""));
              break;
            }
            round_checked += size;
          }
        }
        if (round.ok || Clock::now() >= settle) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      st.checked_bytes += round_checked;
      if (!round.ok) st.fail(round.error);
      if (!sock.send_line(round.reply().dump())) return false;
    } else if (cmd == "end") {
      st.end = msg;
      if (test.verb == PerfVerb::kAtomic && s.verify) {
        const auto sent = msg.value("sent", std::vector<uint64_t>{});
        for (int q = 0; q < s.num_qps && q < static_cast<int>(sent.size()); ++q) {
          uint64_t counter = 0;
          std::memcpy(&counter, ctx.slot(q, 0), sizeof counter);
          if (counter != sent[static_cast<size_t>(q)]) {
            st.fail(fmt::format("verify: the counter of QP {} is {} after {} atomics", q, counter,
                                sent[static_cast<size_t>(q)]));
          }
          st.checked_bytes += 8;
        }
      }
      return true;
    } else {
      st.fail("unexpected message from the client: " + line);
      return true;
    }
  }
}

// send_bw: receive, check, re-post.
bool serve_receiver(PerfContext& ctx, OobSocket& sock, uint64_t size, ServerSize& st) {
  const PerfSetup& s = ctx.setup();
  const uint64_t offset = s.conn == PerfConnection::kUd ? 40 : 0;
  std::array<Wc, 64> wcs;
  auto last_progress = Clock::now();
  auto last_check = Clock::now();
  for (;;) {
    const int n = ctx.poll(wcs, kServerEventWait);
    for (int i = 0; i < n; ++i) {
      const Wc& wc = wcs[static_cast<size_t>(i)];
      if (wc.status != WcStatus::kSuccess) {
        st.fail(fmt::format("completion with error: {} ({})", wc_status_str(wc.status),
                            static_cast<int>(wc.status)));
        continue;
      }
      const int q = ctx.qp_index(wc.qp_num);
      if (q < 0) continue;
      if (wc.byte_len != size + offset) {
        st.fail(fmt::format("received {} bytes, expected {}", wc.byte_len, size + offset));
      } else if (s.verify) {
        const uint64_t it = wc.imm_data;
        if (const auto bad = check_pattern({ctx.slot(q, wc.wr_id) + offset, size},
                                           perf_pattern_id(q, it, size))) {
          st.fail(fmt::format("verify: SEND {} on QP {} arrived with a wrong byte at offset {}", it,
                              q, *bad));
        }
        st.checked_bytes += size;
      }
      ++st.received;
      if (const auto rc = ctx.post_recv_slot(q, wc.wr_id, static_cast<uint32_t>(s.slot_size));
          !rc) {
        st.fail(fmt::format("couldn't post receive: {}", rc.message()));
      }
    }
    const auto now = Clock::now();
    if (n > 0) last_progress = now;
    if (!st.end_seen && (n == 0 || now - last_check > kChannelCheck)) {
      last_check = now;
      if (!poll_channel(sock, st)) return false;
    }
    if (st.end_seen) {
      const uint64_t expected = sum_sent(st.end);
      if (st.received >= expected) return true;
      const bool reliable = s.conn == PerfConnection::kRc;
      if (!reliable && now - last_progress > kDrainQuiet) return true;
      if (reliable && now - last_progress > kRcDrainLimit) {
        st.fail(fmt::format("received {} of {} SENDs", st.received, expected));
        return true;
      }
    }
  }
}

void repost_receives(PerfContext& ctx, uint64_t& count, ServerSize& st) {
  for (; count > 0; --count) {
    if (!ctx.post_recv_slot(0, 0, static_cast<uint32_t>(ctx.setup().slot_size))) {
      st.fail("couldn't post receive");
      return;
    }
  }
}

// write_lat / send_lat: wait for ping `it`, check it, send pong `it`.
bool serve_pingpong(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size,
                    ServerSize& st) {
  const PerfSetup& s = ctx.setup();
  const bool write = test.verb == PerfVerb::kWrite;
  const bool ud = s.conn == PerfConnection::kUd;
  const uint64_t offset = ud ? 40 : 0;
  const uint64_t iters = s.duration > 0 ? UINT64_MAX : s.iters;
  std::array<Wc, 16> wcs;
  uint64_t pongs_posted = 0;
  uint64_t pongs_done = 0;
  uint64_t pings = 0;  // receive completions seen (send_lat)
  // Receives used by pings go back once the pong has left (the ping's sender waits for it),
  // when another receive stays posted meanwhile (-r 1 reposts at once).
  const bool repost_late = s.rx_depth > 1;
  uint64_t reposts = 0;
  uint32_t turns = 0;
  for (uint64_t it = 0; it < iters && st.ok; ++it) {
    auto last_check = Clock::now();
    const uint8_t* last = ctx.slot(0, 0) + offset + size - 1;
    // Wait for ping `it`: its last byte (write) or its receive completion (send); reap our
    // previous pong's completion on the way.
    for (;;) {
      const int n = ctx.poll(wcs, write ? Nanos(0) : kServerEventWait);
      for (int i = 0; i < n; ++i) {
        const Wc& wc = wcs[static_cast<size_t>(i)];
        if (wc.status != WcStatus::kSuccess) {
          st.fail(fmt::format("completion with error: {} ({})", wc_status_str(wc.status),
                              static_cast<int>(wc.status)));
          return true;
        }
        if (wc.opcode == transport::WcOpcode::kRecv) {
          ++pings;
          if (wc.byte_len != size + offset) {
            st.fail(
                fmt::format("ping {} is {} bytes, expected {}", it, wc.byte_len, size + offset));
          }
          ++reposts;
          if (!repost_late) repost_receives(ctx, reposts, st);
        } else {
          ++pongs_done;
        }
      }
      const bool arrived = write ? std::atomic_ref<const uint8_t>(*last).load(
                                       std::memory_order_acquire) == pingpong_seq(it)
                                 : pings > it;
      if (arrived && pongs_done == pongs_posted) break;
      // The poll above drove the device (a poll of an empty CQ runs a pass) and, busy
      // polling, yielded now and then.
      if (write && n == 0 && ctx.events()) ctx.idle_turn();
      // The side channel every kChannelCheck; busy polling, the clock every 32nd turn (a
      // read is ~30 ns), with -e every turn (a turn may sleep up to kServerEventWait).
      if (((++turns & 31) == 0 || ctx.events()) && Clock::now() - last_check > kChannelCheck) {
        last_check = Clock::now();
        if (!poll_channel(sock, st)) return false;
        if (st.end_seen) return true;
      }
    }
    if (s.verify) {
      const auto settle = Clock::now() + kServerSettleLimit;
      std::optional<size_t> bad;
      do {
        bad = check_pattern({ctx.slot(0, 0) + offset, size - 1}, perf_pattern_id(0, it, size));
      } while (bad && Clock::now() < settle);
      if (bad) {
        st.fail(fmt::format("verify: ping {} has a wrong byte at offset {}", it, *bad));
        break;
      }
      st.checked_bytes += size;
    }
    uint8_t* src = ctx.aux(0);
    if (s.verify) fill_pattern({src, size}, perf_pattern_id(1, it, size));
    src[size - 1] = pingpong_seq(it);
    Sge sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(size), ctx.lkey()};
    const transport::SendWr wr = pingpong_wr(ctx, sge, it, write, ud);
    if (const auto rc = ctx.dev().post_send(ctx.qpn(0), wr); !rc) {
      st.fail(fmt::format("couldn't post send: {}", rc.message()));
      break;
    }
    ++pongs_posted;
    ++st.received;
    repost_receives(ctx, reposts, st);
  }
  return true;
}

}  // namespace

bool prepare_receives(PerfContext& ctx, PerfTest test, bool server, std::string& error) {
  if (test.verb != PerfVerb::kSend) return true;
  const PerfSetup& s = ctx.setup();
  const bool latency = test.kind == PerfKind::kLatency;
  if (!latency && !server) return true;
  const int qps = latency ? 1 : s.num_qps;
  const uint64_t count = latency ? std::min<uint64_t>(static_cast<uint64_t>(s.rx_depth), 64)
                                 : static_cast<uint64_t>(s.rx_depth);
  for (int q = 0; q < qps; ++q) {
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t slot = latency ? 0 : k % s.ring_slots;
      if (const auto st = ctx.post_recv_slot(q, slot, static_cast<uint32_t>(s.slot_size)); !st) {
        error = fmt::format("couldn't post receive: {}", st.message());
        return false;
      }
    }
  }
  return true;
}

bool serve_size(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size,
                std::string& end_line, nlohmann::json& reply) {
  ServerSize st;
  bool alive = true;
  if (test.kind == PerfKind::kLatency &&
      (test.verb == PerfVerb::kWrite || test.verb == PerfVerb::kSend)) {
    alive = serve_pingpong(ctx, sock, test, size, st);
  } else if (test.verb == PerfVerb::kSend) {
    alive = serve_receiver(ctx, sock, size, st);
  } else {
    alive = serve_passive(ctx, sock, test, size, st);
  }
  if (!alive) return false;
  while (!st.end_seen && st.end.is_null()) {
    std::string line;
    if (!sock.recv_line(line, std::nullopt)) return false;
    auto msg = nlohmann::json::parse(line, nullptr, false);
    if (!msg.is_discarded() && msg.value("cmd", std::string()) == "end") {
      st.end_seen = true;
      st.end = std::move(msg);
    }
  }
  // The client's side failed (a stall, a wrong byte it checked): so did this transfer.
  if (!st.end.value("ok", true)) {
    st.fail("client: " + st.end.value("error", std::string("the transfer failed")));
  }
  end_line = st.end.value("line", std::string());
  reply = st.reply();
  reply["result"] = st.end.value("result", nlohmann::json());
  // The server's counters and rates for the client's --json (ignored by older clients).
  await_client_packets(ctx.dev(), st.end.value("sent_pkts", uint64_t{0}));
  reply["device_report"] = run_device_report(ctx);
  return sock.send_line(reply.dump());
}

}  // namespace uroce::cli
