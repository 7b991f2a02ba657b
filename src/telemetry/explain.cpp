#include "telemetry/explain.hpp"

#include <fmt/format.h>

#include "wire/ip_layout.hpp"

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

namespace {

// "use -m 1024" in the program's own option (StallEvidence::mtu_option); `fit` 0: unknown.
std::string use_path_mtu(uint32_t fit, const std::string& option) {
  if (option.empty()) {
    return fit != 0 ? fmt::format("set path_mtu to IBV_MTU_{} (ibv_modify_qp)", fit)
                    : std::string("set a smaller path_mtu (ibv_modify_qp)");
  }
  return fit != 0 ? fmt::format("use {} {}", option, fit) : fmt::format("use a smaller {}", option);
}

// RoCE v2 headers around the payload of the largest packet: IPv4 20 (IPv6 40) + UDP 8 +
// BTH 12 + RETH 16 + ICRC 4 (rxe's netdev MTU - active MTU rule leaves 80 for them).
constexpr uint32_t kRoceHeaders = 80;
// The most two packets of one connection at the same path MTU differ by: RETH or AtomicETH
// plus AETH, and IPv6's 20 extra bytes.
constexpr uint32_t kHeaderSpread = 64;

}  // namespace

uint32_t ib_mtu_fitting(uint32_t ip_mtu) {
  for (uint32_t m = 4096; m >= 256; m /= 2) {
    if (m + kRoceHeaders <= ip_mtu) return m;
  }
  return 0;
}

std::string explain_stall(const DeviceSnapshot& snap, const QpSnapshot& qp,
                          const StallEvidence& ev) {
  const std::string peer = gid_address(qp.remote_gid);
  const std::string doctor = "run uroce doctor --peer " + peer;
  const uint16_t port = ev.path.udp_port;
  const uint64_t rcvd = snap.qp_value(qp, "rcvd_pkts");
  const bool peer_v4 = wire::is_ipv4_mapped(qp.remote_gid);
  if (peer_v4 != wire::is_ipv4_mapped(ev.local_gid)) {
    std::string fix =
        ev.peer_family_gid_index
            ? fmt::format("use GID index {} (-g {} / -x {}; see uroce gids)",
                          *ev.peer_family_gid_index, *ev.peer_family_gid_index,
                          *ev.peer_family_gid_index)
            : fmt::format("no GID of this port is {}: give the peer an address of the other family",
                          peer_v4 ? "IPv4" : "IPv6");
    return fmt::format(
        "the QP sends from GID index {} ({}, {}) but {} is an {} address: packets cannot go from "
        "one IP family to the other — {}",
        ev.local_gid_index, gid_address(ev.local_gid), peer_v4 ? "IPv6" : "IPv4", peer,
        peer_v4 ? "IPv4" : "IPv6", fix);
  }
  if (ev.rnr_naks > 0) {
    return fmt::format(
        "{} answers with {} RNR NAKs (receiver not ready): its application has no receive "
        "posted for QP {:#x} — post receives before the sender sends (rnr_retry 7 retries "
        "forever)",
        peer, ev.rnr_naks, qp.remote_qpn);
  }
  if (ev.path.too_big > 0) {
    const uint32_t fit = ev.path.mtu != 0 ? ib_mtu_fitting(ev.path.mtu) : 0;
    return fmt::format(
        "the network refused {} packets to {} as too big (ICMP fragmentation needed or EMSGSIZE"
        "{}): path MTU {} does not fit this path — {} or raise the MTU on the path",
        ev.path.too_big, peer, ev.path.mtu != 0 ? fmt::format(", MTU {}", ev.path.mtu) : "",
        ev.path_mtu, use_path_mtu(fit, ev.mtu_option));
  }
  if (ev.path.port_unreachable > 0 && rcvd > 0) {
    return fmt::format(
        "{} answered {} packets, then reported UDP {} closed (ICMP port unreachable): the peer's "
        "process is gone or closed its device — restart it",
        peer, rcvd, port);
  }
  if (ev.path.port_unreachable > 0) {
    return fmt::format(
        "{} reports that nothing listens on UDP {} (ICMP port unreachable): the peer is not "
        "running, uses another UDP port (UROCE_UDP_PORT), or a firewall rejects UDP {} — {}",
        peer, port, port, doctor);
  }
  if (ev.path.unreachable > 0) {
    return fmt::format(
        "{} is unreachable for UDP {} (ICMP host/network unreachable or administratively "
        "prohibited): a route or a firewall rejecting UDP {} — {}",
        peer, port, port, doctor);
  }
  if (rcvd == 0) {
    return fmt::format(
        "nothing at all came back from {}: UDP {} is dropped on the way (a firewall: nft list "
        "ruleset | grep {}), the peer uses another UDP port, or there is no route — {}",
        peer, port, port, doctor);
  }
  const uint32_t answered = std::max(ev.sizes.largest_answered, ev.sizes.largest_received);
  // Packets of one stream differ by their extension headers (RETH 16, AtomicETH 28): only a
  // gap larger than that is a size that does not get through (IB MTUs differ by 2x).
  if (ev.sizes.largest_unanswered > answered + kHeaderSpread && ev.sizes.largest_unanswered > 576) {
    // Packets of `answered` bytes crossed the path: an IB MTU whose SEND packets (IPv4 20 +
    // UDP 8 + BTH 12 + ICRC 4 around the payload) are no larger is known to fit.
    uint32_t fit = 0;
    for (uint32_t m = 4096; m >= 256 && fit == 0; m /= 2) {
      if (m + 44 <= answered) fit = m;
    }
    return fmt::format(
        "small packets are answered but full-size ones are not: path MTU {} ({}-byte packets) "
        "but packets over ~{} B get no answer (netdev MTU here {}) — {} or raise the MTU on the "
        "path; {}",
        ev.path_mtu, ev.sizes.largest_unanswered, answered, ev.netdev_mtu,
        use_path_mtu(fit, ev.mtu_option), doctor);
  }
  // The peer still answers, but most of what is sent is sent again: the path drops so much
  // that go-back-N's whole-window resends make (almost) no progress — congestion on a lossy
  // network, not a dead peer.
  const uint64_t sent = snap.qp_value(qp, "sent_pkts");
  const uint64_t resent = snap.qp_value(qp, "retransmitted_pkts");
  if (sent > 0 && resent * 2 >= sent) {
    return fmt::format(
        "{} still answers, but the path loses most packets: {} of the {} packets sent were "
        "retransmissions ({} sequence NAKs, {} ACK timeouts) — a congested or lossy path "
        "without PFC, where go-back-N resends whole windows: lower the offered load (fewer "
        "QPs or senders), enable congestion control with an ECN-marking switch "
        "(UROCE_CC=dcqcn), use selective repeat between uroce peers (--recovery sr) or a "
        "lossless (PFC) network; {}",
        peer, resent, sent, snap.qp_value(qp, "rcvd_seq_err"),
        snap.qp_value(qp, "local_ack_timeout_err"), doctor);
  }
  return fmt::format(
      "{} answered {} packets before and then stopped: the peer's process is gone, its QP left "
      "RTS, or the path started dropping — {}",
      peer, rcvd, doctor);
}

std::string path_mtu_option(std::string_view program) {
  if (program == "qperf") return "-mt";
  if (program.starts_with("ib_") || program.starts_with("ibv_") || program == "uroce") {
    return "-m";
  }
  return "";
}

}  // namespace uroce::telemetry
