// The shared-memory counters segment every uroce process publishes per device, so that
// `uroce stat` (another process, no root for the same user) reads them like
// `rdma statistic show`. File: <dir>/uroce-<pid>-netns-<inode>-<device> (dir: $UROCE_STAT_DIR or
// /dev/shm; mode 0600), one fixed layout:
//
//   header   magic "UROCEST1", version, layout size, pid, process start time (for pid reuse),
//            device name, counter count and the counter names (written once, before the
//            first publish; readers take names from here, so a newer uroce reads an older one)
//   body     a seqlock word, then every value as a 64-bit word: publish time, device
//            counters, QP count and one slot per QP (QPN, peer, state, last error,
//            congestion control and current rate, RTT histogram of ACK round trips, counters)
//
// Version 2 added the per-QP congestion-control words; a reader skips a segment of another
// version with a note (both ends are the same build in practice).
//
// Seqlock: the writer (the thread driving the device, at most every kPublishInterval, longer
// with many QPs) makes seq odd, stores the body words with relaxed atomics, makes seq even
// again (release); a reader copies the body and retries while seq was odd or changed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "uroce/vocab/time.hpp"

namespace uroce::telemetry {

inline constexpr std::array<char, 8> kShmMagic = {'U', 'R', 'O', 'C', 'E', 'S', 'T', '1'};
inline constexpr uint32_t kShmVersion = 2;
inline constexpr size_t kShmMaxCounters = 128;
inline constexpr size_t kShmMaxQps = 256;
inline constexpr size_t kShmNameLen = 48;
inline constexpr size_t kShmDeviceLen = 64;
// RTT histogram: bucket i counts samples <= 1 us << i (1 us .. 524 ms), then +Inf.
inline constexpr size_t kRttBuckets = 20;
inline constexpr Nanos kPublishInterval = std::chrono::milliseconds(5);
inline constexpr Nanos kMaxPublishInterval = std::chrono::milliseconds(50);  // many QPs

[[nodiscard]] constexpr uint64_t rtt_bucket_bound_ns(size_t i) {
  return uint64_t{1000} << i;
}

struct ShmRtt {
  uint64_t buckets[kRttBuckets + 1];  // last: +Inf
  uint64_t count;
  uint64_t sum_ns;
};

// Every field a 64-bit word: the seqlock copies the body word by word.
struct ShmQp {
  uint64_t qpn;
  uint64_t remote_qpn;
  uint64_t remote_gid[2];       // 16 bytes, network order as in the GID
  uint64_t qp_type;             // transport::QpType value
  uint64_t state;               // transport::QpState value
  uint64_t last_error_status;   // transport::WcStatus of the last error completion, 0: none
  uint64_t error_completions;   // completions with an error status other than a flush
  uint64_t cc_algorithm;        // transport::CcAlgorithm of the QP's controller (1 none)
  uint64_t cc_rate_bps;         // current rate RC, bit/s; 0: unlimited (no controller)
  uint64_t cc_target_rate_bps;  // target rate RT, bit/s
  uint64_t cc_alpha;            // DCQCN alpha, /1024
  ShmRtt rtt;
  uint64_t values[kShmMaxCounters];
};

struct ShmBody {
  uint64_t published_unix_ns;
  uint64_t qp_count;
  uint64_t qp_overflow;  // QPs that did not fit in kShmMaxQps slots (device totals stay exact)
  uint64_t device_values[kShmMaxCounters];
  ShmQp qps[kShmMaxQps];
};

struct ShmHeader {
  std::array<char, 8> magic;
  uint32_t version;
  uint32_t layout_size;
  int32_t pid;
  uint32_t counter_count;
  uint64_t proc_start_ticks;  // field 22 of /proc/<pid>/stat: tells a reused pid apart
  char device[kShmDeviceLen];
  char names[kShmMaxCounters][kShmNameLen];
};

struct ShmSegment {
  ShmHeader header;
  alignas(64) uint64_t seq;
  ShmBody body;
};

static_assert(sizeof(ShmQp) % 8 == 0 && sizeof(ShmBody) % 8 == 0);

}  // namespace uroce::telemetry
