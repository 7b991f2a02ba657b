// The measurement loops of `uroce perf`, one message size at a time.
//
// Client (perf_client.cpp) drives every test:
//   write/read/atomic BW and read/atomic latency: keep up to tx_depth WRs in flight per QP,
//     signal every cq_mod-th; latency is the same loop with depth 1, timed per WR;
//   send BW: the same loop posting SENDs (SEND with immediate = iteration under --verify);
//   write/send latency: ping-pong, reported as half the round trip like perftest.
// Server (perf_server.cpp) answers: it receives SENDs, returns pings, and under --verify
// fills (read) or checks (write) its ring between rounds the client announces.
//
// --verify: every message carries pattern(perf_pattern_id(qp, iteration, size)); the side
// that ends up holding the data checks every byte of it (write: server, read: client,
// send: receiver, ping-pong: both, atomics: every fetched value and the final counter).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/oob_socket.hpp"
#include "cli/perf_context.hpp"
#include "cli/perf_options.hpp"
#include "cli/perf_report.hpp"

namespace uroce::cli {

// The steady clock in nanoseconds, as the run loops keep their deadlines.
[[nodiscard]] inline int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

struct PerfOutcome {
  bool ok = true;
  std::string error;
  BwResult bw;
  LatResult lat;
  uint64_t checked_bytes = 0;  // verified by this side
  std::vector<uint64_t> sent;  // messages completed per QP
};

// Runs one size against a server already told {"cmd":"run"} and ready.
void run_client_size(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size, bool gbits,
                     PerfOutcome& out);

// Serves one size after {"cmd":"run"} until the client's {"cmd":"end"}; fills `reply`
// (the JSON answer to "end") and returns false if the connection broke.
bool serve_size(PerfContext& ctx, OobSocket& sock, PerfTest test, uint64_t size,
                std::string& end_line, nlohmann::json& reply);
// Posts the receives a side needs, once, before the first size: the server of send_bw,
// both sides of send_lat.
bool prepare_receives(PerfContext& ctx, PerfTest test, bool server, std::string& error);

// "transport retry counter exceeded" etc., like ibv_wc_status_str.
[[nodiscard]] const char* wc_status_str(transport::WcStatus s);

// The byte that changes in the last position of each ping-pong message: never 0 (the
// initial buffer) and never the same twice in a row.
[[nodiscard]] inline uint8_t pingpong_seq(uint64_t it) {
  return static_cast<uint8_t>(it % 255 + 1);
}

}  // namespace uroce::cli
