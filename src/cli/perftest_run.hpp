// The measurement loops of `uroce perf` against Debian's perftest, where the peer's data
// path is perftest's own (src/perftest_resources.c, 4.5) rather than ours:
//
//   write_lat  both sides ping-pong RDMA WRITEs: each writes `size` bytes at the peer's
//              advertised address with the last byte = (iteration + 1) mod 256 and polls the
//              same byte of its own region; the SERVER posts first (run_iter_lat_write).
//   send_lat   SEND ping-pong, the client first; message content is not checked (perftest
//              sends whatever its buffer holds), only the length.
//   send_bw    the server counts exactly iters x QPs receives and measures them.
//   latency    perftest reports half the gap between consecutive posts of the ping-pong
//              tests: we do the same, so both sides print comparable numbers.
//
// The other tests reuse run_client_size() (perf_run.hpp): perftest's server of write/read/
// atomic BW and read/atomic latency is passive, its send_bw client is a plain window.
//
// await_peer_message() waits for perftest's next TCP message while watching the CQ: a SEND
// that lands in one of the receives the passive side posts as a detector means the peer runs
// a send test, which the caller reports as a mismatch instead of waiting forever.
#pragma once

#include <cstdint>
#include <string>

#include "cli/perf_run.hpp"

namespace uroce::cli {

// write_lat / send_lat with perftest's ordering and timing. `server` is our role.
// `first_size`: nothing has written into our region yet, so a byte the peer wrote where we
// do not expect it proves a different -s (later sizes of -a find the earlier ones' bytes).
void perftest_pingpong(PerfContext& ctx, PerfTest test, uint64_t size, bool server, bool first_size,
                       PerfOutcome& out);

// What a side that waits on TCP saw on its QPs meanwhile.
struct PeerWait {
  bool readable = false;    // the peer's next message arrived
  bool closed = false;      // the peer closed the connection (or a poll error)
  uint64_t receives = 0;    // SENDs that arrived in our receives (re-posted)
  uint64_t bad_length = 0;  // of which had a length other than `expect_len` (0: no check)
  uint32_t last_len = 0;
  bool flushed = false;  // our receives were flushed: the QP went to the error state
  std::string cq_error;  // another completion with error
};

// Polls the socket (`fd`) and the CQ until the peer's next message is readable, the
// connection closes, or `deadline` passes; re-posts every receive it reaps.
void await_peer_message(PerfContext& ctx, int fd, Deadline deadline, uint64_t expect_len,
                        PeerWait& wait);

// send_bw server: receives iters x QPs SENDs (checking each length) and measures them like
// perftest's run_iter_bw_server. Stops early, with `early` set, if the client's next TCP
// message arrives first (it sent fewer than we expect).
void perftest_send_bw_server(PerfContext& ctx, int fd, uint64_t size, bool gbits, PerfOutcome& out,
                             bool& early);

}  // namespace uroce::cli
