#include "telemetry/explain.hpp"

#include <fmt/format.h>

#include <array>

namespace uroce::telemetry {

std::string_view wc_status_name(uint8_t status) {
  static constexpr std::array<std::string_view, 22> kNames = {
      "IBV_WC_SUCCESS",           "IBV_WC_LOC_LEN_ERR",
      "IBV_WC_LOC_QP_OP_ERR",     "IBV_WC_LOC_EEC_OP_ERR",
      "IBV_WC_LOC_PROT_ERR",      "IBV_WC_WR_FLUSH_ERR",
      "IBV_WC_MW_BIND_ERR",       "IBV_WC_BAD_RESP_ERR",
      "IBV_WC_LOC_ACCESS_ERR",    "IBV_WC_REM_INV_REQ_ERR",
      "IBV_WC_REM_ACCESS_ERR",    "IBV_WC_REM_OP_ERR",
      "IBV_WC_RETRY_EXC_ERR",     "IBV_WC_RNR_RETRY_EXC_ERR",
      "IBV_WC_LOC_RDD_VIOL_ERR",  "IBV_WC_REM_INV_RD_REQ_ERR",
      "IBV_WC_REM_ABORT_ERR",     "IBV_WC_INV_EECN_ERR",
      "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
      "IBV_WC_RESP_TIMEOUT_ERR",  "IBV_WC_GENERAL_ERR"};
  return status < kNames.size() ? kNames[status] : std::string_view("IBV_WC_UNKNOWN");
}

std::string explain_completion(uint8_t status, const DeviceSnapshot& snap, const QpSnapshot& qp) {
  auto v = [&](std::string_view name) { return snap.qp_value(qp, name); };
  const std::string peer = gid_address(qp.remote_gid);
  const std::string doctor = "run uroce doctor --peer " + peer;
  switch (status) {
    case 12: {  // IBV_WC_RETRY_EXC_ERR: the ACK timer ran out retry_cnt + 1 times
      const uint64_t retry = v("retry_exceeded_err");
      const uint64_t rcvd = v("rcvd_pkts");
      const uint64_t seq_naks = v("rcvd_seq_err");
      const uint64_t timeouts = v("local_ack_timeout_err");
      if (rcvd == 0) {
        return fmt::format(
            "retry_exceeded_err={} with 0 packets received from {}: peer unreachable or UDP "
            "4791 blocked — {}",
            retry, peer, doctor);
      }
      if (seq_naks > 0) {
        return fmt::format(
            "retry_exceeded_err={} after {} NAK sequence errors and {} ACK timeouts from {}: "
            "packets are lost on the path (MTU mismatch, drops, full socket buffers) — {}",
            retry, seq_naks, timeouts, peer, doctor);
      }
      return fmt::format(
          "retry_exceeded_err={} after {} ACK timeouts; {} packets were received from {} "
          "before: the peer stopped answering (process gone, QP no longer in RTS, or the "
          "path started dropping) — {}",
          retry, timeouts, rcvd, peer, doctor);
    }
    case 13:  // IBV_WC_RNR_RETRY_EXC_ERR
      return fmt::format(
          "rcvd_rnr_err={} retry_rnr_exceeded_err={}: {} had no receive WQE posted for QP "
          "{:#x}; post receives before the sender sends, or raise rnr_retry (7 retries forever)",
          v("rcvd_rnr_err"), v("retry_rnr_exceeded_err"), peer, qp.remote_qpn);
    case 10:  // IBV_WC_REM_ACCESS_ERR
      return fmt::format(
          "req_remote_access_errors={}: {} refused the address, rkey, length or access "
          "flags of an RDMA READ/WRITE/atomic (check the MR's access flags and bounds)",
          v("req_remote_access_errors"), peer);
    case 9:  // IBV_WC_REM_INV_REQ_ERR
      return fmt::format(
          "req_remote_invalid_request={}: {} cannot take this request on QP {:#x} (message "
          "longer than its receive buffer, or an operation its QP access flags do not allow)",
          v("req_remote_invalid_request"), peer, qp.remote_qpn);
    case 11:  // IBV_WC_REM_OP_ERR
      return fmt::format(
          "req_remote_operational_error={}: {} failed to carry out the request (its QP "
          "went to the error state or its memory vanished)",
          v("req_remote_operational_error"), peer);
    case 5:  // IBV_WC_WR_FLUSH_ERR
      return "flushed: the QP is in the error state; the first error completion says why";
    case 1:  // IBV_WC_LOC_LEN_ERR
      return fmt::format(
          "resp_local_length_error={}: a received message was longer than the posted "
          "receive buffer",
          v("resp_local_length_error"));
    default:
      return fmt::format("{} on QP {:#x} to {}", wc_status_name(status), qp.qpn, peer);
  }
}

}  // namespace uroce::telemetry
