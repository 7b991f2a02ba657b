// Named event counters of the transport engine. One fixed array indexed by enum Counter,
// with a name table so exporters (CLI, Prometheus, simulator reports) iterate them without
// knowing the list. Names follow Linux rxe where rxe has the counter, mlx5 where only mlx5
// has it, and `drop_<reason>` for every reason a received packet is discarded.
//
// The engine keeps one Counters for the whole device and one per QP (same layout; counters
// that have no meaning per QP, like drop_bad_qpn, stay 0 there).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace uroce::transport {

// X(enum name, exported name)
#define UROCE_TRANSPORT_COUNTERS(X)                                    \
  /* traffic */                                                        \
  X(kSentPkts, "sent_pkts")                                            \
  X(kRcvdPkts, "rcvd_pkts")                                            \
  X(kBytesSent, "bytes_sent")                                          \
  X(kBytesRcvd, "bytes_rcvd")                                          \
  X(kRdmaSends, "rdma_sends")                                          \
  X(kRdmaRecvs, "rdma_recvs")                                          \
  X(kRxWriteRequests, "rx_write_requests")                             \
  X(kRxReadRequests, "rx_read_requests")                               \
  X(kRxAtomicRequests, "rx_atomic_requests")                           \
  /* responder side (rxe names, then mlx5) */                          \
  X(kDuplicateRequest, "duplicate_request")                            \
  X(kOutOfSeqRequest, "out_of_seq_request")                            \
  X(kSendRnrErr, "send_rnr_err")                                       \
  X(kAckDeferred, "ack_deferred")                                      \
  X(kRespRemoteAccessErrors, "resp_remote_access_errors")              \
  X(kRespRemoteInvalidRequest, "resp_remote_invalid_request")          \
  X(kRespLocalLengthError, "resp_local_length_error")                  \
  X(kRespCqeError, "resp_cqe_error")                                   \
  X(kRespCqeFlushError, "resp_cqe_flush_error")                        \
  X(kOutOfBuffer, "out_of_buffer")                                     \
  /* requester / completer side */                                     \
  X(kRcvdRnrErr, "rcvd_rnr_err")                                       \
  X(kRcvdSeqErr, "rcvd_seq_err")                                       \
  X(kPacketSeqErr, "packet_seq_err")                                   \
  X(kImpliedNakSeqErr, "implied_nak_seq_err")                          \
  X(kLocalAckTimeoutErr, "local_ack_timeout_err")                      \
  X(kRetransmittedPkts, "retransmitted_pkts")                          \
  X(kRetryExceededErr, "retry_exceeded_err")                           \
  X(kRetryRnrExceededErr, "retry_rnr_exceeded_err")                    \
  X(kCompleterRetryErr, "completer_retry_err")                         \
  X(kReqRemoteAccessErrors, "req_remote_access_errors")                \
  X(kReqRemoteInvalidRequest, "req_remote_invalid_request")            \
  X(kReqRemoteOperationalError, "req_remote_operational_error")        \
  X(kReqCqeError, "req_cqe_error")                                     \
  X(kReqCqeFlushError, "req_cqe_flush_error")                          \
  X(kSendErr, "send_err")                                              \
  /* congestion */                                                     \
  X(kRpCnpHandled, "rp_cnp_handled")                                   \
  X(kNpEcnMarkedRocePackets, "np_ecn_marked_roce_packets")             \
  /* receive-side integrity and drops, one counter per reason */       \
  X(kIcrcErrors, "icrc_errors")                                        \
  X(kIcrcOkModuloIpId, "icrc_ok_modulo_ip_id")                         \
  X(kDropTruncated, "drop_truncated")                                  \
  X(kDropUnknownOpcode, "drop_unknown_opcode")                         \
  X(kDropOpcodeNotForTransport, "drop_opcode_not_for_transport")       \
  X(kDropBadTver, "drop_bad_tver")                                     \
  X(kDropBadPadcnt, "drop_bad_padcnt")                                 \
  X(kDropLengthMismatch, "drop_length_mismatch")                       \
  X(kDropBadQpn, "drop_bad_qpn")                                       \
  X(kDropBadPkey, "drop_bad_pkey")                                     \
  X(kDropBadQkey, "drop_bad_qkey")                                     \
  X(kDropBadQpType, "drop_bad_qp_type")                                \
  X(kDropBadQpState, "drop_bad_qp_state")                              \
  X(kDropBadAddress, "drop_bad_address")                               \
  X(kDropOutOfSequence, "drop_out_of_sequence")                        \
  X(kDropBadOpcodeSequence, "drop_bad_opcode_sequence")                \
  X(kDropUcMessage, "drop_uc_message")                                 \
  X(kDropNoRecvWqe, "drop_no_recv_wqe")                                \
  X(kDropDuplicateNoResource, "drop_duplicate_no_resource")            \
  X(kDropResponseQueueFull, "drop_response_queue_full")                \
  X(kDropUnexpectedResponse, "drop_unexpected_response")               \
  X(kDropDuplicateResponse, "drop_duplicate_response")                 \
  X(kDropBadResponse, "drop_bad_response")                             \
  X(kDropUdTooLong, "drop_ud_too_long")                                \
  /* local resources */                                                \
  X(kCqOverflow, "cq_overflow")                                        \
  X(kEventOverflow, "event_overflow")                                  \
  /* appended after the first API commit (values above stay stable) */ \
  X(kRespRemoteOperationalError, "resp_remote_operational_error")      \
  /* CNPs the notification point sent (congestion control) */          \
  X(kNpCnpSent, "np_cnp_sent")                                         \
  /* reserved, 0: a UDP port never goes down */                        \
  X(kLinkDowned, "link_downed")                                        \
  /* QPN 0xFFFFFF: multicast (IBA 9.3.2), uroce joins no group */      \
  X(kDropMulticastQpn, "drop_multicast_qpn")                           \
  /* CNPs for a QP without congestion control (mlx5's name) */         \
  X(kRpCnpIgnored, "rp_cnp_ignored")                                   \
  /* loss recovery (docs/congestion.md): adaptive retransmission */    \
  X(kRoceAdpRetrans, "roce_adp_retrans")                               \
  X(kRoceAdpRetransTo, "roce_adp_retrans_to")                          \
  X(kAdpRetransSpurious, "adp_retrans_spurious")                       \
  /* go-back-N episodes a PSN sequence NAK started at once */          \
  X(kNakFastRetrans, "nak_fast_retrans")                               \
  /* selective repeat (uroce peers that agreed) */                     \
  X(kSrRetransmittedPkts, "sr_retransmitted_pkts")                     \
  X(kSrOutOfOrderPlaced, "sr_out_of_order_placed")                     \
  X(kSrOutOfWindowDrop, "sr_out_of_window_drop")                       \
  /* go-back-N timeouts whose one-packet probe met the originals */    \
  X(kTimeoutSpurious, "timeout_spurious")

enum class Counter : uint16_t {
#define UROCE_X(e, n) e,
  UROCE_TRANSPORT_COUNTERS(UROCE_X)
#undef UROCE_X
      kCount
};

inline constexpr size_t kCounterCount = static_cast<size_t>(Counter::kCount);

inline constexpr std::array<std::string_view, kCounterCount> kCounterNames = {
#define UROCE_X(e, n) std::string_view(n),
    UROCE_TRANSPORT_COUNTERS(UROCE_X)
#undef UROCE_X
};

[[nodiscard]] constexpr std::string_view counter_name(Counter c) {
  return kCounterNames[static_cast<size_t>(c)];
}

struct Counters {
  std::array<uint64_t, kCounterCount> values{};

  [[nodiscard]] uint64_t operator[](Counter c) const { return values[static_cast<size_t>(c)]; }
  [[nodiscard]] uint64_t get(Counter c) const { return values[static_cast<size_t>(c)]; }
  void add(Counter c, uint64_t n = 1) { values[static_cast<size_t>(c)] += n; }
};

}  // namespace uroce::transport
