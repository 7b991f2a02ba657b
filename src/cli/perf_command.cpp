// `uroce perf <test> [host]`: perftest's ib_{write,read,send,atomic}_{bw,lat} for uroce.
// Without a host it is the server: it waits on TCP port 18515 (-p). Both sides open with
// perftest's version message (perf_perftest.hpp): against a uroce peer the server then takes
// the test's parameters from the client (only the test name must match) and answers; against
// perftest each side uses its own (perf_perftest.cpp). Output is perftest's banner and table
// (perf_report.hpp), or one JSON object with --json.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/oob_socket.hpp"
#include "cli/peer_diagnosis.hpp"
#include "cli/perf_context.hpp"
#include "cli/perf_options.hpp"
#include "cli/perf_perftest.hpp"
#include "cli/perf_report.hpp"
#include "cli/perf_run.hpp"
#include "cli/perf_telemetry.hpp"
#include "cli/verbs_setup.hpp"
#include "cli/watchdog.hpp"

namespace uroce::cli {
namespace {

constexpr uint64_t kVerifyRingBytes = 16ull << 20;  // per side, --verify write/read rings
constexpr uint64_t kSendRingBytes = 64ull << 20;    // per side, --verify send rings
constexpr int kDefInlineLat = 220;                  // perftest's DEF_INLINE_WRITE
constexpr uint64_t kUdGrh = 40;

int usage_error(const std::string& message) {
  fmt::print(stderr, "{}: {}; run 'uroce perf --help' for usage\n", kPerfCommand, message);
  return kExitUsage;
}

int failure(const std::string& message) {
  fmt::print(stderr, "{}: {}\n", kPerfCommand, message);
  return kExitFailure;
}

}  // namespace

// The setup the client proposes (its QPs are added once they exist).
PerfSetup make_setup(const PerfOptions& o, uint32_t mtu) {
  PerfSetup s;
  s.test = perf_test_name(o.test);
  s.conn = o.conn;
  s.atomic = o.atomic;
  s.sizes = o.sizes;
  s.iters = *o.iters;
  s.duration = o.duration.value_or(0);
  s.num_qps = o.num_qps;
  s.mtu = mtu;
  s.tx_depth = *o.tx_depth;
  s.rx_depth = *o.rx_depth;
  s.cq_mod = *o.cq_mod;
  s.inline_size = o.inline_size.value_or(o.test.kind == PerfKind::kLatency ? kDefInlineLat : 0);
  s.verify = o.verify;
  s.events = o.use_event;
  uint64_t max_size = 0;
  for (uint64_t z : s.sizes) max_size = std::max(max_size, z);
  const bool ud_send = o.test.verb == PerfVerb::kSend && o.conn == PerfConnection::kUd;
  s.slot_size = max_size + (ud_send ? kUdGrh : 0);
  const uint64_t stride = perf_slot_stride(s.slot_size);
  const uint64_t qps = static_cast<uint64_t>(s.num_qps);
  const uint64_t runs = s.duration > 0 ? UINT64_MAX : s.iters;
  s.ring_slots = 1;
  if (o.test.verb == PerfVerb::kAtomic) {
    s.ring_slots = static_cast<uint64_t>(s.tx_depth);
  } else if (s.verify && o.test.kind == PerfKind::kBandwidth && o.test.verb == PerfVerb::kSend) {
    uint64_t r = static_cast<uint64_t>(std::max(s.tx_depth, s.rx_depth));
    r = std::min(r, std::max<uint64_t>(1, kSendRingBytes / qps / stride));
    s.ring_slots = r;
    s.tx_depth = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(s.tx_depth), r));
    s.rx_depth = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(s.rx_depth), r));
    s.cq_mod = std::min(s.cq_mod, s.tx_depth);
  } else if (s.verify && (o.test.verb == PerfVerb::kWrite || o.test.verb == PerfVerb::kRead) &&
             !(o.test.kind == PerfKind::kLatency && o.test.verb == PerfVerb::kWrite)) {
    s.ring_slots = std::clamp<uint64_t>(kVerifyRingBytes / qps / stride, 1, runs);
  }
  return s;
}

