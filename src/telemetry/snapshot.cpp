#include "telemetry/snapshot.hpp"

#include <arpa/inet.h>

#include <algorithm>

#include "wire/ip_layout.hpp"

namespace uroce::telemetry {

void RttHistogram::add(Nanos rtt) {
  const uint64_t ns = rtt.count() < 0 ? 0 : static_cast<uint64_t>(rtt.count());
  size_t i = 0;
  while (i < kRttBuckets && ns > rtt_bucket_bound_ns(i)) ++i;
  ++buckets[i];
  ++count;
  sum_ns += ns;
}

uint64_t RttHistogram::quantile_bound_ns(double q) const {
  if (count == 0) return 0;
  const auto want = static_cast<uint64_t>(q * static_cast<double>(count) + 0.5);
  uint64_t seen = 0;
  for (size_t i = 0; i < kRttBuckets; ++i) {
    seen += buckets[i];
    if (seen >= std::max<uint64_t>(want, 1)) return rtt_bucket_bound_ns(i);
  }
  return UINT64_MAX;
}

namespace {
size_t index_of(const std::vector<std::string>& names, std::string_view name) {
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}
}  // namespace

uint64_t DeviceSnapshot::value(std::string_view name) const {
  const size_t i = index_of(names, name);
  return i < values.size() ? values[i] : 0;
}

uint64_t DeviceSnapshot::qp_value(const QpSnapshot& qp, std::string_view name) const {
  const size_t i = index_of(names, name);
  return i < qp.values.size() ? qp.values[i] : 0;
}

const QpSnapshot* DeviceSnapshot::qp(uint32_t qpn) const {
  for (const QpSnapshot& q : qps) {
    if (q.qpn == qpn) return &q;
  }
  return nullptr;
}

std::string gid_address(const std::array<uint8_t, 16>& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (wire::is_ipv4_mapped(gid)) {
    inet_ntop(AF_INET, gid.data() + 12, text, sizeof(text));
  } else {
    inet_ntop(AF_INET6, gid.data(), text, sizeof(text));
  }
  return text;
}

}  // namespace uroce::telemetry
