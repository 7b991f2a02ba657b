// The stall side of DeviceTelemetry (device_telemetry.hpp): the evidence about a QP whose
// requests get no answer, the watchdog that warns once per stalled RC QP when the device
// publishes its counters (never per packet), and the explanations the CLI asks for.
#include <cerrno>  // program_invocation_short_name
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "telemetry/device_telemetry.hpp"
#include "telemetry/explain.hpp"
#include "wire/ip_layout.hpp"

namespace uroce::telemetry {

namespace {

using transport::Counter;

// Positions in published values (the engine's counters come first, in order; acks_rcvd
// last): check_stalls reads five per QP at every publish, and a lookup by name compared
// strings against some 70 names each time.
constexpr size_t kRnrIndex = static_cast<size_t>(Counter::kRcvdRnrErr);
constexpr size_t kRcvdPktsIndex = static_cast<size_t>(Counter::kRcvdPkts);
constexpr size_t kSeqNakIndex = static_cast<size_t>(Counter::kRcvdSeqErr);
constexpr size_t kAckTimeoutIndex = static_cast<size_t>(Counter::kLocalAckTimeoutErr);

uint64_t published(const QpSnapshot& q, size_t index) {
  return index < q.values.size() ? q.values[index] : 0;
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%x", v);
  return b;
}

}  // namespace

// A responder rejects a FIRST or MIDDLE packet whose payload is not its own path MTU (the
// IBTA packet-length rule; rxe's check_length does the same), so two sides with different
// -m fail every multi-packet message with an invalid request.
std::string DeviceTelemetry::mtu_hint(transport::WcStatus status, const StallEvidence& ev) {
  if (status != transport::WcStatus::kRemInvReqErr) return {};
  return "; or the two sides use different path MTUs (ours is " + std::to_string(ev.path_mtu) +
         "): a QP rejects the packets of a multi-packet message that are not its own path MTU "
         "long — use the same -m on both sides, at most the smaller active MTU";
}

StallEvidence DeviceTelemetry::evidence(const device::Device& dev, const QpSnapshot& qp) const {
  StallEvidence ev;
  ev.mtu_option = path_mtu_option(program_invocation_short_name);
  transport::QpAttr attr;
  transport::QpInitAttr init;
  if (dev.query_qp(qp.qpn, attr, init)) {
    ev.local_gid = attr.ah_attr.sgid;
    ev.local_gid_index = attr.ah_attr.sgid_index;
    ev.path_mtu = transport::mtu_bytes(attr.path_mtu);
    const bool peer_v4 = wire::is_ipv4_mapped(qp.remote_gid);
    for (const device::PortInfo& p : dev.ports()) {
      if (p.port_num != attr.ah_attr.port_num) continue;
      ev.netdev_mtu = p.netdev_mtu;
      for (size_t i = 0; i < p.gids.size() && !ev.peer_family_gid_index; ++i) {
        if (!p.gids[i].empty() && wire::is_ipv4_mapped(p.gids[i].gid) == peer_v4) {
          ev.peer_family_gid_index = static_cast<uint32_t>(i);
        }
      }
    }
  }
  {
    std::lock_guard lock(qp_mu_);
    ev.sizes = rtt_.sizes(qp.qpn);
  }
  ev.path = dev.path_report(qp.remote_gid);
  ev.rnr_naks = rnr_naks_since_answer(qp);
  return ev;
}

void DeviceTelemetry::check_stalls(TimePoint now, const device::Device& dev,
                                   const DeviceSnapshot& snap) {
  if (options_.watchdog_s <= 0) return;
  const auto limit =
      std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(options_.watchdog_s));
  // QPs to warn about; `refused`: packets were refused as too big during the stall.
  struct Warning {
    uint32_t qpn;
    bool refused;
  };
  std::vector<Warning> warnings;
  {
    std::lock_guard lock(qp_mu_);
    for (const QpSnapshot& q : snap.qps) {
      if (q.qp_type != static_cast<uint8_t>(transport::QpType::kRc) ||
          q.state != static_cast<uint8_t>(transport::QpState::kRts)) {
        continue;
      }
      auto it = qps_.find(q.qpn);
      if (it == qps_.end()) continue;
      QpInfo& info = it->second;
      // Progress is an ACK (or READ response / atomic ACK) for our requests, as the
      // round-trip tracker counts them; without the tracker, any packet from the peer.
      // Unanswered work shows as ACK timeouts, RNR NAKs or sequence NAKs since then.
      const uint64_t answers =
          options_.measure_rtt ? published(q, acks_rcvd_index()) : published(q, kRcvdPktsIndex);
      const uint64_t rnr = published(q, kRnrIndex);
      const uint64_t pending = published(q, kAckTimeoutIndex) + rnr + published(q, kSeqNakIndex);
      if (answers != info.seen_answers || pending < info.seen_pending) {
        // An answer: a new stall (if any) starts from here and may warn again.
        info.seen_answers = answers;
        info.seen_pending = pending;
        info.seen_rnr = rnr;
        info.stall_since.reset();
        info.warned = false;
        continue;
      }
      if (pending == info.seen_pending) continue;  // nothing outstanding went unanswered
      if (!info.stall_since) {
        info.stall_since = now;
        info.too_big_at_stall = dev.path_report(q.remote_gid).too_big;
      }
      if (info.warned) continue;
      // Packets refused as too big never reach the peer, and the network (or this host's
      // route) said why: there is nothing to wait for.
      const bool refused = dev.path_report(q.remote_gid).too_big > info.too_big_at_stall;
      if (refused || now - *info.stall_since >= limit) {
        info.warned = true;
        warnings.push_back({q.qpn, refused});
      }
    }
  }
  if (warnings.empty()) return;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", options_.watchdog_s);
  for (const Warning& w : warnings) {
    const QpSnapshot* q = snap.qp(w.qpn);
    if (q == nullptr) continue;
    log_line("uroce: QP 0x" + hex(w.qpn) + " to " + gid_address(q->remote_gid) + ": no response" +
             (w.refused ? std::string() : std::string(" for ") + seconds + " s") + " — " +
             explain_stall(snap, *q, evidence(dev, *q)));
  }
}

