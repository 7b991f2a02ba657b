// `uroce perf` against perftest: see perf_perftest.hpp. The sequences below are those of
// perftest 4.5's main() of each test (docs/perftest-interop.md has the table):
//
//   K = one key exchange (client writes then reads, server reads then writes), K1 = QP 0's
//   write/read/atomic_bw  K x Q, connect, K x Q, K1 | client: run, K1, R, K1, done
//                                                  | server: K1, R (prints the client's), K1, done
//   send_bw               K x Q, connect, K1, K x Q | per size: K1, run, (-a: K1) | K1, done
//   send_lat              K x Q, connect, K1, K x Q | per size: K1, run           | K1, done
//   write_lat             K1, K x Q, connect, K x Q, K1 | run (no closing exchange)
//   read/atomic_lat       K1, K x Q, connect, K x Q, K1 | client: run, K1, done | server: K1, done
#include "cli/perf_perftest.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#include "cli/command.hpp"
#include "cli/perf_report.hpp"
#include "cli/perf_run.hpp"
#include "cli/perf_telemetry.hpp"
#include "cli/perftest_run.hpp"
#include "cli/verbs_setup.hpp"
#include "wire/ip_layout.hpp"

namespace uroce::cli {
namespace {

using perftest::Keys;
using perftest::PeerVersion;

// perftest answers each message at once unless it is running its test: a lock-step reply
// that takes longer than this means the peer is doing something else.
constexpr double kReplyWait = 10;
constexpr double kGreetingWait = 60;
// perftest's "outstanding reads" we announce for READ/atomic tests (and accept at most).
constexpr uint32_t kOutReads = 16;
constexpr int kDetectorReceives = 16;

enum class Shape { kRdmaBw, kSendBw, kSendLat, kWriteLat, kReadLat };

Shape shape_of(PerfTest t) {
  if (t.kind == PerfKind::kBandwidth) {
    return t.verb == PerfVerb::kSend ? Shape::kSendBw : Shape::kRdmaBw;
  }
  if (t.verb == PerfVerb::kSend) return Shape::kSendLat;
  return t.verb == PerfVerb::kWrite ? Shape::kWriteLat : Shape::kReadLat;
}

bool reads(PerfTest t) {
  return t.verb == PerfVerb::kRead || t.verb == PerfVerb::kAtomic;
}

int mtu_enum(uint32_t bytes) {
  int e = 1;
  for (uint32_t b = 256; b < bytes && e < 5; b <<= 1) ++e;
  return e;
}

// "%04x:%04" — the start of a key message where 8 bytes of a report were due.
bool looks_like_keys(std::span<const char, 8> b) {
  return b[4] == ':' && std::all_of(b.begin(), b.begin() + 4, [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) != 0;
         });
}

class Session {
 public:
  Session(PerfOptions& o, OobSocket& sock, bool server, const PeerVersion& peer)
      : o_(o), sock_(sock), server_(server), peer_version_(peer), shape_(shape_of(o.test)) {}

  int run(std::unique_ptr<device::Device> dev) {
    if (!check_options()) return finish();
    if (server_ && !send_raw(perftest::encode_version(false))) return finish();
    if (!system_data() || !setup(std::move(dev)) || !pre_run()) return finish();
    if (!o_.json) print_banner(o_, setup_, *ctx_);
    if (server_) {
      serve();
    } else {
      drive();
    }
    return finish();
  }

 private:
  // --- messages ----------------------------------------------------------------------------
  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  std::string peer_name() const {
    return fmt::format("perftest {} {}", peer_version_.text, server_ ? "client" : "server");
  }

  bool send_raw(std::span<const char> bytes) {
    if (!sock_.send_all(bytes))
      return fail(fmt::format("the {} closed the connection", peer_name()));
    return true;
  }

  bool recv_raw(std::span<char> bytes, double wait, const char* what) {
    const Deadline d = deadline_after(wait);
    if (sock_.recv_all(bytes, d)) return true;
    if (d && Clock::now() >= *d) {
      return fail(
          fmt::format("the {} did not send {} within {} s: it runs another test than {} "
                      "or other options",
                      peer_name(), what, wait, perf_test_name(o_.test)));
    }
    return fail(fmt::format("the {} closed the connection while {} was due (see its output)",
                            peer_name(), what));
  }

