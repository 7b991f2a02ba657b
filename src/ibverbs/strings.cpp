// The pure helpers of libibverbs: names of enum values and static-rate conversions, with
// rdma-core's exact strings (programs print them, and tests compare output lines).
#include <infiniband/verbs.h>

#include <array>
#include <cstddef>

namespace {

struct RateRow {
  ibv_rate rate;
  int mult;  // of 2.5 Gb/s
  int mbps;
};

constexpr std::array<RateRow, 21> kRates = {{
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},   {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125},  {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
}};

}  // namespace

extern "C" {

const char* ibv_node_type_str(ibv_node_type node_type) {
  static const char* const kNames[] = {"CA",          "switch", "router",    "iWARP NIC",
                                       "unspecified", "usNIC",  "usNIC UDP", "unspecified"};
  if (node_type < IBV_NODE_CA || node_type > IBV_NODE_UNSPECIFIED) return "unknown";
  return kNames[node_type - IBV_NODE_CA];
}

const char* ibv_port_state_str(ibv_port_state port_state) {
  static const char* const kNames[] = {"PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                       "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  if (port_state < IBV_PORT_NOP || port_state > IBV_PORT_ACTIVE_DEFER) return "unknown";
  return kNames[port_state];
}

const char* ibv_event_type_str(ibv_event_type event) {
  static const char* const kNames[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change",
      "WQ fatal",
  };
  if (event < IBV_EVENT_CQ_ERR || event > IBV_EVENT_WQ_FATAL) return "unknown";
  return kNames[event];
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  static const char* const kNames[] = {
      "success",
      "local length error",
      "local QP operation error",
      "local EE context operation error",
      "local protection error",
      "Work Request Flushed Error",
      "memory management operation error",
      "bad response error",
      "local access error",
      "remote invalid request error",
      "remote access error",
      "remote operation error",
      "transport retry counter exceeded",
      "RNR retry counter exceeded",
      "local RDD violation error",
      "remote invalid RD request",
      "aborted error",
      "invalid EE context number",
      "invalid EE context state",
      "fatal error",
      "response timeout error",
      "general error",
      "TM error",
      "TM software rendezvous",
  };
  if (status < IBV_WC_SUCCESS || status > IBV_WC_TM_RNDV_INCOMPLETE) return "unknown";
  return kNames[status];
}

int ibv_rate_to_mult(ibv_rate rate) {
  for (const RateRow& r : kRates) {
    if (r.rate == rate) return r.mult == 0 ? -1 : r.mult;
  }
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow& r : kRates) {
    if (r.mult != 0 && r.mult == mult) return r.rate;
  }
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate rate) {
  for (const RateRow& r : kRates) {
    if (r.rate == rate) return r.mbps;
  }
  return -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& r : kRates) {
    if (r.mbps == mbps) return r.rate;
  }
  return IBV_RATE_MAX;
}

}  // extern "C"
