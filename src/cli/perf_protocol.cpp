// `uroce perf` side-channel messages and buffer layout: see perf_protocol.hpp.
#include "cli/perf_protocol.hpp"

#include <algorithm>

namespace uroce::cli {
namespace {

constexpr uint64_t kAlign = 64;
constexpr uint64_t kMaxRegion = 1ull << 34;  // a sanity bound on what a peer may ask for

}  // namespace

uint64_t perf_slot_stride(uint64_t slot_size) {
  return (slot_size + kAlign - 1) / kAlign * kAlign;
}

uint64_t perf_region_size(const PerfSetup& s) {
  return (s.ring_slots + 1) * perf_slot_stride(s.slot_size);
}

uint64_t perf_slot_offset(const PerfSetup& s, int qp, uint64_t slot) {
  return static_cast<uint64_t>(qp) * perf_region_size(s) + slot * perf_slot_stride(s.slot_size);
}

uint64_t perf_aux_offset(const PerfSetup& s, int qp) {
  return perf_slot_offset(s, qp, s.ring_slots);
}

uint64_t perf_pattern_id(int qp, uint64_t it, uint64_t size) {
  return (static_cast<uint64_t>(qp) + 1) * 0x100000001B3ull ^ size * 0x9E3779B1ull ^ it;
}

nlohmann::json to_json(const PerfQpInfo& q) {
  return {{"qpn", q.qpn},
          {"psn", q.psn},
          {"rkey", q.rkey},
          {"vaddr", q.vaddr},
          {"gid", gid_to_wire(q.gid)}};
}

bool from_json(const nlohmann::json& j, PerfQpInfo& q) {
  try {
    q.qpn = j.at("qpn").get<uint32_t>();
    q.psn = j.at("psn").get<uint32_t>();
    q.rkey = j.at("rkey").get<uint32_t>();
    q.vaddr = j.at("vaddr").get<uint64_t>();
    const auto gid = wire_to_gid(j.at("gid").get<std::string>());
    if (!gid) return false;
    q.gid = *gid;
    return q.qpn <= 0xffffff && q.psn <= 0xffffff;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

nlohmann::json to_json(const PerfSetup& s) {
  nlohmann::json qps = nlohmann::json::array();
  for (const PerfQpInfo& q : s.qps) qps.push_back(to_json(q));
  return {{"test", s.test},
          {"conn", connection_name(s.conn)},
          {"atomic", atomic_type_name(s.atomic)},
          {"sizes", s.sizes},
          {"iters", s.iters},
          {"duration", s.duration},
          {"num_qps", s.num_qps},
          {"mtu", s.mtu},
          {"tx_depth", s.tx_depth},
          {"rx_depth", s.rx_depth},
          {"cq_mod", s.cq_mod},
          {"inline", s.inline_size},
          {"verify", s.verify},
          {"events", s.events},
          {"slot_size", s.slot_size},
          {"ring_slots", s.ring_slots},
          {"recovery", transport::recovery_name(s.recovery)},
          {"qps", qps}};
}

bool from_json(const nlohmann::json& j, PerfSetup& s, std::string& error) {
  try {
    s.test = j.at("test").get<std::string>();
    const std::string conn = j.at("conn").get<std::string>();
    s.conn = conn == "UD" ? PerfConnection::kUd
                          : (conn == "UC" ? PerfConnection::kUc : PerfConnection::kRc);
    s.atomic = j.at("atomic").get<std::string>() == "CMP_AND_SWAP" ? AtomicType::kCmpAndSwap
                                                                   : AtomicType::kFetchAndAdd;
    s.sizes = j.at("sizes").get<std::vector<uint64_t>>();
    s.iters = j.at("iters").get<uint64_t>();
    s.duration = j.at("duration").get<double>();
    s.num_qps = j.at("num_qps").get<int>();
    s.mtu = j.at("mtu").get<uint32_t>();
    s.tx_depth = j.at("tx_depth").get<int>();
    s.rx_depth = j.at("rx_depth").get<int>();
    s.cq_mod = j.at("cq_mod").get<int>();
    s.inline_size = j.at("inline").get<int>();
    s.verify = j.at("verify").get<bool>();
    s.events = j.at("events").get<bool>();
    s.slot_size = j.at("slot_size").get<uint64_t>();
    s.ring_slots = j.at("ring_slots").get<uint64_t>();
    s.recovery = transport::Recovery::kGoBackN;
    if (const std::string err = transport::parse_recovery(
            "the client's recovery", j.value("recovery", std::string("gbn")), s.recovery);
        !err.empty()) {
      error = err;
      return false;
    }
    s.qps.clear();
    for (const auto& q : j.at("qps")) {
      PerfQpInfo info;
      if (!from_json(q, info)) {
        error = "the client sent a malformed QP description";
        return false;
      }
      s.qps.push_back(info);
    }
  } catch (const nlohmann::json::exception& e) {
    error = std::string("the client sent a malformed setup: ") + e.what();
    return false;
  }
  const bool sane = !s.sizes.empty() && s.num_qps >= 1 && s.num_qps <= kPerfMaxQps &&
                    static_cast<size_t>(s.num_qps) == s.qps.size() && s.tx_depth >= 1 &&
                    s.rx_depth >= 1 && s.cq_mod >= 1 && s.ring_slots >= 1 && s.slot_size >= 1 &&
                    std::all_of(s.sizes.begin(), s.sizes.end(),
                                [&](uint64_t z) { return z >= 1 && z <= s.slot_size; }) &&
                    perf_region_size(s) * static_cast<uint64_t>(s.num_qps) <= kMaxRegion;
  if (!sane) error = "the client sent a setup out of range";
  return sane;
}

}  // namespace uroce::cli