std::string DeviceTelemetry::diagnose(const device::Device& dev, uint32_t qpn) const {
  const DeviceSnapshot snap = latest_snapshot();
  const QpSnapshot* q = snap.qp(qpn);
  if (q == nullptr) return {};
  return explain_stall(snap, *q, evidence(dev, *q));
}

uint64_t DeviceTelemetry::rnr_naks_since_answer(const QpSnapshot& q) const {
  const uint64_t rnr = published(q, kRnrIndex);
  std::lock_guard lock(qp_mu_);
  auto it = qps_.find(q.qpn);
  return it == qps_.end() || rnr < it->second.seen_rnr ? 0 : rnr - it->second.seen_rnr;
}

double watchdog_seconds_from_env(std::string* error) {
  constexpr double kDefault = 5;
  const char* v = std::getenv("UROCE_WATCHDOG");
  if (v == nullptr || *v == '\0') return kDefault;
  const std::string text(v);
  if (text == "0" || text == "off") return 0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0) || s > 86400) {
    if (error != nullptr) {
      *error = "UROCE_WATCHDOG=" + text +
               " is not a number of seconds (more than 0 and at most 86400; 0 or off: no stall "
               "warning)";
    }
    return 0;
  }
  return s;
}

std::string diagnose_qp(const device::Device& dev, uint32_t qpn) {
  const auto* t = dynamic_cast<const DeviceTelemetry*>(dev.config().observer.get());
  return t == nullptr ? std::string() : t->diagnose(dev, qpn);
}

}  // namespace uroce::telemetry