  // One lock-step exchange.
  bool xchg(std::span<const char> mine, std::span<char> theirs, const char* what,
            double wait = kReplyWait) {
    if (server_) return recv_raw(theirs, wait, what) && send_raw(mine);
    return send_raw(mine) && recv_raw(theirs, wait, what);
  }

  // --- options and system data ------------------------------------------------------------
  bool check_options() {
    if (peer_version_.number < perftest::kMinVersion) {
      return fail(
          fmt::format("the {} is older than 5.70, which perftest itself refuses; "
                      "install perftest 4.5 or newer",
                      peer_name()));
    }
    if (o_.verify) {
      return fail(
          fmt::format("--verify needs uroce perf on both sides; the peer is {}: drop "
                      "--verify",
                      peer_name()));
    }
    if (o_.conn == PerfConnection::kUd) {
      return fail(fmt::format("-c UD against {} is not supported: use -c RC (or UC)", peer_name()));
    }
    if (o_.duration) {
      return fail(fmt::format("-D/--duration against {} is not supported: use -n", peer_name()));
    }
    return true;
  }

  bool system_data() {
    // check_sys_data: the page size and the cache line size, the max of both sides each.
    const long page = sysconf(_SC_PAGESIZE);
    const auto mine_cycle = static_cast<int32_t>(page > 0 ? page : perftest::kDefaultCycleBuffer);
    perftest::IntMsg theirs{};
    if (!xchg(perftest::encode_int(mine_cycle), theirs, "its page size")) return false;
    cycle_buffer_ = static_cast<uint32_t>(std::max(mine_cycle, perftest::decode_int(theirs)));
    const auto mine_line = static_cast<int32_t>(perftest::kDefaultCacheLine);
    if (!xchg(perftest::encode_int(mine_line), theirs, "its cache line size")) return false;
    if (cycle_buffer_ > (64u << 20)) {
      return fail(
          fmt::format("the {} announced a cycle buffer of {} bytes", peer_name(), cycle_buffer_));
    }
    return true;
  }

  bool setup(std::unique_ptr<device::Device> dev) {
    std::string error;
    gid_ = choose_gid(*dev, o_.ib_port, o_.gid_index, sock_.local_address(), error);
    if (!gid_) return fail(error);
    device::PortAttr port;
    if (const auto st = dev->query_port(gid_->port, port); !st) return fail(st.message());
    const uint32_t active = transport::mtu_bytes(port.active_mtu);
    const uint32_t mine = std::min(o_.mtu.value_or(active), active);
    perftest::MtuMsg theirs{};
    if (!xchg(perftest::encode_mtu(mtu_enum(mine)), theirs, "its MTU")) return false;
    uint32_t mtu = mine;
    if (const auto e = perftest::decode_mtu(theirs)) mtu = std::min(mine, 128u << *e);

    setup_ = make_setup(o_, mtu);
    uint64_t max_size = 0;
    for (uint64_t z : o_.sizes) max_size = std::max(max_size, z);
    // perftest cycles its addresses through max(size, cycle buffer) bytes of the peer's
    // region (BUFF_SIZE / increase_rem_addr), so ours must be at least that large.
    setup_.slot_size = std::max<uint64_t>(max_size, cycle_buffer_);
    ctx_ = PerfContext::create(std::move(dev), setup_, *gid_, error);
    if (!ctx_) return fail(error);
    ctx_->set_traffic_class(o_.cc.traffic_class);
    if (o_.test.verb == PerfVerb::kSend) {
      if (!prepare_receives(*ctx_, o_.test, server_, error)) return fail(error);
    } else {
      // Detectors: a SEND landing here means the peer runs a send test.
      for (int q = 0; q < setup_.num_qps; ++q) {
        for (int k = 0; k < kDetectorReceives; ++k) {
          if (const auto st = ctx_->post_recv_slot(q, 0, static_cast<uint32_t>(setup_.slot_size));
              !st) {
            return fail(fmt::format("couldn't post receive: {}", st.message()));
          }
        }
      }
    }
    for (const PerfQpInfo& q : ctx_->local_info()) {
      Keys k;
      k.out_reads = reads(o_.test) ? kOutReads : 1;
      k.qpn = q.qpn;
      k.psn = q.psn;
      k.rkey = q.rkey;
      k.vaddr = q.vaddr;
      k.gid = q.gid;
      mine_.push_back(k);
    }
    return true;
  }

