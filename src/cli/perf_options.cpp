// perftest-compatible options of `uroce perf`: see perf_options.hpp.
#include "cli/perf_options.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <array>

namespace uroce::cli {
namespace {

struct TestName {
  std::string_view name;
  PerfTest test;
};

constexpr std::array<TestName, 8> kTests = {{
    {"write_bw", {PerfVerb::kWrite, PerfKind::kBandwidth}},
    {"read_bw", {PerfVerb::kRead, PerfKind::kBandwidth}},
    {"send_bw", {PerfVerb::kSend, PerfKind::kBandwidth}},
    {"atomic_bw", {PerfVerb::kAtomic, PerfKind::kBandwidth}},
    {"write_lat", {PerfVerb::kWrite, PerfKind::kLatency}},
    {"read_lat", {PerfVerb::kRead, PerfKind::kLatency}},
    {"send_lat", {PerfVerb::kSend, PerfKind::kLatency}},
    {"atomic_lat", {PerfVerb::kAtomic, PerfKind::kLatency}},
}};

// perftest defaults (perftest_parameters.h).
constexpr uint64_t kDefSizeBw = 65536;
constexpr uint64_t kDefSizeLat = 2;
constexpr uint64_t kDefItersBw = 5000;
constexpr uint64_t kDefItersLat = 1000;
constexpr int kDefTxBw = 128;
constexpr int kDefTxLat = 1;
constexpr int kDefRxSend = 512;
constexpr int kDefCqMod = 100;
constexpr int kMaxCqMod = 1000;
constexpr int kMaxDepth = 16384;  // the device's max_qp_wr
constexpr uint64_t kAtomicSize = 8;

bool allowed(PerfTest test, PerfConnection c) {
  switch (test.verb) {
    case PerfVerb::kWrite:
      return c != PerfConnection::kUd;
    case PerfVerb::kSend:
      return true;
    case PerfVerb::kRead:
    case PerfVerb::kAtomic:
      return c == PerfConnection::kRc;
  }
  return false;
}

}  // namespace

std::optional<PerfTest> parse_perf_test(std::string_view name) {
  for (const TestName& t : kTests) {
    if (t.name == name) return t.test;
  }
  return std::nullopt;
}

std::string perf_test_name(PerfTest test) {
  for (const TestName& t : kTests) {
    if (t.test == test) return std::string(t.name);
  }
  return "?";
}

std::string perf_test_title(PerfTest test, AtomicType atomic) {
  static constexpr std::array<std::string_view, 4> kVerbs = {"RDMA_Write", "RDMA_Read", "Send",
                                                             "Atomic"};
  std::string title(kVerbs[static_cast<size_t>(test.verb)]);
  if (test.verb == PerfVerb::kAtomic) {
    title += atomic == AtomicType::kFetchAndAdd ? " FETCH_and_ADD" : " CMP_and_SWAP";
  }
  title += test.kind == PerfKind::kBandwidth ? " BW Test" : " Latency Test";
  return title;
}

std::string_view connection_name(PerfConnection c) {
  switch (c) {
    case PerfConnection::kRc:
      return "RC";
    case PerfConnection::kUc:
      return "UC";
    case PerfConnection::kUd:
      return "UD";
  }
  return "?";
}

std::string_view atomic_type_name(AtomicType a) {
  return a == AtomicType::kFetchAndAdd ? "FETCH_AND_ADD" : "CMP_AND_SWAP";
}

void add_perf_options(CLI::App& sub, PerfOptions& o) {
  std::string tests;
  for (const TestName& t : kTests) tests += (tests.empty() ? "" : ", ") + std::string(t.name);
  sub.add_option("TEST", o.test_name, "One of " + tests)->required();
  sub.add_option("HOST", o.host, "Server to connect to; without it, run as the server");
  sub.add_option(
      "-d,--ib-dev", o.device,
      "Device to use (default: the one whose GID the TCP connection's address is, else the first)");
  sub.add_option("-i,--ib-port", o.ib_port, "Port of the device (default 1)")
      ->check(CLI::Range(1, 255));
  sub.add_option("-x,--gid-index", o.gid_index,
                 "GID index (default: the GID of the address the TCP connection uses)")
      ->check(CLI::Range(0, 1023));
  sub.add_option("-s,--size", o.size, "Message size in bytes (default 65536 BW, 2 latency)");
  sub.add_flag("-a,--all", o.all_sizes, "Run sizes from 2 till 2^23");
  sub.add_option("-n,--iters", o.iters, "Iterations (default 5000 BW, 1000 latency)");
  sub.add_option("-D,--duration", o.duration, "Run for this many seconds instead of -n");
  sub.add_option("-q,--qp", o.num_qps, "Number of QPs (BW tests, default 1)")
      ->check(CLI::Range(1, kPerfMaxQps));
  sub.add_option("-m,--mtu", o.mtu, "Path MTU: 256, 512, 1024, 2048 or 4096 (default: active)")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  sub.add_option("-c,--connection", o.connection, "Connection type RC, UC or UD (default RC)")
      ->check(CLI::IsMember({"RC", "UC", "UD"}, CLI::ignore_case));
  sub.add_option("-t,--tx-depth", o.tx_depth, "Send queue depth (default 128 BW, 1 latency)")
      ->check(CLI::Range(1, kMaxDepth));
  sub.add_option("-r,--rx-depth", o.rx_depth, "Receive queue depth (default 512)")
      ->check(CLI::Range(1, kMaxDepth));
  sub.add_option("-I,--inline_size", o.inline_size, "Max inline data size")
      ->check(CLI::Range(0, 4096));
  sub.add_flag("-e,--events", o.use_event, "Sleep on CQ events instead of polling");
  sub.add_option("-Q,--cq-mod", o.cq_mod, "Signal every N-th send (BW tests, default 100)")
      ->check(CLI::Range(1, kMaxCqMod));
  sub.add_option("-A,--atomic_type", o.atomic_type, "CMP_AND_SWAP or FETCH_AND_ADD (default)")
      ->check(CLI::IsMember({"CMP_AND_SWAP", "FETCH_AND_ADD"}, CLI::ignore_case));
  sub.add_option("-p,--port", o.port, "TCP port of the side channel (default 18515)")
      ->check(CLI::Range(1, 65535));
  sub.add_flag("-F,--CPU-freq", o.cpu_freq_ignored,
               "Accepted for perftest compatibility (uroce measures with the monotonic clock)");
  sub.add_flag("--report_gbits", o.report_gbits, "Report bandwidth in Gb/sec");
  sub.add_flag("--json", o.json, "Print the results as one JSON object");
  sub.add_flag("--verify", o.verify,
               "Fill every message with a pattern per iteration and check every byte received");
  sub.add_option("--recovery", o.recovery_text,
                 "Loss recovery to offer: gbn or sr (selective repeat, used only if the uroce "
                 "peer offers it too; default: UROCE_RECOVERY or gbn)");
  sub.add_option("--timeout", o.timeout, "Give up after this many seconds (default: never)")
      ->check(CLI::NonNegativeNumber);
  add_cc_options(sub, o.cc, true);
}

std::string finish_perf_options(PerfOptions& o) {
  if (!o.recovery_text.empty()) {
    transport::Recovery r{};
    if (std::string err = transport::parse_recovery("--recovery", o.recovery_text, r);
        !err.empty()) {
      return err;
    }
    o.recovery = r;
  }
  const auto test = parse_perf_test(o.test_name);
  if (!test) {
    // The name is echoed: control characters (a newline) would break the one-line error.
    std::string shown = o.test_name;
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
    }
    return fmt::format(
        "unknown test '{}'; choose write_bw, read_bw, send_bw, atomic_bw, "
        "write_lat, read_lat, send_lat or atomic_lat",
        shown);
  }
  o.test = *test;
  const bool bw = o.test.kind == PerfKind::kBandwidth;

