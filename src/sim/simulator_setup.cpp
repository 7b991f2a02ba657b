// Building a simulation: the topology, one engine per host with one registered buffer, the
// switches' queue models, the link impairment models, and one connected RC QP pair per flow.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "sim/ideal_fct.hpp"
#include "sim/rng.hpp"
#include "sim/scenario_toml.hpp"
#include "sim/simulator.hpp"

namespace uroce::sim {

namespace {

std::array<uint8_t, 16> host_gid(uint32_t h) {
  const uint32_t v = h + 1;  // 10.0.0.1 is h0
  return {0,
          0,
          0,
          0,
          0,
          0,
          0,
          0,
          0,
          0,
          0xFF,
          0xFF,
          10,
          static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}

void check(const transport::Status& s, std::string_view what) {
  if (!s.is_ok())
    throw std::runtime_error(fmt::format("simulator setup: {}: {}", what, s.message()));
}

template <typename T>
T value(transport::Result<T> r, std::string_view what) {
  if (!r.is_ok())
    throw std::runtime_error(fmt::format("simulator setup: {}: {}", what, r.status().message()));
  return r.value();
}

}  // namespace

Simulator::Simulator(const Scenario& sc, const std::string& file)
    : sc_(sc), file_(file), topo_(Topology::build(sc.topology)) {
  const std::vector<FlowSpec> specs = expand_workloads(sc_, topo_, file_);
  flows_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) flows_[i].spec = specs[i];
  channels_.resize(topo_.channels());
  impair_.resize(topo_.channels());
  pfc_tx_.resize(size_t{topo_.channels()} * kPriorities);
  pfc_rx_.resize(size_t{topo_.channels()} * kPriorities);
  if (sc_.impair.active()) {
    for (uint32_t c = 0; c < topo_.channels(); ++c) {
      const uint64_t seed = sc_.impair.seed.value_or(sc_.seed);
      impair_[c] = std::make_unique<fault::ImpairModel>(sc_.impair, splitmix64(seed + c), 0);
    }
  }
  build_hosts();
  build_switches();
  build_flows();
  q_.reserve(4096);
}

Simulator::~Simulator() = default;

void Simulator::build_hosts() {
  const uint32_t n = topo_.hosts();
  std::vector<uint32_t> qps(n, 0);
  std::vector<uint32_t> wrs(n, 0);  // WRs outstanding at once, over the host's QPs
  for (const FlowState& f : flows_) {
    ++qps[f.spec.src];
    ++qps[f.spec.dst];
    wrs[f.spec.src] += f.spec.window;
    wrs[f.spec.dst] += f.spec.window;
  }
  hosts_.resize(n);
  for (uint32_t h = 0; h < n; ++h) {
    Host& H = hosts_[h];
    transport::EngineConfig cfg;
    cfg.seed = splitmix64(sc_.seed * 1000003 + h);
    cfg.active_mtu = transport::Mtu::k4096;
    cfg.limits.max_qp = std::max<uint32_t>(qps[h] + 2, 16);
    cfg.cc.algorithm = sc_.transport.cc;
    cfg.cc.line_rate_mbps = static_cast<uint32_t>(topo_.node(h).ports[0].bps / 1'000'000);
    cfg.cc.dcqcn = sc_.transport.dcqcn;
    cfg.recovery.adaptive = sc_.transport.adaptive;
    cfg.recovery.min_rto = Nanos(static_cast<int64_t>(sc_.transport.min_rto_ns));
    cfg.recovery.offer = sc_.transport.recovery;
    H.engine = std::make_unique<transport::Engine>(cfg);
    transport::Engine& e = *H.engine;
    H.pd = value(e.alloc_pd(), "alloc_pd");
    const uint32_t cqe = std::min<uint32_t>(65536, std::max<uint32_t>(1024, wrs[h] * 2 + 64));
    H.scq = value(e.create_cq(cqe), "create_cq");
    H.rcq = value(e.create_cq(cqe), "create_cq");
    H.buf.assign(sc_.host_buffer_bytes, 0);
    H.mr = value(e.reg_mr(H.pd, H.buf.data(), H.buf.size(),
                          transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                              transport::kAccessRemoteRead),
                 "reg_mr");
    for (auto& ring : H.held) ring.init();
  }
}

void Simulator::build_switches() {
  const auto nodes = static_cast<uint32_t>(topo_.nodes().size());
  switch_of_node_.assign(nodes, -1);
  for (uint32_t u = topo_.hosts(); u < nodes; ++u) {
    const Node& node = topo_.node(u);
    Switch s;
    s.node = u;
    std::vector<uint64_t> bps;
    for (const PortLink& l : node.ports) bps.push_back(l.bps);
    s.model = std::make_unique<SwitchNode>(sc_.sw.queues, std::move(bps),
                                           sc_.sw.lossless_priorities, sc_.sw.strict,
                                           sc_.sw.dwrr_weights, splitmix64(sc_.seed ^ (u * 7919)));
    s.tx_scheduled.assign(node.ports.size(), 0);
    switch_of_node_[u] = static_cast<int32_t>(switches_.size());
    switches_.push_back(std::move(s));
  }
}

void Simulator::connect_qp(uint32_t h, uint32_t qpn, uint32_t peer, uint32_t peer_qpn, uint8_t tc,
                           uint32_t rq_psn, uint32_t sq_psn) {
  using namespace transport;
  Engine& e = *hosts_[h].engine;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
  check(e.modify_qp(qpn, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), "INIT");
  a.qp_state = QpState::kRtr;
  a.path_mtu = sc_.transport.mtu;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = rq_psn;
  a.ah_attr.dgid = host_gid(peer);
  a.ah_attr.sgid = host_gid(h);
  a.ah_attr.is_global = true;
  a.ah_attr.traffic_class = tc;
  a.ah_attr.port_num = 1;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 1;
  uint32_t mask =
      kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  if (sc_.transport.recovery == Recovery::kSelectiveRepeat) {
    a.recovery = Recovery::kSelectiveRepeat;
    mask |= kQpUroceRecovery;
  }
  check(e.modify_qp(qpn, a, mask), "RTR");
  a.qp_state = QpState::kRts;
  a.sq_psn = sq_psn;
  a.timeout = sc_.transport.timeout;
  a.retry_cnt = sc_.transport.retry_cnt;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  check(
      e.modify_qp(qpn, a,
                  kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic),
      "RTS");
}

void Simulator::build_flows() {
  using namespace transport;
  const uint32_t mtu = transport::mtu_bytes(sc_.transport.mtu);
  for (FlowState& f : flows_) {
    f.req_host = f.spec.src;
    f.resp_host = f.spec.dst;
    const uint32_t w = f.spec.window;
    QpInitAttr init;
    init.qp_type = QpType::kRc;
    init.cap = {w * 2, w * 2, 1, 1, 0};
    Host& req = hosts_[f.req_host];
    Host& resp = hosts_[f.resp_host];
    init.send_cq = req.scq;
    init.recv_cq = req.rcq;
    f.req_qpn = value(req.engine->create_qp(req.pd, init), "create_qp").qpn;
    init.send_cq = resp.scq;
    init.recv_cq = resp.rcq;
    f.resp_qpn = value(resp.engine->create_qp(resp.pd, init), "create_qp").qpn;
    // 802.1p priority p rides as DSCP 8p (the class selector), ECN bits left to the engine.
    const auto tc = static_cast<uint8_t>(f.spec.priority << 5);
    const uint32_t psn_a = 0x100 + f.spec.id * 7;
    const uint32_t psn_b = 0x800 + f.spec.id * 13;
    connect_qp(f.req_host, f.req_qpn, f.resp_host, f.resp_qpn, tc, psn_b, psn_a);
    f.next_psn = psn_a;  // the requester's first request PSN
    connect_qp(f.resp_host, f.resp_qpn, f.req_host, f.req_qpn, tc, psn_a, psn_b);
    // Requests and ACKs ride the flow's priority; the host the data reaches also sends CNPs
    // (DSCP cnp_dscp, priority cnp_dscp >> 3) when it runs DCQCN.
    const auto prio_bit = static_cast<uint8_t>(1u << f.spec.priority);
    req.tx_prio_mask |= prio_bit;
    resp.tx_prio_mask |= prio_bit;
    if (sc_.transport.cc == CcAlgorithm::kDcqcn) {
      Host& data_rx = f.spec.op == FlowOp::kRead ? req : resp;
      data_rx.tx_prio_mask |= static_cast<uint8_t>(1u << ((sc_.transport.dcqcn.cnp_dscp >> 3) & 7));
    }
    for (auto [h, qpn] : {std::pair{f.req_host, f.req_qpn}, std::pair{f.resp_host, f.resp_qpn}}) {
      auto& m = hosts_[h].flow_of_qp;
      const uint32_t k = qpn - hosts_[h].engine->config().qpn_base;
      if (m.size() <= k) m.resize(k + 1, UINT32_MAX);
      m[k] = f.spec.id;
    }
    // Ideal FCT (ideal_fct.hpp): alone on the idle path, with the flow's own messages and
    // window.
    if (f.spec.bytes != 0) {
      f.ideal_ns = ideal_fct_ns(topo_.path(f.spec.src, f.spec.dst),
                                {f.spec.bytes, f.spec.message_bytes, f.spec.window, mtu});
      ++finite_flows_;
    }
  }
}

}  // namespace uroce::sim