void print_banner(const PerfOptions& o, const PerfSetup& s, const PerfContext& ctx) {
  const PerfTest t = o.test;
  std::string b;
  auto line = [&b](const std::string& text) { b += text + "\n"; };
  line(std::string(kResultLine));
  line("                    " + perf_test_title(t, s.atomic));
  line(fmt::format(" Dual-port       : OFF\t\tDevice         : {}", ctx.dev().name()));
  line(fmt::format(" Number of qps   : {}\t\tTransport type : IB", s.num_qps));
  line(fmt::format(" Connection type : {}\t\tUsing SRQ      : OFF", connection_name(s.conn)));
  const bool lat = t.kind == PerfKind::kLatency;
  line(fmt::format(" TX depth        : {}", lat ? 1 : s.tx_depth));
  if (t.verb == PerfVerb::kSend) line(fmt::format(" RX depth        : {}", s.rx_depth));
  if (!lat) line(fmt::format(" CQ Moderation   : {}", s.cq_mod));
  line(fmt::format(" Mtu             : {}[B]", s.mtu));
  line(" Link type       : Ethernet");
  line(fmt::format(" GID index       : {}", ctx.gid().index));
  line(fmt::format(" Max inline data : {}[B]", ctx.max_inline()));
  if (t.verb == PerfVerb::kRead || t.verb == PerfVerb::kAtomic) {
    line(fmt::format(" Outstand reads  : {}", 16));
  }
  line(" rdma_cm QPs\t : OFF");
  line(" Data ex. method : Ethernet");
  if (s.verify) line(" Data verify     : ON (every byte of every message)");
  line(std::string(kResultLine));
  const bool rdma = t.verb != PerfVerb::kSend;
  const auto local = ctx.local_info();
  for (size_t q = 0; q < local.size(); ++q) {
    line(perf_address_line("local", local[q].qpn, local[q].psn, rdma, local[q].rkey,
                           local[q].vaddr));
    line(perf_gid_line(local[q].gid));
  }
  for (const PerfQpInfo& r : ctx.remote()) {
    line(perf_address_line("remote", r.qpn, r.psn, rdma, r.rkey, r.vaddr));
    line(perf_gid_line(r.gid));
  }
  line(std::string(kResultLine));
  line(lat ? lat_header() : bw_header(o.report_gbits));
  std::fwrite(b.data(), 1, b.size(), stdout);
  std::fflush(stdout);
}

