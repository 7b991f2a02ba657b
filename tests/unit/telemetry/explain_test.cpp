// Error completions explained from the QP's counters: the exact line for each cause.
#include "telemetry/explain.hpp"

#include <gtest/gtest.h>

namespace uroce::telemetry {
namespace {

struct Fixture {
  DeviceSnapshot snap;
  QpSnapshot qp;
  Fixture(std::vector<std::pair<std::string, uint64_t>> counters) {
    for (auto& [n, v] : counters) {
      snap.names.push_back(n);
      qp.values.push_back(v);
    }
    qp.qpn = 0x11;
    qp.remote_qpn = 0x12;
    qp.remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  }
};

TEST(ExplainTest, RetryExceededWithNothingReceivedPointsAtReachability) {
  Fixture f({{"retry_exceeded_err", 1}, {"rcvd_pkts", 0}, {"local_ack_timeout_err", 8}});
  EXPECT_EQ(explain_completion(12, f.snap, f.qp),
            "retry_exceeded_err=1 with 0 packets received from 10.0.0.2: peer unreachable or UDP "
            "4791 blocked — run uroce doctor --peer 10.0.0.2");
  EXPECT_EQ(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
}

TEST(ExplainTest, RetryExceededAfterSequenceNaksPointsAtLoss) {
  Fixture f({{"retry_exceeded_err", 1},
             {"rcvd_pkts", 40},
             {"rcvd_seq_err", 3},
             {"local_ack_timeout_err", 8}});
  EXPECT_EQ(explain_completion(12, f.snap, f.qp),
            "retry_exceeded_err=1 after 3 NAK sequence errors and 8 ACK timeouts from 10.0.0.2: "
            "packets are lost on the path (MTU mismatch, drops, full socket buffers) — run uroce "
            "doctor --peer 10.0.0.2");
}

TEST(ExplainTest, RetryExceededAfterTrafficPointsAtAPeerThatStopped) {
  Fixture f({{"retry_exceeded_err", 1}, {"rcvd_pkts", 5}, {"local_ack_timeout_err", 8}});
  EXPECT_EQ(explain_completion(12, f.snap, f.qp),
            "retry_exceeded_err=1 after 8 ACK timeouts; 5 packets were received from 10.0.0.2 "
            "before: the peer stopped answering (process gone, QP no longer in RTS, or the path "
            "started dropping) — run uroce doctor --peer 10.0.0.2");
}

TEST(ExplainTest, RnrRetryExceeded) {
  Fixture f({{"rcvd_rnr_err", 8}, {"retry_rnr_exceeded_err", 1}});
  EXPECT_EQ(explain_completion(13, f.snap, f.qp),
            "rcvd_rnr_err=8 retry_rnr_exceeded_err=1: 10.0.0.2 had no receive WQE posted for QP "
            "0x12; post receives before the sender sends, or raise rnr_retry (7 retries forever)");
  EXPECT_EQ(wc_status_name(13), "IBV_WC_RNR_RETRY_EXC_ERR");
}

TEST(ExplainTest, UnknownStatusNamesItself) {
  Fixture f({});
  EXPECT_EQ(explain_completion(19, f.snap, f.qp), "IBV_WC_FATAL_ERR on QP 0x11 to 10.0.0.2");
  EXPECT_EQ(wc_status_name(200), "IBV_WC_UNKNOWN");
}

}  // namespace
}  // namespace uroce::telemetry
