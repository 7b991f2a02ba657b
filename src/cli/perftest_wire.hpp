// The messages of perftest's out-of-band TCP exchange (linux-rdma/perftest 4.5, whose
// binaries call themselves version "6.06"; src/perftest_communication.c), so `uroce perf`
// can talk to Debian's ib_{write,read,send,atomic}_{bw,lat}. docs/perftest-interop.md has
// the sequences; this file only encodes and decodes the fixed-size messages:
//
//   V  version      16 B  "6.06" NUL-padded (perftest compares atof() >= 5.70)
//   S  system data   4 B  big-endian int: cycle buffer (page size), then cache line size
//   M  MTU           2 B  the ibv_mtu enum as one ASCII digit + NUL ("3" = 1024)
//   K  QP keys     108 B  "%04x:%04x:%06x:%06x:%08x:%016llx:" + 16 x "%02x:" + "%08x:" + NUL
//                         = lid:out_reads:qpn:psn:rkey:vaddr:gid bytes:srqn:
//   R  BW report   5 x 8  size and iterations (BE u64), bw_peak, bw_avg, msg_rate (BE double)
//
// There is no framing: each message is one write() of exactly its size.
//
// A `uroce perf` peer announces the same "6.06" and adds kUroceMarker after the NUL, which
// perftest never reads (it treats the field as a C string). That is how two `uroce perf`
// processes recognise each other and switch to their own richer exchange, while perftest
// sees an ordinary 6.06 peer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cli/pingpong_dest.hpp"

namespace uroce::cli::perftest {

inline constexpr size_t kVersionSize = 16;
inline constexpr std::string_view kVersion = "6.06";
inline constexpr std::string_view kUroceMarker = "uroce-perf";
inline constexpr double kMinVersion = 5.70;  // check_version_compatibility()
inline constexpr size_t kIntSize = 4;
inline constexpr size_t kMtuSize = 2;
inline constexpr size_t kKeySize = 108;
inline constexpr size_t kReportFieldSize = 8;
inline constexpr size_t kDoneSize = 5;  // "done" + NUL, written last, never read
inline constexpr uint32_t kDefaultCycleBuffer = 4096;
inline constexpr uint32_t kDefaultCacheLine = 64;

using VersionMsg = std::array<char, kVersionSize>;
using IntMsg = std::array<char, kIntSize>;
using MtuMsg = std::array<char, kMtuSize>;
using KeyMsg = std::array<char, kKeySize>;
using ReportField = std::array<char, kReportFieldSize>;

struct PeerVersion {
  std::string text;  // up to the NUL, e.g. "6.06"
  double number = 0;
  bool uroce = false;  // kUroceMarker follows the NUL
};

// Our V: "6.06" NUL-padded, with kUroceMarker after the NUL when `uroce_marker`.
[[nodiscard]] VersionMsg encode_version(bool uroce_marker);
// What the peer announced; nullopt when the bytes are not a NUL-terminated version number
// (for instance the first bytes of a JSON line).
[[nodiscard]] std::optional<PeerVersion> decode_version(std::span<const char, kVersionSize> msg);

[[nodiscard]] IntMsg encode_int(int32_t value);
[[nodiscard]] int32_t decode_int(std::span<const char, kIntSize> msg);

// `mtu_enum` is 1 (256) .. 5 (4096). decode_mtu returns nullopt for anything else, which
// perftest also ignores (it keeps its own MTU).
[[nodiscard]] MtuMsg encode_mtu(int mtu_enum);
[[nodiscard]] std::optional<int> decode_mtu(std::span<const char, kMtuSize> msg);

struct Keys {
  uint32_t lid = 0;
  uint32_t out_reads = 1;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  GidBytes gid{};
  uint32_t srqn = 0;
  friend bool operator==(const Keys&, const Keys&) = default;
};

[[nodiscard]] KeyMsg encode_keys(const Keys& keys);
// Strict parse of the GID form: every field hex of exactly its width and in range, the
// trailing ':' and the NUL; nullopt otherwise.
[[nodiscard]] std::optional<Keys> decode_keys(std::span<const char, kKeySize> msg);

[[nodiscard]] ReportField encode_u64(uint64_t value);
[[nodiscard]] uint64_t decode_u64(std::span<const char, kReportFieldSize> msg);
// perftest's hton_double: the IEEE-754 bits in big-endian order.
[[nodiscard]] ReportField encode_double(double value);
[[nodiscard]] double decode_double(std::span<const char, kReportFieldSize> msg);

}  // namespace uroce::cli::perftest