  // --- key exchanges ----------------------------------------------------------------------
  std::optional<Keys> exchange_keys(int q, double wait = kReplyWait) {
    perftest::KeyMsg theirs{};
    if (!xchg(perftest::encode_keys(mine_[static_cast<size_t>(q)]), theirs, "its QP keys", wait)) {
      return std::nullopt;
    }
    auto k = perftest::decode_keys(theirs);
    if (!k) {
      fail(fmt::format("the {} sent a QP message uroce cannot parse: '{}'", peer_name(),
                       std::string(theirs.data(), strnlen(theirs.data(), theirs.size()))));
    }
    return k;
  }

  int known_index(uint32_t qpn) const {
    for (size_t i = 0; i < peer_.size(); ++i) {
      if (peer_[i].qpn == qpn) return static_cast<int>(i);
    }
    return -1;
  }

  // Loop 1: the peer's QP `q` is new to us.
  bool keys_new(int q) {
    const auto k = exchange_keys(q);
    if (!k) return false;
    if (q == 0) {
      if (reads(o_.test) && k->out_reads <= 1) {
        return fail(
            fmt::format("the {} runs a write or send test (it allows {} outstanding "
                        "reads), this side runs {}: run the same test on both sides",
                        peer_name(), k->out_reads, perf_test_name(o_.test)));
      }
      if (!reads(o_.test) && k->out_reads > 1) {
        return fail(
            fmt::format("the {} runs a READ or atomic test (it allows {} outstanding "
                        "reads), this side runs {}: run the same test on both sides",
                        peer_name(), k->out_reads, perf_test_name(o_.test)));
      }
      if (wire::is_ipv4_mapped(k->gid) != wire::is_ipv4_mapped(mine_[0].gid)) {
        return fail(
            fmt::format("the {} uses GID {} and this side {}: both must be IPv4 or both "
                        "IPv6 (pick the GID with -x)",
                        peer_name(), gid_to_text(k->gid), gid_to_text(mine_[0].gid)));
      }
    } else if (known_index(k->qpn) >= 0) {
      return fail(
          fmt::format("the {} has {} QP{} (-q {}), this side {} (-q {}): give both sides "
                      "the same -q",
                      peer_name(), q, q == 1 ? "" : "s", q, setup_.num_qps, setup_.num_qps));
    }
    peer_.push_back(*k);
    return true;
  }

  // Loop 2 and the barriers: the peer repeats its QP `q`.
  bool keys_same(int q, double wait = kReplyWait) {
    const auto k = exchange_keys(q, wait);
    if (!k) return false;
    if (k->qpn == peer_[static_cast<size_t>(q)].qpn) return true;
    if (known_index(k->qpn) < 0) {
      return fail(
          fmt::format("the {} has more QPs than this side's {} (-q {}): give both sides "
                      "the same -q",
                      peer_name(), setup_.num_qps, setup_.num_qps));
    }
    return fail(fmt::format(
        "the {} is out of step (QP 0x{:06x} where 0x{:06x} was due): it runs "
        "another test than {}",
        peer_name(), k->qpn, peer_[static_cast<size_t>(q)].qpn, perf_test_name(o_.test)));
  }

  bool connect() {
    std::vector<PerfQpInfo> remote;
    for (const Keys& k : peer_) remote.push_back({k.qpn, k.psn, k.rkey, k.vaddr, k.gid});
    // Our READ/atomic initiator depth must fit the responder resources the peer set up
    // (its own out_reads); it sets its initiator depth from ours.
    const auto depth = static_cast<uint8_t>(
        reads(o_.test) ? std::clamp<uint32_t>(peer_[0].out_reads, 1, kOutReads) : 1);
    std::string error;
    if (!ctx_->connect(remote, error, server_ ? kOutReads : depth)) return fail(error);
    return true;
  }

