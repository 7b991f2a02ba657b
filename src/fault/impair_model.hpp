// ImpairModel: the per-packet decisions of an ImpairSpec for one direction, sans-IO. It is
// given each packet's length, ECN field and `now`, and says what happens to the packet: lost,
// duplicated, corrupted (which bit), CE-marked, and when it leaves. No clock, no socket: the
// UDP device's PacketIo decorator and a simulator drive the same model.
//
// Replay: every packet draws the same fixed set of random values whatever the spec uses, each
// a hash of (seed, direction, packet index, field). So the n-th packet of a direction meets
// the same fate under the same seed however the other keys are set, and a run replays
// decision for decision (the timing of real sockets aside).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fault/impair_spec.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::fault {

// What happened to the packets, counted by kind (exported as impair_* counters).
struct ImpairCounters {
  uint64_t dropped = 0;     // lost by loss= or the Gilbert-Elliott chain
  uint64_t duplicated = 0;  // second copies made
  uint64_t corrupted = 0;   // one bit flipped
  uint64_t ce_marked = 0;   // ECN set to CE
  uint64_t delayed = 0;     // held for a nonzero time
  uint64_t reordered = 0;   // skipped the delay (reorder=)
  uint64_t overflow = 0;    // dropped because `limit` packets were already held
  // The bottleneck queue (rate=, src/fault/bottleneck.hpp), both directions.
  uint64_t queue_dropped = 0;    // tail drops: the packet did not fit in queue= bytes
  uint64_t queue_marked = 0;     // RED/ECN set CE (kmin, kmax, pmax)
  uint64_t queue_max_bytes = 0;  // the deepest the queue has been (the larger direction)

  ImpairCounters& operator+=(const ImpairCounters& o);
};

struct Verdict {
  bool drop = false;
  bool dup = false;          // a second copy leaves at the same time, right after
  bool corrupt = false;      // flip bit `corrupt_bit` of the packet (see corrupt_packet)
  uint64_t corrupt_bit = 0;  // a random 64-bit value; corrupt_packet maps it into the packet
  bool ce = false;           // set ECN to CE (only ever for an ECT packet)
  bool reordered = false;    // sent at once although delay is set
  TimePoint release{0};      // when the packet leaves the hold (== now: at once)
};

class ImpairModel {
 public:
  // `stream` tells the directions of one device apart (0: tx, 1: rx), so they draw
  // independent values from one seed.
  ImpairModel(const ImpairSpec& spec, uint64_t seed, uint64_t stream);

  // The fate of the next packet. `ecn` is its ECN field (TOS & 3). Counts into counters().
  Verdict decide(TimePoint now, uint8_t ecn);

  [[nodiscard]] const ImpairCounters& counters() const { return counters_; }
  ImpairCounters& counters() { return counters_; }
  [[nodiscard]] uint64_t packets() const { return index_; }
  [[nodiscard]] bool in_bad_state() const { return bad_; }

 private:
  enum Field : uint64_t { kLoss, kGeMove, kDup, kCorrupt, kCorruptBit, kCe, kReorder, kJitter };
  [[nodiscard]] uint64_t draw(Field f) const;
  [[nodiscard]] bool chance(Field f, Ppb p) const;

  ImpairSpec spec_;
  uint64_t key_;
  uint64_t index_ = 0;
  bool bad_ = false;  // Gilbert-Elliott state
  ImpairCounters counters_;
};

}  // namespace uroce::fault
