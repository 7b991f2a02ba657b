// The ibv_wr_* send API over the drop-in (ibverbs_wr_prog.c): which operations a QP may ask
// for, a batch of an inline WRITE and a SEND, FETCH_AND_ADD and ATOMIC WRITE, and the errors
// that post nothing (a setter before any WR, an operation not asked for, a batch beyond
// max_send_wr, an aborted batch), memory windows (ibv_bind_mw, ibv_wr_bind_mw,
// ibv_wr_local_inv, a peer's WRITE through each), each with its exact completions and bytes.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

TEST(IbverbsWr, BatchesPostInOrderAndErrorsPostNothing) {
  ToolEnv env;
  env.vars["UROCE_NETDEVS"] = "lo";
  Process p({std::string(UROCE_BINARY_DIR) + "/bin/uroce_ibverbs_wr_prog"}, env);
  const ProcResult r = p.wait(60s);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The drop-in explains the one error completion on stderr (merged into the output, ahead of
  // the program's buffered stdout): take that line out and check it.
  std::string output;
  std::vector<std::string> explained;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    (line.rfind("uroce: ", 0) == 0 ? explained.emplace_back(line) : (output += line + "\n"));
  }
  ASSERT_EQ(explained.size(), 1u) << r.output;
  EXPECT_NE(explained[0].find("IBV_WC_REM_ACCESS_ERR (10): req_remote_access_errors=1"),
            std::string::npos)
      << explained[0];
  // Opcodes: IBV_WC_SEND 0, IBV_WC_RDMA_WRITE 1, IBV_WC_FETCH_ADD 4, IBV_WC_ATOMIC_WRITE 9,
  // IBV_WC_RECV 128.
  EXPECT_EQ(output,
            "rc tso: NULL EOPNOTSUPP\n"
            "ud rdma_write: NULL EOPNOTSUPP\n"
            "qp_to_qp_ex: a yes, b NULL\n"
            "batch 1 complete: 0\n"
            "a wc wr_id 1 status 0 opcode 1 byte_len 24\n"
            "a wc wr_id 2 status 0 opcode 0 byte_len 100\n"
            "a completions 2\n"
            "b wc wr_id 900 status 0 opcode 128 byte_len 100\n"
            "b completions 1\n"
            "b write equal, send equal\n"
            "batch 2 complete: 0\n"
            "a wc wr_id 3 status 0 opcode 4 byte_len 8\n"
            "a wc wr_id 4 status 0 opcode 9 byte_len 8\n"
            "a completions 2\n"
            "fetch_add old 40 now 42, atomic_write 1122334455667788\n"
            "set_sge before a WR: EINVAL\n"
            "rdma_read not in send_ops: EOPNOTSUPP\n"
            "max_send_wr + 1 WRs: ENOMEM\n"
            "aborted, then an empty batch: 0\n"
            "a completions 0\n"
            "b completions 0\n"
            // IBV_WC_BIND_MW 5, IBV_WC_LOCAL_INV 6; IBV_WC_REM_ACCESS_ERR 10.
            "max_mw 4096, MEM_WINDOW yes, TYPE_2B yes\n"
            "ibv_bind_mw type 1: 0, rkey incremented\n"
            "a wc wr_id 10 status 0 opcode 5 byte_len 0\n"
            "a completions 1\n"
            "b wc wr_id 20 status 0 opcode 1 byte_len 64\n"
            "b completions 1\n"
            "through type 1: equal\n"
            "ibv_wr_bind_mw type 2: 0\n"
            "a wc wr_id 11 status 0 opcode 5 byte_len 0\n"
            "a completions 1\n"
            "b wc wr_id 21 status 0 opcode 1 byte_len 64\n"
            "b completions 1\n"
            "through type 2: equal\n"
            "ibv_wr_local_inv: 0\n"
            "a wc wr_id 12 status 0 opcode 6 byte_len 0\n"
            "a completions 1\n"
            "b wc wr_id 22 status 10 opcode 1 byte_len 64\n"
            "b completions 1\n"
            "dereg_mr under a bound window: EBUSY\n"
            "done\n");
}

}  // namespace
}  // namespace uroce::ibtest
