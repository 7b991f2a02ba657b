// The rows of env_table.hpp and what is derived from them (warnings, rendered tables).
#include "config/env_table.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

extern char** environ;

namespace uroce::config {
namespace {

// "all": every uroce process: the libibverbs drop-in, the `uroce` CLI and C++ programs that
// call uroce::OpenOptions::from_env(). One row per variable, one line each.
// clang-format off
constexpr EnvVar kTable[] = {
    {.name = "UROCE_UDP_PORT", .kind = EnvKind::kUint, .meaning = "UDP port RoCE v2 packets are sent to and received on; both peers must use the same one", .default_text = "4791", .range_text = "1 .. 65535", .what = "a UDP port", .readers = "all", .min = 1, .max = 65535},
    {.name = "UROCE_PORT", .kind = EnvKind::kUint, .meaning = "Deprecated alias of UROCE_UDP_PORT (if both are set they must agree)", .default_text = "4791", .range_text = "1 .. 65535", .what = "a UDP port", .readers = "all", .min = 1, .max = 65535, .alias_of = "UROCE_UDP_PORT"},
    {.name = "UROCE_NETDEVS", .kind = EnvKind::kList, .meaning = "Only these netdevs (comma-separated) get a device `uroce_<netdev>`", .default_text = "every netdev that is up with an address", .range_text = "netdev names", .readers = "all"},
    {.name = "UROCE_DEVICE_ADDR", .kind = EnvKind::kAddrList, .meaning = "Local addresses to bind (comma-separated), each a GID of the device opened", .default_text = "every GID address of the device", .range_text = "IPv4/IPv6 addresses", .readers = "all"},
    {.name = "UROCE_MTU", .kind = EnvKind::kUint, .meaning = "Active MTU of the device in bytes", .default_text = "netdev MTU - 80, rounded down to an IB MTU (as rxe)", .range_text = "256, 512, 1024, 2048 or 4096", .what = "an IB MTU", .readers = "all", .min = 256, .max = 4096},
    {.name = "UROCE_HANDOFF_US", .kind = EnvKind::kUint, .meaning = "How long the progress thread stays parked after an application thread last moved the device's packets itself (busy-polling an empty CQ, or blocked in ibv_get_cq_event), in microseconds (0: never park; it then spins and wakes on every packet alongside the application, and a blocked ibv_get_cq_event waits on its channel)", .default_text = "500", .range_text = "0 .. 1000000", .what = "a number of microseconds", .readers = "all", .min = 0, .max = 1000000},
    {.name = "UROCE_SPIN_US", .kind = EnvKind::kUint, .meaning = "How long the progress thread, or a thread blocked in ibv_get_cq_event that moves the packets itself, busy-polls after its last work before it sleeps, in microseconds", .default_text = "30", .range_text = "0 .. 1000000", .what = "a number of microseconds", .readers = "all", .min = 0, .max = 1000000},
    {.name = "UROCE_PROGRESS_CPUS", .kind = EnvKind::kCpuList, .meaning = "Run each device's progress thread (named uroce-progress) only on these CPUs, as taskset -c would; application threads keep their own affinity. Unset: the thread inherits the affinity of the thread that opened the device", .default_text = "unset", .range_text = "CPU numbers and ranges, e.g. 2 or 0-3,6, each one this process may run on", .readers = "all"},
    {.name = "UROCE_BATCH_POSTS", .kind = EnvKind::kBool, .meaning = "1: while an application busy-polls its CQ (see UROCE_HANDOFF_US), ibv_post_send to a QP with WRs in flight (UD, UC: posted right behind another, with no poll between) only queues the WR (a lone WR on an idle QP leaves at once) and the application's next poll sends everything posted since in one system call, as a NIC fetches the WQEs of a doorbell; if no poll comes, the progress thread sends them when the handoff ends. 0: every post sends at once (docs/performance.md)", .default_text = "1", .range_text = "0 or 1", .readers = "all"},
    {.name = "UROCE_GSO", .kind = EnvKind::kBool, .meaning = "1: send runs of equal-size datagrams to one peer as one UDP GSO message (UDP_SEGMENT), the kernel cutting them into datagrams; each segment's ICRC is sealed for the IPv4 ID the kernel gives it, so rxe and RNICs accept them. 0: one datagram per message, e.g. under a per-packet nftables loss rule, which sees a GSO message as one packet (docs/performance.md)", .default_text = "1", .range_text = "0 or 1", .readers = "all"},
    {.name = "UROCE_GRO", .kind = EnvKind::kBool, .meaning = "1: receive with UDP GRO (UDP_GRO): the kernel hands over a run of same-size datagrams of one flow and TOS (a peer's GSO message, or what a NIC merged) as one, which uroce cuts back into packets, 64 messages per system call; 0: one datagram per receive entry (docs/performance.md)", .default_text = "1", .range_text = "0 or 1", .readers = "all"},
    {.name = "UROCE_RX_RING", .kind = EnvKind::kBool, .meaning = "1: receive the RoCE data datagrams from a packet socket's memory-mapped ring (needs CAP_NET_RAW) instead of the UDP sockets, so that a busy poll is a memory read, not a system call; CM MADs and the rest still come through the sockets, and the kernel counts each datagram the ring takes as a UDP receive error; the first time the ring overflows (about 128 busy QPs), the device goes back to its sockets for good and says so on stderr (docs/performance.md \"A receive ring\", docs/networking.md \"The receive ring\")", .default_text = "0", .range_text = "0 or 1", .readers = "all"},
    {.name = "UROCE_PEER", .kind = EnvKind::kAddr, .meaning = "Peer address for address vectors without a GRH (programs written for InfiniBand LIDs, like qperf)", .default_text = "unset: such AVs fail with EINVAL", .range_text = "an IPv4/IPv6 address", .readers = "drop-in"},
    {.name = "UROCE_QUIET", .kind = EnvKind::kBool, .meaning = "1: no \"uroce: ...\" lines on stderr from the drop-in (open failures, warnings)", .default_text = "0", .range_text = "0 or 1", .readers = "all"},
    {.name = "UROCE_STAT", .kind = EnvKind::kBool, .meaning = "0: publish no counter segment for `uroce stat`", .default_text = "1", .range_text = "0 or 1", .readers = "all"},
    {.name = "UROCE_STAT_DIR", .kind = EnvKind::kText, .meaning = "Directory of the counter segments (written by devices, read by `uroce stat`)", .default_text = "/dev/shm", .range_text = "a directory", .readers = "all, uroce stat"},
    {.name = "UROCE_SYSFS_ROOT", .kind = EnvKind::kText, .meaning = "Read kernel RDMA devices (`uroce gids/devinfo/stat/doctor`) from this directory instead of /sys: a recorded tree, for tests", .default_text = "/sys", .range_text = "a directory", .readers = "uroce gids, devinfo, stat, doctor"},
    {.name = "UROCE_METRICS", .kind = EnvKind::kText, .meaning = "Serve Prometheus metrics on ADDR:PORT (the CLI's --metrics sets it)", .default_text = "unset: no exporter", .range_text = "ADDR:PORT", .readers = "all"},
    {.name = "UROCE_CAPTURE", .kind = EnvKind::kText, .meaning = "Write every RoCE packet sent and received to this pcap file (the CLI's --capture sets it)", .default_text = "unset: no capture", .range_text = "a file path", .readers = "all"},
    {.name = "UROCE_WATCHDOG", .kind = EnvKind::kText, .meaning = "Warn once on stderr when an RC QP gets no response for this many seconds, with the likely cause; at once when its packets are refused as too big (0 or off: never)", .default_text = "5", .range_text = "0, off, or seconds (more than 0, at most 86400)", .readers = "all"},
    {.name = "UROCE_CC", .kind = EnvKind::kText, .meaning = "Congestion control of RC/UC QPs (docs/congestion.md): dcqcn marks data ECT(0), answers CE with CNPs and paces by DCQCN", .default_text = "none", .range_text = "none or dcqcn", .readers = "all"},
    {.name = "UROCE_DCQCN", .kind = EnvKind::kText, .meaning = "DCQCN parameters, mlx5 cc_params names (docs/congestion.md), e.g. rpg_min_rate=100,min_time_between_cnps=50", .default_text = "mlx5's defaults", .range_text = "name=value,...", .readers = "all"},
    {.name = "UROCE_IMPAIR", .kind = EnvKind::kText, .meaning = "Impair this process's RoCE packets (docs/impairment.md), e.g. loss=2%,delay=50us,jitter=10us,ce=5%; the CLI's --impair sets it", .default_text = "unset: no impairment", .range_text = "key=value,... (loss, ge_p, ge_r, ge_bad_loss, ge_good_loss, delay, jitter, reorder, dup, corrupt, ce, seed, dir, limit, rate, queue, kmin, kmax, pmax)", .readers = "all"},
    {.name = "UROCE_RECOVERY", .kind = EnvKind::kText, .meaning = "Loss recovery uroce perf offers its peer (docs/congestion.md): sr (selective repeat) only when both ends are uroce and agree, else RoCE v2 go-back-N", .default_text = "gbn", .range_text = "gbn or sr", .readers = "all"},
    {.name = "UROCE_ADAPTIVE_RETRANS", .kind = EnvKind::kBool, .meaning = "0: rxe-style go-back-N that retransmits only on a NAK or the configured timeout; 1: also on an adaptive RTO measured from the RTT (docs/congestion.md)", .default_text = "1", .range_text = "0 or 1", .readers = "all"},
    {.name = "UROCE_RTO_MIN_US", .kind = EnvKind::kUint, .meaning = "The adaptive retransmission timer never fires sooner than this after the last progress (docs/congestion.md); raise it on a loaded host where the progress thread can be descheduled for longer", .default_text = "200", .range_text = "1 .. 10000000", .what = "a number of microseconds", .readers = "all", .min = 1, .max = 10000000},
    {.name = "UROCE_RANDOM_SEED", .kind = EnvKind::kUint, .meaning = "Replay one seed of the randomised transport test", .default_text = "unset: the test's fixed seeds", .range_text = "0 .. 2^64-1", .what = "a seed", .readers = "random_ops_test (tests only)", .min = 0, .max = UINT64_MAX},
};
// clang-format on

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string escape_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::span<const EnvVar> env_table() {
  return kTable;
}

const EnvVar* find_env_var(std::string_view name) {
  for (const EnvVar& v : kTable) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::optional<std::string_view> closest_env_var(std::string_view name) {
  std::optional<std::string_view> best;
  size_t best_d = 4;  // more than 3 edits away is not a typo of it
  for (const EnvVar& v : kTable) {
    const size_t d = edit_distance(name, v.name);
    if (d < best_d) {
      best_d = d;
      best = v.name;
    }
  }
  return best;
}

std::vector<std::string> unknown_env_warnings(std::span<const std::string> environ_entries) {
  std::vector<std::string> out;
  for (const std::string& entry : environ_entries) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (!name.starts_with("UROCE_") || find_env_var(name) != nullptr) continue;
    std::string line = "uroce: unknown environment variable " + std::string(name) + " is ignored";
    if (auto near = closest_env_var(name)) {
      line += " (did you mean " + std::string(*near) + "?)";
    } else {
      line += " (`uroce --help` lists the known ones)";
    }
    out.push_back(std::move(line));
  }
  return out;
}

void warn_unknown_env_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* quiet = std::getenv("UROCE_QUIET");
    if (quiet != nullptr && std::string_view(quiet) == "1") return;
    std::vector<std::string> entries;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) entries.emplace_back(*e);
    for (const std::string& line : unknown_env_warnings(entries)) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  });
}

std::string render_env_table_markdown() {
  std::string out = "| Variable | Meaning | Default | Values | Read by |\n";
  out += "|---|---|---|---|---|\n";
  for (const EnvVar& v : kTable) {
    out += "| `" + std::string(v.name) + "` | " + escape_cell(v.meaning) + " | " +
           escape_cell(v.default_text) + " | " + escape_cell(v.range_text) + " | " +
           escape_cell(v.readers) + " |\n";
  }
  return out;
}

std::string render_env_table_text() {
  std::string out =
      "ENVIRONMENT (all: the libibverbs drop-in, this command and the C++ API's "
      "OpenOptions::from_env; docs/configuration.md):\n";
  for (const EnvVar& v : kTable) {
    std::string name(v.name);
    name.resize(std::max<size_t>(name.size() + 1, 19), ' ');
    out += "  " + name + std::string(v.meaning) + "\n";
    out += std::string(21, ' ') + "default " + std::string(v.default_text) + "; " +
           std::string(v.range_text) + "; read by " + std::string(v.readers) + "\n";
  }
  return out;
}

}  // namespace uroce::config
