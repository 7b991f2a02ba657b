// A simulation scenario as data: what the TOML file (scenario_toml.hpp, docs/simulator-
// scenarios.md "Scenario file") says, with every default filled in. Times in nanoseconds,
// rates in bit/s, sizes in bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/switch_queue.hpp"
#include "fault/impair_spec.hpp"
#include "uroce/vocab/cc_types.hpp"
#include "uroce/vocab/recovery.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::sim {

enum class TopologyKind : uint8_t { kBackToBack, kStar, kDumbbell, kLeafSpine };
enum class FlowOp : uint8_t { kWrite, kSend, kRead };
enum class WorkloadKind : uint8_t { kFlow, kIncast, kPermutation, kAllToAll, kCdf };

struct TopologySpec {
  TopologyKind kind = TopologyKind::kStar;
  uint32_t hosts = 2;                   // star: all hosts; dumbbell: per side; leaf-spine: per leaf
  uint32_t leaves = 2;                  // leaf-spine
  uint32_t spines = 1;                  // leaf-spine
  uint64_t link_bps = 100'000'000'000;  // host links
  uint64_t fabric_bps = 100'000'000'000;  // switch-to-switch links (dumbbell, leaf-spine)
  uint64_t delay_ns = 1000;               // propagation delay of every link
};

struct SwitchSpec {
  fabric::SwitchQueueConfig queues;  // egress/ingress port counts set per switch; priorities
  // Priorities 0..7 that are lossless (PFC) when buffer_mode = "lossless".
  uint8_t lossless_priorities = 0xFF;
  bool strict = false;                 // scheduler: strict priority instead of DWRR
  std::vector<uint32_t> dwrr_weights;  // per priority, empty = all 1
  // 802.1Qbb PFC frames (switches' and storms'): a PAUSE holds its class for pause_quanta
  // quanta of 512 bit times at the link's rate; a sender still above XON sends the PAUSE
  // again every pause_refresh_quanta (< pause_quanta, so the upstream never resumes on its
  // own while the port is congested); XON is a PAUSE with time 0.
  uint32_t pause_quanta = 0xFFFF;
  uint32_t pause_refresh_quanta = 0xFFFF / 2;
};

struct TransportSpec {
  transport::CcAlgorithm cc = transport::CcAlgorithm::kNone;
  transport::DcqcnParams dcqcn;
  transport::Recovery recovery = transport::Recovery::kGoBackN;
  bool adaptive = true;  // adaptive retransmission timer (RecoveryConfig::adaptive)
  uint64_t min_rto_ns = 200'000;
  uint8_t timeout = 14;  // QP attribute: 4.096 us * 2^timeout
  uint8_t retry_cnt = 7;
  transport::Mtu mtu = transport::Mtu::k4096;
  uint32_t window = 8;  // WRs one flow keeps outstanding
};

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::kFlow;
  FlowOp op = FlowOp::kWrite;
  uint64_t bytes = 1 << 20;  // per flow; 0 = long-lived (runs until the end)
  uint8_t priority = 0;
  uint64_t start_ns = 0;
  uint64_t start_jitter_ns = 0;      // each flow starts uniformly in [start, start + jitter]
  uint32_t count = 1;                // flow: parallel flows src -> dst
  std::string src;                   // flow
  std::string dst;                   // flow; incast: the receiver
  std::vector<std::string> senders;  // incast: empty = every other host
  std::string cdf;                   // cdf: file path as resolved
  std::string cdf_name;              // cdf: as the scenario wrote it (summary.json's echo)
  double load = 0.5;                 // cdf: offered load per host link, 0..1
  uint32_t flows = 100;              // cdf: number of flows
  uint64_t message_bytes = 0;        // WR size of these flows (default: the top level's)
  uint32_t window = 0;               // WRs each flow keeps outstanding (default: transport's)
  uint32_t line = 0;                 // the TOML line of this workload (error messages)
};

struct StormSpec {  // a stuck receiver: the host pauses its switch port (PFC storm)
  std::string host;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // 0: never resumes
  uint8_t priority = 0;
  // true: PAUSE refreshed as a switch does (pause_refresh_quanta); false: one PAUSE at the
  // start, so the upstream resumes when its pause time runs out.
  bool refresh = true;
};

struct Scenario {
  std::string name;
  std::string description;
  uint64_t seed = 1;
  uint64_t duration_ns = 10'000'000;  // the run stops here at the latest
  uint64_t sample_ns = 10'000;
  uint64_t message_bytes = 1 << 20;
  uint64_t host_buffer_bytes = 4 << 20;
  TopologySpec topology;
  fault::ImpairSpec impair;  // every link, both directions (loss, ge_*, corrupt, ce)
  SwitchSpec sw;
  TransportSpec transport;
  std::vector<WorkloadSpec> workloads;
  std::vector<StormSpec> storms;
};

}  // namespace uroce::sim
