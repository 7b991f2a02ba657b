// What two `uroce perf` processes say over the TCP side channel (one JSON object per line),
// after the 16-byte greeting both exchange first (perftest's version message with our marker,
// perftest_wire.hpp):
//
//   client -> server  PerfSetup (the test, its parameters and the client's QPs)
//   server -> client  {"ok":true,"qps":[...]} or {"ok":false,"error":"..."}
//   then per message size:
//     client: {"cmd":"run","size":S}            server: {"ready":true}
//     client: {"cmd":"fill","first":F}          (read --verify: server writes round F's
//                                                patterns into its ring)  server: {"ok":true}
//     client: {"cmd":"check","first":F,"count":N} (write --verify: server checks N slots)
//                                                server: {"ok":bool,"error":...}
//     client: {"cmd":"end","sent":[..],"line":"...","result":{...}}
//                                                server: {"ok":bool,"error":...,"received":N,
//                                                         "checked_bytes":B}
//   client: {"cmd":"bye"}
//
// The memory layout of each side is fixed by the setup: per QP a ring of `ring_slots` slots
// of `slot_size` bytes (64-byte aligned) followed by one more slot (the "aux" slot: the
// source of a ping-pong reply), so both sides compute the same addresses.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cli/perf_options.hpp"
#include "cli/pingpong_dest.hpp"

namespace uroce::cli {

struct PerfQpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;  // start of this QP's region
  GidBytes gid{};
};

struct PerfSetup {
  std::string test;
  PerfConnection conn = PerfConnection::kRc;
  AtomicType atomic = AtomicType::kFetchAndAdd;
  std::vector<uint64_t> sizes;
  uint64_t iters = 0;
  double duration = 0;  // seconds; 0: run `iters`
  int num_qps = 1;
  uint32_t mtu = 1024;
  int tx_depth = 1;
  int rx_depth = 1;
  int cq_mod = 1;
  int inline_size = 0;
  bool verify = false;
  bool events = false;
  uint64_t slot_size = 0;
  uint64_t ring_slots = 1;
  // The client's offer (RC only); a server that offers it too answers "recovery":"sr" and
  // both connect their QPs with QpAttr::recovery. A peer that never names it: go-back-N.
  transport::Recovery recovery = transport::Recovery::kGoBackN;
  std::vector<PerfQpInfo> qps;
};

// Layout of one side's buffer (see the top of this file).
[[nodiscard]] uint64_t perf_slot_stride(uint64_t slot_size);
[[nodiscard]] uint64_t perf_region_size(const PerfSetup& s);
[[nodiscard]] uint64_t perf_slot_offset(const PerfSetup& s, int qp, uint64_t slot);
[[nodiscard]] uint64_t perf_aux_offset(const PerfSetup& s, int qp);

// The pattern iteration of message `it` of QP `qp` at `size` (distinct across all three, so
// a slot still holding an earlier size's or QP's data never passes the check).
[[nodiscard]] uint64_t perf_pattern_id(int qp, uint64_t it, uint64_t size);

[[nodiscard]] nlohmann::json to_json(const PerfQpInfo& q);
[[nodiscard]] bool from_json(const nlohmann::json& j, PerfQpInfo& q);
[[nodiscard]] nlohmann::json to_json(const PerfSetup& s);
// false (with `error`) when a field is missing or out of range.
[[nodiscard]] bool from_json(const nlohmann::json& j, PerfSetup& s, std::string& error);

}  // namespace uroce::cli