  bool pre_run() {
    const int qps = setup_.num_qps;
    const bool leading = shape_ == Shape::kWriteLat || shape_ == Shape::kReadLat;
    if (leading && !keys_new(0)) return false;
    for (int q = 0; q < qps; ++q) {
      if (!(leading && q == 0 ? keys_same(0) : keys_new(q))) return false;
    }
    if (!connect()) return false;
    const bool send = shape_ == Shape::kSendBw || shape_ == Shape::kSendLat;
    if (send && !keys_same(0)) return false;
    for (int q = 0; q < qps; ++q) {
      if (!keys_same(q)) return false;
    }
    if (!send && !keys_same(0)) return false;
    return true;
  }

  // A K1 that may wait for the peer's run (server side): watch our QPs meanwhile.
  bool barrier_after_peer_run(uint64_t expect_len, uint64_t& unexpected) {
    if (server_) {
      PeerWait w;
      await_peer_message(*ctx_, sock_.fd(), std::nullopt, expect_len, w);
      unexpected = w.receives;
      if (!w.cq_error.empty()) return fail(w.cq_error);
      if (w.flushed) {
        // The responder moves the QP to the error state when it refuses an access.
        return fail(
            fmt::format("this side refused an RDMA access of the {} (its messages are "
                        "larger than this side's -s {}, or it runs another test than "
                        "{}): run the same test and -s on both sides",
                        peer_name(), o_.sizes.back(), perf_test_name(o_.test)));
      }
      if (w.closed) {
        return fail(
            fmt::format("the {} closed the connection during its run (see its output; "
                        "are its messages larger than this side's -s {}?)",
                        peer_name(), o_.sizes.back()));
      }
      if (w.receives > 0 && o_.test.verb != PerfVerb::kSend) {
        return fail(
            fmt::format("the {} sends SENDs ({} bytes): it runs send_bw or send_lat, "
                        "this side runs {}",
                        peer_name(), w.last_len, perf_test_name(o_.test)));
      }
    }
    return keys_same(0);
  }

  void close_connection(double wait = kReplyWait) {
    // ctx_close_connection: K1, then "done" (never read by anyone).
    if (!keys_same(0, wait)) return;
    static constexpr std::array<char, perftest::kDoneSize> kDone = {'d', 'o', 'n', 'e', '\0'};
    (void)sock_.send_all(kDone);
  }

  // --- client -----------------------------------------------------------------------------
  // No buffer reset between sizes: perftest does none, and in write_lat the peer's first
  // message of the next size may already be in our region.
  bool run_one(uint64_t size, PerfOutcome& out) {
    if (shape_ == Shape::kWriteLat || shape_ == Shape::kSendLat) {
      perftest_pingpong(*ctx_, o_.test, size, server_, size == o_.sizes.front(), out);
    } else {
      run_client_size(*ctx_, sock_, o_.test, size, o_.report_gbits, out);
      // perftest reports the messages of all QPs.
      out.bw.iterations = 0;
      for (uint64_t n : out.sent) out.bw.iterations += n;
      if (o_.test.kind == PerfKind::kLatency) out.lat.iterations = setup_.iters;
    }
    if (!out.ok) {
      if (out.error.find("remote access error") != std::string::npos ||
          out.error.find("remote invalid request") != std::string::npos) {
        out.error += fmt::format(
            " (the {}'s buffers are smaller than {} bytes, or it runs "
            "another test than {}: run the same test and -s on both sides)",
            peer_name(), size, perf_test_name(o_.test));
      } else if (out.error.find("no completion for") != std::string::npos) {
        out.error += fmt::format(" (or the {} runs another test than {})", peer_name(),
                                 perf_test_name(o_.test));
      }
      return fail(out.error);
    }
    return true;
  }

  void report(const PerfOutcome& out) {
    const bool lat = o_.test.kind == PerfKind::kLatency;
    results_.push_back(lat ? to_json(out.lat) : to_json(out.bw, o_.report_gbits));
    if (!o_.json) {
      fmt::print("{}\n", lat ? lat_line(out.lat) : bw_line(out.bw));
      std::fflush(stdout);
    }
  }

  void drive() {
    PerfOutcome last;
    for (uint64_t size : o_.sizes) {
      if ((shape_ == Shape::kSendBw || shape_ == Shape::kSendLat) && !keys_same(0)) return;
      PerfOutcome out;
      if (!run_one(size, out)) return;
      report(out);
      last = out;
      if (shape_ == Shape::kSendBw && o_.all_sizes && !keys_same(0)) return;
    }
    switch (shape_) {
      case Shape::kRdmaBw: {
        if (!keys_same(0) || !exchange_report(last.bw)) return;
        close_connection();
        break;
      }
      case Shape::kSendBw:
      case Shape::kSendLat:
      case Shape::kReadLat:
        close_connection();
        break;
      case Shape::kWriteLat:
        break;  // perftest's write_lat ends without a closing exchange
    }
  }

