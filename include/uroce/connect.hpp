// Bringing a QP up: RESET -> INIT -> RTR -> RTS with the attributes every RoCE application
// sets the same way (what ibv_rc_pingpong does), for RC, UC and UD. The peer's QPN, PSN and
// GID come from an out-of-band exchange (a TCP side channel, a file, the same process).
#pragma once

#include "uroce/verbs.hpp"

namespace uroce {

struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the first PSN this side sends
  Gid gid{};         // this side's GID (the address the peer sends to)
};

struct ConnectOptions {
  uint8_t port_num = 1;
  uint8_t sgid_index = 1;  // on lo and on a netdev with IPv4, index 1 is the IPv4 address
  Mtu path_mtu = Mtu::k1024;
  uint8_t timeout = 14;  // 4.096 us * 2^timeout (IBA 9.7.6.1.3)
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7: infinite
  uint8_t min_rnr_timer = 12;
  uint8_t max_rd_atomic = 16;
  uint8_t max_dest_rd_atomic = 16;
  uint32_t access =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  uint32_t qkey = 0x11111111;  // UD
  uint8_t traffic_class = 0;   // the GRH traffic class: IP TOS byte (DSCP << 2 | ECN)
  uint8_t sl = 0;              // the address vector's service level (ibv_ah_attr.sl)
  // RC: loss recovery. Selective repeat is a uroce extension (kQpUroceRecovery) that only
  // works when both ends set it, so turn it on only after the peer agreed out of band (as
  // `uroce perf --recovery sr` does); go-back-N sets no extension bit at all.
  transport::Recovery recovery = transport::Recovery::kGoBackN;
};

// RC/UC: connects to `remote`; UD: ignores `remote` (address each WR with an AddressHandle).
// `local_psn` is this side's first send PSN. Errors are those of QueuePair::modify.
// The same as qp_to_init followed by qp_to_rts.
Status connect_qp(QueuePair& qp, uint32_t local_psn, const QpEndpoint& remote,
                  const ConnectOptions& options = {});

// The two halves of connect_qp, for an application that posts receives before it knows the
// peer (a QP takes receives from INIT on; ibv_*_pingpong and perftest do so before their
// exchange). RESET -> INIT: RC with options.access, UC with its write bits only (UC has no
// READ or atomics, IBA 9.4.3, 9.4.5), UD with options.qkey.
Status qp_to_init(QueuePair& qp, const ConnectOptions& options = {});
// INIT -> RTR -> RTS towards `remote` (UD: only the states and the send PSN).
Status qp_to_rts(QueuePair& qp, uint32_t local_psn, const QpEndpoint& remote,
                 const ConnectOptions& options = {});

// The address vector for sending to `remote_gid` from GID `options.sgid_index` (with
// options.port_num, traffic_class and sl); ProtectionDomain::create_ah resolves its source.
[[nodiscard]] AhAttr make_ah_attr(const Gid& remote_gid, const ConnectOptions& options = {});

}  // namespace uroce
