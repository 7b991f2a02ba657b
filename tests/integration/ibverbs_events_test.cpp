// Completion channel and async fd semantics over the drop-in, driven by a C program linked
// against build/lib/libibverbs.so.1 (ibverbs_events_prog.c): O_NONBLOCK set by the
// application gives EAGAIN when nothing is queued, as the kernel's uverbs fds do (UCX relies
// on it); poll() on the fd wakes on a completion; a blocking fd waits, and a signal sent to
// the process ends that wait with EINTR. Also the UD receive completion and the GRH area
// exactly (docs/ibverbs.md). `sl` is the RoCE packet type as mlx5 reports it (docs/ibverbs.md,
// "UD receive completions"): 0xA over IPv4, 0x9 over IPv6.
#include <gtest/gtest.h>

#include <string>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

std::string run_prog(const std::string& gid_index) {
  ToolEnv env;
  env.vars["UROCE_NETDEVS"] = "lo";
  env.vars["UROCE_QUIET"] = "1";
  Process p({std::string(UROCE_BINARY_DIR) + "/bin/uroce_ibverbs_events_prog", gid_index}, env);
  ProcResult r = p.wait(60s);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

TEST(IbverbsEvents, NonBlockingChannelAndAsyncFdThenUdReceiveOverIpv4) {
  // GID 1 on lo: ::ffff:127.0.0.1 (RoCE v2 over IPv4). The GRH area: 20 zero bytes, then
  // the IPv4 header as received: 0x45, TOS 0, total length 20+8+12+8+64+4 = 116, ID (any:
  // masked), DF, TTL 64, UDP, checksum (masked), 127.0.0.1 -> 127.0.0.1.
  const std::string out = run_prog("1");
  std::string masked = out;
  const std::string grh_key = "grh ";
  for (size_t at = masked.find(grh_key); at != std::string::npos;
       at = masked.find(grh_key, at + 1)) {
    // bytes 24-25 (IPv4 ID) and 30-31 (header checksum) change with every packet
    for (int byte : {24, 25, 30, 31}) masked.replace(at + 4 + byte * 3, 2, "..");
  }
  const std::string grh =
      "grh 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 "
      "45 00 00 74 .. .. 40 00 40 11 .. .. 7f 00 00 01 7f 00 00 01\n";
  EXPECT_EQ(masked,
            "nonblocking ibv_get_cq_event: -1 EAGAIN\n"
            "nonblocking ibv_get_async_event: -1 EAGAIN\n"
            "round 0 ibv_get_cq_event: 0 cq ok context 0x1234\n"
            "recv wr_id 100 status 0 byte_len 104 wc_flags 0x1 sl 10 src_qp self\n" +
                grh +
                "payload equal\n"
                "blocking ibv_get_cq_event waited for the completion: yes\n"
                "round 1 ibv_get_cq_event: 0 cq ok context 0x1234\n"
                "recv wr_id 101 status 0 byte_len 104 wc_flags 0x1 sl 10 src_qp self\n" +
                grh +
                "payload equal\n"
                "drained ibv_get_cq_event: -1 EAGAIN\n"
                "signal ends a blocking ibv_get_cq_event: -1 EINTR\n"
                "done\n");
}

TEST(IbverbsEvents, UdReceiveOverIpv6) {
  // GID 0 on lo: ::1 (RoCE v2 over IPv6). The GRH area is the IPv6 header as received:
  // version 6, traffic class 0, flow label 0, payload length 8+12+8+64+4 = 96, next header
  // UDP, hop limit 64, ::1 -> ::1.
  const std::string out = run_prog("0");
  const std::string grh =
      "grh 60 00 00 00 00 60 11 40 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 "
      "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01\n";
  EXPECT_EQ(out,
            "nonblocking ibv_get_cq_event: -1 EAGAIN\n"
            "nonblocking ibv_get_async_event: -1 EAGAIN\n"
            "round 0 ibv_get_cq_event: 0 cq ok context 0x1234\n"
            "recv wr_id 100 status 0 byte_len 104 wc_flags 0x1 sl 9 src_qp self\n" +
                grh +
                "payload equal\n"
                "blocking ibv_get_cq_event waited for the completion: yes\n"
                "round 1 ibv_get_cq_event: 0 cq ok context 0x1234\n"
                "recv wr_id 101 status 0 byte_len 104 wc_flags 0x1 sl 9 src_qp self\n" +
                grh +
                "payload equal\n"
                "drained ibv_get_cq_event: -1 EAGAIN\n"
                "signal ends a blocking ibv_get_cq_event: -1 EINTR\n"
                "done\n");
}

}  // namespace
}  // namespace uroce::ibtest
