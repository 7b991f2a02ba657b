// ImpairSpec: what UROCE_IMPAIR (and `uroce perf|pingpong --impair`) asks the network to do
// to a device's packets, parsed strictly from "key=value,key=value" (docs/impairment.md):
//
//   loss=P%                 random loss
//   ge_p=P%,ge_r=P%         Gilbert-Elliott burst loss: good->bad and bad->good per packet,
//   ge_bad_loss=P%          loss in the bad state (default 100%)
//   ge_good_loss=P%         loss in the good state (default 0%)
//   delay=T,jitter=T        hold each packet delay +- jitter (uniform); T is N{ns,us,ms,s}
//   reorder=P%              with delay: this share skips the delay and overtakes the others
//   dup=P%                  send (or deliver) a second copy
//   corrupt=P%              flip one bit the ICRC covers: the receiver counts icrc_errors
//   ce=P%                   set ECN CE on ECN-capable (ECT) packets
//   seed=N                  replay the same decisions (default: a random seed per device)
//   dir=tx|rx|both          which direction is impaired (default tx)
//   limit=N                 packets held at once per direction (default 1000)
//   rate=R                  a bottleneck: one egress port of the switch queue model
//                           (src/fabric/switch_queue.hpp) at R, like tc (1gbit, 100mbit,
//                           500kbit, 125mbps = bytes/s)
//   queue=SIZE              its buffer, tail drop beyond (default 512KB; 1500, 200KB, 2MB)
//   kmin=SIZE,kmax=SIZE     RED/ECN marking of ECT packets between kmin and kmax queued bytes,
//   pmax=P                  with probability up to P at kmax (0.2 or 20%), 1 above kmax
//
// Every error is one line naming the key and the accepted form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "uroce/vocab/time.hpp"

namespace uroce::fault {

enum class ImpairDir : uint8_t { kTx, kRx, kBoth };

// Probabilities are integers, parts per billion (P% with up to 7 decimals is exact), so a
// decision is the same on every machine and a spec prints back exactly as it was written.
using Ppb = uint32_t;
inline constexpr Ppb kCertain = 1'000'000'000;

struct GilbertElliott {
  Ppb p = 0;                // good -> bad, per packet
  Ppb r = 0;                // bad -> good, per packet
  Ppb bad_loss = kCertain;  // loss in the bad state
  Ppb good_loss = 0;        // loss in the good state
};

// The rate-limited bottleneck queue (rate= and what goes with it).
struct Bottleneck {
  uint64_t rate = 0;            // bytes/s, above 0
  uint64_t queue = 512 * 1024;  // bytes
  uint64_t kmin = 0;            // RED/ECN when pmax != 0: kmin < kmax <= queue
  uint64_t kmax = 0;
  Ppb pmax = 0;
};

struct ImpairSpec {
  Ppb loss = 0;
  std::optional<GilbertElliott> ge;
  Nanos delay{0};
  Nanos jitter{0};
  Ppb reorder = 0;
  Ppb dup = 0;
  Ppb corrupt = 0;
  Ppb ce = 0;
  std::optional<uint64_t> seed;
  ImpairDir dir = ImpairDir::kTx;
  uint32_t limit = 1000;
  std::optional<Bottleneck> bottleneck;

  // False: nothing to do (an empty spec); the device is not wrapped at all.
  [[nodiscard]] bool active() const;
  [[nodiscard]] bool impairs_tx() const { return active() && dir != ImpairDir::kRx; }
  [[nodiscard]] bool impairs_rx() const { return active() && dir != ImpairDir::kTx; }
};

inline constexpr uint32_t kMaxLimit = 65536;
inline constexpr Nanos kMaxDelay = std::chrono::seconds(10);

// "" on success, else one line starting with `what` ("UROCE_IMPAIR" or "--impair"), e.g.
//   UROCE_IMPAIR: loss: '5' is not a percentage; write loss=P% with P from 0 to 100 (e.g. loss=2%)
// An empty text is an empty spec (nothing impaired).
[[nodiscard]] std::string parse_impair_spec(std::string_view what, std::string_view text,
                                            ImpairSpec& out);

// The canonical text of a spec (keys in the order above, only those that differ from the
// defaults); parse_impair_spec of it gives back the same spec.
[[nodiscard]] std::string format_impair_spec(const ImpairSpec& spec);

}  // namespace uroce::fault