  // xchg_bw_reports: size, iterations, peak, average, message rate; the server prints the
  // client's. Returns the peer's report in `theirs`.
  bool exchange_report(const BwResult& mine, BwResult* theirs = nullptr) {
    std::array<perftest::ReportField, 5> out = {
        perftest::encode_u64(mine.size), perftest::encode_u64(mine.iterations),
        perftest::encode_double(mine.bw_peak), perftest::encode_double(mine.bw_average),
        perftest::encode_double(mine.msg_rate_mpps)};
    std::array<perftest::ReportField, 5> in{};
    for (size_t i = 0; i < out.size(); ++i) {
      if (server_ && i == 0) {
        // The client writes its report right after the barrier, unless it is running a
        // test of another shape: watch the QPs meanwhile, as in the barrier.
        PeerWait w;
        await_peer_message(*ctx_, sock_.fd(), deadline_after(kReplyWait), 0, w);
        if (w.receives > 0) {
          return fail(
              fmt::format("the {} sends SENDs: it runs send_bw or send_lat, this side "
                          "runs {}",
                          peer_name(), perf_test_name(o_.test)));
        }
      }
      if (!xchg(out[i], in[i], "its results")) return false;
      if (server_ && i == 0 && looks_like_keys(in[0])) {
        return fail(
            fmt::format("the {} sent QP keys where its results were due: it runs a "
                        "latency test, this side runs {}",
                        peer_name(), perf_test_name(o_.test)));
      }
    }
    if (theirs != nullptr) {
      theirs->size = perftest::decode_u64(in[0]);
      theirs->iterations = perftest::decode_u64(in[1]);
      theirs->bw_peak = perftest::decode_double(in[2]);
      theirs->bw_average = perftest::decode_double(in[3]);
      theirs->msg_rate_mpps = perftest::decode_double(in[4]);
    }
    return true;
  }

  // --- server -----------------------------------------------------------------------------
  void serve() {
    switch (shape_) {
      case Shape::kRdmaBw:
        serve_rdma_bw();
        break;
      case Shape::kSendBw:
        serve_send_bw();
        break;
      case Shape::kSendLat:
      case Shape::kWriteLat:
        for (uint64_t size : o_.sizes) {
          if (shape_ == Shape::kSendLat && !keys_same(0)) return;
          PerfOutcome out;
          if (!run_one(size, out)) return;
          report(out);
        }
        if (shape_ == Shape::kSendLat) close_connection();
        break;
      case Shape::kReadLat: {
        uint64_t unexpected = 0;
        if (!barrier_after_peer_run(0, unexpected)) return;
        static constexpr std::array<char, perftest::kDoneSize> kDone = {'d', 'o', 'n', 'e', '\0'};
        (void)sock_.send_all(kDone);
        break;
      }
    }
  }

  void serve_rdma_bw() {
    uint64_t unexpected = 0;
    if (!barrier_after_peer_run(0, unexpected)) return;
    BwResult client;
    if (!exchange_report(BwResult{}, &client)) return;
    results_.push_back(to_json(client, o_.report_gbits));
    if (!o_.json) {
      fmt::print("{}\n", bw_line(client));
      std::fflush(stdout);
    }
    close_connection();
    const uint64_t want_iters = setup_.iters * static_cast<uint64_t>(setup_.num_qps);
    if (client.size != o_.sizes.back()) {
      fail(
          fmt::format("the {} ran {}-byte messages, this server -s {}: give both sides the same "
                      "-s",
                      peer_name(), client.size, o_.sizes.back()));
    } else if (client.iterations != want_iters) {
      fail(
          fmt::format("the {} ran {} iterations, this server expects {} (-n {} x {} QPs): give "
                      "both sides the same -n",
                      peer_name(), client.iterations, want_iters, setup_.iters, setup_.num_qps));
    }
  }