  std::string conn = o.connection;
  for (char& c : conn) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  o.conn = conn == "UD" ? PerfConnection::kUd
                        : (conn == "UC" ? PerfConnection::kUc : PerfConnection::kRc);
  if (!allowed(o.test, o.conn)) {
    return fmt::format("{} does not run over {}; {}", o.test_name, connection_name(o.conn),
                       o.test.verb == PerfVerb::kWrite ? "use -c RC or UC" : "use -c RC");
  }
  if (!o.atomic_type.empty()) {
    if (o.test.verb != PerfVerb::kAtomic) {
      return "-A/--atomic_type needs atomic_bw or atomic_lat";
    }
    std::string a = o.atomic_type;
    for (char& c : a) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    o.atomic = a == "CMP_AND_SWAP" ? AtomicType::kCmpAndSwap : AtomicType::kFetchAndAdd;
  }
  if (o.num_qps > 1 && !bw) return "multiple QPs (-q) only run in BW tests";
  if (o.cq_mod && !bw) return "-Q/--cq-mod only applies to BW tests";
  if (o.duration && o.iters) return "give either -n/--iters or -D/--duration, not both";
  if (o.duration && (*o.duration <= 0 || *o.duration > 3600)) {
    // 0 is out: the message says so instead of "between 0 and ..." (issue 9).
    return "-D/--duration must be more than 0 and at most 3600 seconds";
  }
  if (o.iters && (*o.iters < 5 || *o.iters > 100'000'000)) {
    return "-n/--iters must be between 5 and 100000000";
  }
  if (o.all_sizes && o.size) return "give either -a/--all or -s/--size, not both";
  if (o.all_sizes && o.test.verb == PerfVerb::kAtomic) return "-a/--all does not apply to atomics";
  if (o.size && (*o.size < 1 || *o.size > kPerfMaxSize)) {
    return fmt::format("-s/--size must be between 1 and {}", kPerfMaxSize);
  }
  if (o.test.verb == PerfVerb::kAtomic && o.size && *o.size != kAtomicSize) {
    return "atomic tests move 8 bytes; drop -s or give -s 8";
  }
  if (o.inline_size && o.test.verb != PerfVerb::kWrite && o.test.verb != PerfVerb::kSend) {
    return "-I/--inline_size only applies to write and send tests";
  }
  if (o.rx_depth && o.test.verb != PerfVerb::kSend) return "-r/--rx-depth only applies to send";
  if (std::string cc = finish_cc_options(o.cc); !cc.empty()) return cc;