namespace {

// `remote`: the peer's run_device_report (the server's, for the client), null when unknown.
nlohmann::json json_summary(const PerfOptions& o, const PerfSetup& s, const PerfContext& ctx,
                            const nlohmann::json& results, bool ok, uint64_t checked,
                            const std::string& error, const nlohmann::json& remote) {
  nlohmann::json j = {{"test", perf_test_name(o.test)},
                      {"connection", connection_name(s.conn)},
                      {"num_qps", s.num_qps},
                      {"mtu", s.mtu},
                      {"gid_index", ctx.gid().index},
                      {"tx_depth", s.tx_depth},
                      {"results", results},
                      {"ok", ok}};
  if (o.test.verb == PerfVerb::kAtomic) j["atomic_type"] = atomic_type_name(s.atomic);
  if (s.verify) j["verify"] = {{"passed", ok}, {"checked_bytes", checked}};
  j["recovery"] = transport::recovery_name(s.recovery);
  if (!error.empty()) j["error"] = error;
  j["local"] = run_device_report(ctx);
  if (remote.is_object()) j["remote"] = remote;
  return j;
}

// Resets what a new size must not inherit: ping-pong sequence bytes, atomic counters.
void reset_for_size(PerfContext& ctx, PerfTest t) {
  const PerfSetup& s = ctx.setup();
  if (t.kind == PerfKind::kLatency && t.verb != PerfVerb::kRead) {
    std::memset(ctx.slot(0, 0), 0, s.slot_size);
  }
  if (t.verb == PerfVerb::kAtomic) {
    for (int q = 0; q < s.num_qps; ++q) std::memset(ctx.slot(q, 0), 0, 8);
  }
}

int run_client(PerfOptions& o) {
  std::unique_ptr<device::Device> dev;
  std::string error =
      open_before_side_channel(o.device, o.ib_port, o.gid_index, o.host, o.cc.resolved, dev);
  if (!error.empty()) return failure(error);
  // A refused connection is retried only within --timeout (the server may still be starting).
  auto sock = OobSocket::connect_to(o.host, o.port, deadline_after(o.timeout), error);
  if (!sock) return failure(error);
  if (!dev) dev = open_cli_device(o.device, sock->local_address(), error, o.cc.resolved);
  if (!dev) return failure(error);
  const auto peer = greet_as_client(*sock, error);
  if (!peer) return failure(error);
  if (!peer->uroce) return run_perftest_client(o, std::move(dev), *sock, *peer);
  const auto gid = choose_gid(*dev, o.ib_port, o.gid_index, sock->local_address(), error);
  if (!gid) return failure(error);
  device::PortAttr port;
  if (const auto st = dev->query_port(gid->port, port); !st) return failure(st.message());
  const uint32_t active = transport::mtu_bytes(port.active_mtu);
  std::string mtu_note;
  const uint32_t mtu =
      clamp_path_mtu(*dev, gid->port, o.mtu.value_or(active), std::nullopt, &mtu_note);
  if (!mtu_note.empty()) fmt::print(stderr, "{}: {}\n", kPerfCommand, mtu_note);
  if (o.conn == PerfConnection::kUd && o.test.verb == PerfVerb::kSend) {
    const uint64_t ud_mtu = std::min<uint64_t>(mtu, ud_max_message(*dev));
    if (o.all_sizes) std::erase_if(o.sizes, [&](uint64_t z) { return z > ud_mtu; });
    for (uint64_t z : o.sizes) {
      if (z > ud_mtu) {
        return usage_error(
            fmt::format("a UD message cannot be larger than the MTU ({} bytes)", ud_mtu));
      }
    }
  }
  PerfSetup setup = make_setup(o, mtu);
  if (setup.conn == PerfConnection::kRc) {
    setup.recovery = o.recovery.value_or(dev->config().engine.recovery.offer);
  }
  auto ctx = PerfContext::create(std::move(dev), setup, *gid, error);
  if (!ctx || !prepare_receives(*ctx, o.test, false, error)) return failure(error);
  ctx->set_traffic_class(o.cc.traffic_class);
  setup.qps = ctx->local_info();

  std::string line;
  if (!sock->send_line(to_json(setup).dump()) || !sock->recv_line(line, deadline_after(60))) {
    return failure("the server closed the side channel during setup");
  }
  const auto reply = nlohmann::json::parse(line, nullptr, false);
  // An IPv6 GID toward an IPv4 server (or the reverse) never gets a packet through: the
  // server refuses and sends its GID, so this side says it in its own terms too.
  if (!reply.is_discarded() && reply.is_object() && reply.contains("gid_mismatch")) {
    if (const auto theirs = net::IpAddr::parse(reply.value("gid_mismatch", std::string()))) {
      if (const std::string why = gid_family_mismatch(ctx->dev(), *gid, theirs->bytes);
          !why.empty()) {
        return failure(why);
      }
    }
  }
  if (reply.is_discarded() || !reply.value("ok", false)) {
    return failure("server: " + (reply.is_discarded() ? std::string("garbage")
                                                      : reply.value("error", std::string("?"))));
  }
  // The server lowers the path MTU to its own active MTU (perftest's check_mtu: the
  // smaller of both sides').
  if (const uint32_t peer_mtu = reply.value("mtu", setup.mtu); peer_mtu < setup.mtu) {
    fmt::print(stderr, "{}: the server's active MTU is {}: using {} instead of {}\n", kPerfCommand,
               peer_mtu, peer_mtu, setup.mtu);
    setup.mtu = peer_mtu;
    ctx->set_mtu(peer_mtu);
  }
  std::vector<PerfQpInfo> remote;
  for (const auto& q : reply.value("qps", nlohmann::json::array())) {
    PerfQpInfo info;
    if (!from_json(q, info)) return failure("the server sent a malformed QP description");
    remote.push_back(info);
  }
  // Selective repeat only if we offered it and the server answered that it uses it too.
  if (setup.recovery != transport::Recovery::kSelectiveRepeat ||
      reply.value("recovery", std::string("gbn")) != "sr") {
    setup.recovery = transport::Recovery::kGoBackN;
  }
  if (!ctx->connect(remote, error, std::nullopt, setup.recovery)) return failure(error);
  if (!o.json) print_banner(o, setup, *ctx);

  nlohmann::json results = nlohmann::json::array();
  bool ok = true;
  uint64_t checked = 0;
  std::string first_error;
  nlohmann::json server_report;  // the server's counters as of its last "end" reply
  for (uint64_t size : setup.sizes) {
    reset_for_size(*ctx, o.test);
    nlohmann::json ready;
    if (!sock->send_line(nlohmann::json{{"cmd", "run"}, {"size", size}}.dump()) ||
        !sock->recv_line(line, deadline_after(60))) {
      return failure("the server closed the side channel");
    }
    PerfOutcome out;
    run_client_size(*ctx, *sock, o.test, size, o.report_gbits, out);
    const bool lat = o.test.kind == PerfKind::kLatency;
    const std::string result_line = lat ? lat_line(out.lat) : bw_line(out.bw);
    const nlohmann::json result = lat ? to_json(out.lat) : to_json(out.bw, o.report_gbits);
    // ok/error: the server fails too when the client's side of the transfer failed.
    // sent_pkts: the server's report waits for the packets this device sent (perf_server.cpp).
    nlohmann::json end = {{"cmd", "end"},
                          {"sent", out.sent},
                          {"line", result_line},
                          {"result", result},
                          {"ok", out.ok},
                          {"error", out.error},
                          {"sent_pkts", ctx->dev().counters()[transport::Counter::kSentPkts]}};
    if (!sock->send_line(end.dump()) || !sock->recv_line(line, deadline_after(60))) {
      if (!out.ok) return failure(fmt::format("{} bytes: {}", size, out.error));
      return failure("the server closed the side channel");
    }
    const auto server = nlohmann::json::parse(line, nullptr, false);
    if (server.is_object() && server.contains("device_report")) {
      server_report = server["device_report"];
    }
    checked += out.checked_bytes;
    if (!server.is_discarded()) checked += server.value("checked_bytes", uint64_t{0});
    std::string error_here = out.ok ? std::string() : out.error;
    if (error_here.empty() && (server.is_discarded() || !server.value("ok", false))) {
      error_here = "server: " + (server.is_discarded() ? std::string("garbage")
                                                       : server.value("error", std::string()));
    }
    results.push_back(result);
    if (!o.json) {
      if (error_here.empty()) {
        fmt::print("{}\n", result_line);
      } else {
        fmt::print(stderr, "{}: {} bytes: {}\n", kPerfCommand, size, error_here);
      }
      std::fflush(stdout);
    }
    if (!error_here.empty()) {
      ok = false;
      first_error = error_here;
      break;
    }
  }
  (void)sock->send_line(nlohmann::json{{"cmd", "bye"}}.dump());
  if (o.json) {
    fmt::print(
        "{}\n",
        json_summary(o, setup, *ctx, results, ok, checked, first_error, server_report).dump());
  } else {
    fmt::print("{}\n", kResultLine);
    if (setup.verify && ok) {
      fmt::print(" Data verification passed: {} bytes checked\n", checked);
    }
  }
  return ok ? kExitOk : kExitFailure;
}

int run_server(PerfOptions& o) {
  std::unique_ptr<device::Device> dev;
  std::string error =
      open_before_side_channel(o.device, o.ib_port, o.gid_index, "", o.cc.resolved, dev);
  if (!error.empty()) return failure(error);
  auto sock = OobSocket::accept_one(o.port, std::nullopt, error);
  if (!sock) return failure(error);
  if (!dev) dev = open_cli_device(o.device, sock->local_address(), error, o.cc.resolved);
  if (!dev) return failure(error);
  const auto peer = greet_as_server(*sock, error);
  if (!peer) return failure(error);
  if (!peer->uroce) return run_perftest_server(o, std::move(dev), *sock, *peer);
  std::string line;
  if (!sock->recv_line(line, deadline_after(60))) return failure("the client sent no setup");
  PerfSetup setup;
  const auto msg = nlohmann::json::parse(line, nullptr, false);
  auto refuse = [&](const std::string& why) {
    (void)sock->send_line(nlohmann::json{{"ok", false}, {"error", why}}.dump());
    return failure(why);
  };
  if (msg.is_discarded() || !from_json(msg, setup, error)) {
    return refuse(error.empty() ? "the client sent garbage" : error);
  }
  if (setup.test != perf_test_name(o.test)) {
    return refuse(fmt::format("this server runs {}, the client asked for {}",
                              perf_test_name(o.test), setup.test));
  }
  o.conn = setup.conn;
  o.atomic = setup.atomic;
  const auto gid = choose_gid(*dev, o.ib_port, o.gid_index, sock->local_address(), error);
  if (!gid) return refuse(error);
  if (!setup.qps.empty()) {
    if (const std::string why = gid_family_mismatch(*dev, *gid, setup.qps[0].gid); !why.empty()) {
      net::IpAddr ours;
      ours.bytes = gid->gid;
      (void)sock->send_line(
          nlohmann::json{{"ok", false}, {"error", why}, {"gid_mismatch", ours.to_string()}}.dump());
      return failure(why);
    }
  }
  std::string mtu_note;
  setup.mtu = clamp_path_mtu(*dev, gid->port, setup.mtu, std::nullopt, &mtu_note);
  if (!mtu_note.empty()) fmt::print(stderr, "{}: the client's {}\n", kPerfCommand, mtu_note);
  const std::vector<PerfQpInfo> remote = setup.qps;
  // Selective repeat when the client offered it and this side offers it too (RC only).
  const transport::Recovery mine = o.recovery.value_or(dev->config().engine.recovery.offer);
  if (setup.conn != PerfConnection::kRc || mine != transport::Recovery::kSelectiveRepeat) {
    setup.recovery = transport::Recovery::kGoBackN;
  }
  auto ctx = PerfContext::create(std::move(dev), setup, *gid, error);
  if (ctx) ctx->set_traffic_class(o.cc.traffic_class);
  if (!ctx || !prepare_receives(*ctx, o.test, true, error) ||
      !ctx->connect(remote, error, std::nullopt, setup.recovery)) {
    return refuse(error);
  }
  nlohmann::json qps = nlohmann::json::array();
  for (const PerfQpInfo& q : ctx->local_info()) qps.push_back(to_json(q));
  if (!sock->send_line(nlohmann::json{{"ok", true},
                                      {"qps", qps},
                                      {"mtu", setup.mtu},
                                      {"recovery", transport::recovery_name(setup.recovery)}}
                           .dump())) {
    return failure("the client closed the side channel");
  }
  if (!o.json) print_banner(o, setup, *ctx);

  nlohmann::json results = nlohmann::json::array();
  bool ok = true;
  uint64_t checked = 0;
  std::string first_error;
  for (;;) {
    if (!sock->recv_line(line, std::nullopt)) return failure("the client closed the side channel");
    const auto cmd = nlohmann::json::parse(line, nullptr, false);
    const std::string name = cmd.is_discarded() ? "" : cmd.value("cmd", std::string());
    if (name == "bye") break;
    if (name != "run") return failure("unexpected message from the client: " + line);
    const uint64_t size = cmd.value("size", uint64_t{0});
    if (size == 0 || size > setup.slot_size) return failure("the client asked for a bad size");
    reset_for_size(*ctx, o.test);
    if (!sock->send_line(nlohmann::json{{"ready", true}}.dump())) {
      return failure("the client closed the side channel");
    }
    std::string end_line;
    nlohmann::json reply;
    if (!serve_size(*ctx, *sock, o.test, size, end_line, reply)) {
      return failure("the client closed the side channel");
    }
    checked += reply.value("checked_bytes", uint64_t{0});
    results.push_back(reply.value("result", nlohmann::json()));
    if (!reply.value("ok", false)) {
      ok = false;
      first_error = reply.value("error", std::string());
      if (!o.json) fmt::print(stderr, "{}: {} bytes: {}\n", kPerfCommand, size, first_error);
    } else if (!o.json && !end_line.empty()) {
      fmt::print("{}\n", end_line);
      std::fflush(stdout);
    }
  }
  if (o.json) {
    fmt::print("{}\n",
               json_summary(o, setup, *ctx, results, ok, checked, first_error, nullptr).dump());
  } else {
    fmt::print("{}\n", kResultLine);
    if (setup.verify && ok) fmt::print(" Data verification passed: {} bytes checked\n", checked);
  }
  return ok ? kExitOk : kExitFailure;
}

int run_perf(PerfOptions& o) {
  if (const std::string problem = finish_perf_options(o); !problem.empty()) {
    return usage_error(problem);
  }
  if (o.use_event && o.test.verb == PerfVerb::kWrite && o.test.kind == PerfKind::kLatency) {
    return usage_error("-e/--events does not apply to write_lat (it polls memory)");
  }
  arm_watchdog(kPerfCommand, o.timeout);
  return o.host.empty() ? run_server(o) : run_client(o);
}

}  // namespace

Subcommand add_perf_command(CLI::App& app) {
  auto options = std::make_shared<PerfOptions>();
  CLI::App* sub = app.add_subcommand(
      "perf",
      "perftest-style benchmarks: uroce perf TEST [HOST] (server without HOST); either side "
      "may be Debian's perftest (ib_write_bw ...)");
  add_perf_options(*sub, *options);
  return Subcommand{sub, [options] { return run_perf(*options); }};
}

}  // namespace uroce::cli
