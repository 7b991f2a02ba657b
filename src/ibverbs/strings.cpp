// The pure helpers of libibverbs: names of enum values and static-rate conversions, with
// rdma-core's exact strings (programs print them, and tests compare output lines).
#include <infiniband/verbs.h>

#include <array>
#include <cstddef>

namespace {

struct RateRow {
  int rate;  // enum ibv_rate; 24 (1200 Gb/s) is newer than Debian's verbs.h
  int mult;  // of 2.5 Gb/s; -1 for the rates that are no such multiple
  int mbps;
};

// rdma-core's tables (libibverbs/verbs.c), checked value for value against Debian's
// libibverbs by ibverbs_abi_test.
constexpr std::array<RateRow, 23> kRates = {{
    {2, 1, 2500},      {3, 4, 10000},     {4, 12, 30000},     {5, 2, 5000},     {6, 8, 20000},
    {7, 16, 40000},    {8, 24, 60000},    {9, 32, 80000},     {10, 48, 120000}, {11, -1, 14062},
    {12, -1, 56250},   {13, -1, 112500},  {14, -1, 168750},   {15, -1, 25781},  {16, -1, 103125},
    {17, -1, 206250},  {18, -1, 309375},  {19, 11, 28125},    {20, 20, 53125},  {21, 160, 425000},
    {22, 240, 637500}, {23, 320, 850000}, {24, 480, 1275000},
}};

}  // namespace

extern "C" {

const char* ibv_node_type_str(ibv_node_type node_type) {
  static const char* const kNames[] = {"InfiniBand channel adapter",
                                       "InfiniBand switch",
                                       "InfiniBand router",
                                       "iWARP NIC",
                                       "usNIC",
                                       "usNIC UDP",
                                       "unspecified"};
  if (node_type < IBV_NODE_CA || node_type > IBV_NODE_UNSPECIFIED) return "unknown";
  return kNames[node_type - IBV_NODE_CA];
}

const char* ibv_port_state_str(ibv_port_state port_state) {
  static const char* const kNames[] = {"no state change (NOP)", "down", "init", "armed", "active",
                                       "active defer"};
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
    if (r.rate == rate) return r.mult;
  }
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow& r : kRates) {
    if (r.mult > 0 && r.mult == mult) return static_cast<ibv_rate>(r.rate);
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
    if (r.mbps == mbps) return static_cast<ibv_rate>(r.rate);
  }
  return IBV_RATE_MAX;
}

}  // extern "C"
