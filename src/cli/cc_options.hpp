// The congestion-control and traffic-class flags that `uroce perf` and `uroce pingpong` share:
//   --cc none|dcqcn          the algorithm of the run's QPs (the device's UROCE_CC, which it
//                            replaces for this process)
//   --dcqcn name=value,...   DCQCN parameters like UROCE_DCQCN; its names win over the
//                            variable's, the others stay
//   -T/--tclass/--tos BYTE   perf only: the traffic class of every QP's GRH, i.e. the IP TOS
//                            byte (DSCP << 2 | ECN), perftest's --tclass (and its -T/--tos,
//                            which perftest gives rdma_cm QPs: on RoCE both end up in the
//                            same byte)
// Each side of a run takes its own flags, as perftest's do (docs/congestion.md "Command line").
#pragma once

#include <optional>
#include <string>

#include "cli/cli11_fwd.hpp"
#include "net/cc_env.hpp"

namespace uroce::cli {

struct CcCliOptions {
  std::string cc;             // as typed; empty: not given
  std::string dcqcn;          // as typed; empty: not given
  std::optional<int> tclass;  // as typed
  net::CcOverride resolved;   // filled by finish_cc_options
  uint8_t traffic_class = 0;  // filled by finish_cc_options
};

void add_cc_options(CLI::App& sub, CcCliOptions& o, bool with_tclass);

// Checks the values and fills `resolved` / `traffic_class`; "" or one line naming the flag.
[[nodiscard]] std::string finish_cc_options(CcCliOptions& o);

}  // namespace uroce::cli
