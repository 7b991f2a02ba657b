#include "kdev/kernel_counters.hpp"

#include <algorithm>
#include <map>

namespace uroce::kdev {

NamedCounters port_counters(const KernelPort& port, std::span<const std::string> order) {
  std::map<std::string, uint64_t> all;
  for (const auto& [name, value] : port.hw_counters) all[name] = value;
  for (const auto& [name, value] : port.counters) {
    std::string mapped = name;
    uint64_t v = value;
    if (name == "port_xmit_data") {
      mapped = "bytes_sent";
      v = value * 4;
    } else if (name == "port_rcv_data") {
      mapped = "bytes_rcvd";
      v = value * 4;
    } else if (name == "port_xmit_packets" && !all.contains("sent_pkts")) {
      mapped = "sent_pkts";
    } else if (name == "port_rcv_packets" && !all.contains("rcvd_pkts")) {
      mapped = "rcvd_pkts";
    }
    // A hw_counter of the same name wins: it is the RoCE one, the PMA's counts the link.
    if (!all.contains(mapped)) all[mapped] = v;
  }
  NamedCounters out;
  for (const std::string& name : order) {
    auto it = all.find(name);
    if (it == all.end()) continue;
    out.names.push_back(it->first);
    out.values.push_back(it->second);
    all.erase(it);
  }
  for (const auto& [name, value] : all) {
    out.names.push_back(name);
    out.values.push_back(value);
  }
  return out;
}

}  // namespace uroce::kdev