  if (!o.iters) o.iters = bw ? kDefItersBw : kDefItersLat;
  if (!o.tx_depth) o.tx_depth = bw ? kDefTxBw : kDefTxLat;
  if (!o.rx_depth) o.rx_depth = kDefRxSend;
  if (!o.cq_mod) o.cq_mod = std::min(kDefCqMod, *o.tx_depth);
  if (*o.cq_mod > *o.tx_depth) return "-Q/--cq-mod cannot be larger than -t/--tx-depth";
  o.sizes.clear();
  if (o.test.verb == PerfVerb::kAtomic) {
    o.sizes.push_back(kAtomicSize);
  } else if (o.all_sizes) {
    for (int e = 1; e <= kPerfAllMaxExponent; ++e) o.sizes.push_back(1ull << e);
  } else {
    o.sizes.push_back(o.size.value_or(bw ? kDefSizeBw : kDefSizeLat));
  }
  if (o.conn == PerfConnection::kUd) {
    const uint64_t mtu = o.mtu.value_or(4096);
    if (o.all_sizes) std::erase_if(o.sizes, [mtu](uint64_t s) { return s > mtu; });
    for (uint64_t s : o.sizes) {
      if (s > mtu) return fmt::format("a UD message cannot be larger than the MTU ({} bytes)", mtu);
    }
  }
  return {};
}

}  // namespace uroce::cli
