// `uroce perf <test> [host]`: the options of perftest's ib_{write,read,send,atomic}_{bw,lat}
// with perftest's flag letters and defaults, plus --json, --verify and --cc/--dcqcn.
//
// add_perf_options() declares the flags on a CLI11 parser; finish_perf_options() then fills
// the defaults that depend on the test (size 65536 for bandwidth and 2 for latency, 5000 or
// 1000 iterations, TX depth 128 or 1, ...) and checks every combination perftest rejects,
// returning one line a user can act on, or an empty string when the options are good.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cc_options.hpp"
#include "cli/cli11_fwd.hpp"
#include "uroce/vocab/recovery.hpp"

namespace uroce::cli {

enum class PerfVerb : uint8_t { kWrite, kRead, kSend, kAtomic };
enum class PerfKind : uint8_t { kBandwidth, kLatency };
enum class PerfConnection : uint8_t { kRc, kUc, kUd };
enum class AtomicType : uint8_t { kFetchAndAdd, kCmpAndSwap };

struct PerfTest {
  PerfVerb verb = PerfVerb::kWrite;
  PerfKind kind = PerfKind::kBandwidth;
  friend bool operator==(const PerfTest&, const PerfTest&) = default;
};

// "write_bw" <-> {kWrite, kBandwidth}; nullopt for an unknown name.
[[nodiscard]] std::optional<PerfTest> parse_perf_test(std::string_view name);
[[nodiscard]] std::string perf_test_name(PerfTest test);
// perftest's title: "RDMA_Write BW Test", "Send Latency Test", "Atomic FETCH_AND_ADD BW Test".
[[nodiscard]] std::string perf_test_title(PerfTest test, AtomicType atomic);
[[nodiscard]] std::string_view connection_name(PerfConnection c);  // "RC", "UC", "UD"
[[nodiscard]] std::string_view atomic_type_name(AtomicType a);     // "FETCH_AND_ADD", ...

inline constexpr const char* kPerfCommand = "uroce perf";  // what its errors start with
inline constexpr uint16_t kPerfDefaultPort = 18515;
inline constexpr uint64_t kPerfMaxSize = 1ull << 31;  // perftest's MAX_SIZE (2 GiB)
// QPs one run may use (-q); the server refuses a setup with more.
inline constexpr int kPerfMaxQps = 1024;
inline constexpr int kPerfAllMaxExponent = 23;  // -a: 2 .. 2^23 bytes

struct PerfOptions {
  // As typed (strings and "unset" markers so test-dependent defaults can be filled later).
  std::string test_name;
  std::string host;  // empty: server
  std::string device;
  int ib_port = 1;
  int gid_index = -1;  // -1: the GID of the address the TCP connection uses
  std::optional<uint64_t> size;
  bool all_sizes = false;
  std::optional<uint64_t> iters;
  std::optional<double> duration;
  int num_qps = 1;
  std::optional<uint32_t> mtu;  // bytes; default: the port's active MTU
  std::string connection = "RC";
  std::optional<int> tx_depth;
  std::optional<int> rx_depth;
  std::optional<int> inline_size;
  bool use_event = false;
  std::optional<int> cq_mod;
  std::string atomic_type;
  uint16_t port = kPerfDefaultPort;
  bool cpu_freq_ignored = false;  // -F: perftest's "don't fail on CPU frequency"; no effect here
  bool report_gbits = false;
  bool json = false;
  bool verify = false;
  double timeout = 0;  // seconds; 0 = none
  CcCliOptions cc;     // --cc, --dcqcn, -T/--tclass (cc_options.hpp)
  // --recovery gbn|sr: the loss recovery this side offers (default: the device's UROCE_RECOVERY);
  // selective repeat is used only when both uroce sides offer it (docs/congestion.md).
  std::string recovery_text;
  std::optional<transport::Recovery> recovery;

  // Resolved by finish_perf_options().
  PerfTest test;
  PerfConnection conn = PerfConnection::kRc;
  AtomicType atomic = AtomicType::kFetchAndAdd;
  std::vector<uint64_t> sizes;  // the message sizes to run, in order
};

void add_perf_options(CLI::App& sub, PerfOptions& options);

// Fills defaults and validates; "" when good, else one line (no trailing newline).
[[nodiscard]] std::string finish_perf_options(PerfOptions& options);

}  // namespace uroce::cli