  void serve_send_bw() {
    for (uint64_t size : o_.sizes) {
      if (!keys_same(0)) return;
      PerfOutcome out;
      bool early = false;
      perftest_send_bw_server(*ctx_, sock_.fd(), size, o_.report_gbits, out, early);
      if (!out.ok) {
        fail(out.error);
        // Complete the exchange when the client is waiting for it, so it ends cleanly (a
        // client of another test may send something else: do not wait long for it).
        if (early) close_connection(1);
        return;
      }
      report(out);
      if (o_.all_sizes) {
        uint64_t extra = 0;
        if (!barrier_after_peer_run(size, extra)) return;
        if (extra > 0) {
          fail(
              fmt::format("the {} sent {} more SENDs than this server's -n {}: give both sides "
                          "the same -n",
                          peer_name(), extra, setup_.iters));
          return;
        }
      }
    }
    PeerWait w;
    await_peer_message(*ctx_, sock_.fd(), std::nullopt, 0, w);
    close_connection();
    if (w.receives > 0) {
      fail(
          fmt::format("the {} sent {} more SENDs than this server's -n {} per QP: give both "
                      "sides the same -n",
                      peer_name(), w.receives, setup_.iters));
    }
  }

  int finish() {
    const bool ok = error_.empty();
    if (o_.json) {
      nlohmann::json j = {{"test", perf_test_name(o_.test)},
                          {"peer", fmt::format("perftest {}", peer_version_.text)},
                          {"connection", connection_name(o_.conn)},
                          {"num_qps", setup_.num_qps},
                          {"mtu", setup_.mtu},
                          {"results", results_},
                          {"ok", ok}};
      if (!ok) j["error"] = error_;
      if (ctx_) j["local"] = run_device_report(*ctx_);  // perftest sends no counters
      fmt::print("{}\n", j.dump());
    } else if (ctx_ && ok) {
      fmt::print("{}\n", kResultLine);
    }
    std::fflush(stdout);
    if (!ok) fmt::print(stderr, "{}: {}\n", kPerfCommand, error_);
    return ok ? kExitOk : kExitFailure;
  }

  PerfOptions& o_;
  OobSocket& sock_;
  bool server_;
  PeerVersion peer_version_;
  Shape shape_;
  uint32_t cycle_buffer_ = perftest::kDefaultCycleBuffer;
  std::optional<GidChoice> gid_;
  PerfSetup setup_;
  std::unique_ptr<PerfContext> ctx_;
  std::vector<Keys> mine_;
  std::vector<Keys> peer_;
  nlohmann::json results_ = nlohmann::json::array();
  std::string error_;
};

}  // namespace

std::optional<PeerVersion> greet_as_client(OobSocket& sock, std::string& error) {
  perftest::VersionMsg theirs{};
  if (!sock.send_all(perftest::encode_version(true)) ||
      !sock.recv_all(theirs, deadline_after(kGreetingWait))) {
    error =
        "the server closed the connection or did not answer the greeting (is it perftest or "
        "uroce perf of this version?)";
    return std::nullopt;
  }
  auto v = perftest::decode_version(theirs);
  if (!v) error = "the server's greeting is neither perftest's nor uroce perf's version message";
  return v;
}

std::optional<PeerVersion> greet_as_server(OobSocket& sock, std::string& error) {
  perftest::VersionMsg theirs{};
  if (!sock.recv_all(theirs, deadline_after(kGreetingWait))) {
    error = "the client sent no greeting";
    return std::nullopt;
  }
  auto v = perftest::decode_version(theirs);
  if (!v) {
    error = theirs[0] == '{'
                ? "the client is an older uroce perf (JSON first): run the same uroce version on "
                  "both sides"
                : "the client's greeting is neither perftest's nor uroce perf's version message";
    return std::nullopt;
  }
  if (v->uroce && !sock.send_all(perftest::encode_version(true))) {
    error = "the client closed the connection";
    return std::nullopt;
  }
  return v;
}

int run_perftest_client(PerfOptions& o, std::unique_ptr<device::Device> dev, OobSocket& sock,
                        const PeerVersion& peer) {
  return Session(o, sock, false, peer).run(std::move(dev));
}

int run_perftest_server(PerfOptions& o, std::unique_ptr<device::Device> dev, OobSocket& sock,
                        const PeerVersion& peer) {
  return Session(o, sock, true, peer).run(std::move(dev));
}

}  // namespace uroce::cli
