// The counters of a kernel device's port under uroce's names, so `uroce stat` and the
// Prometheus exporter show rxe, mlx5 and uroce devices alike.
//
// uroce's counter names are rxe's and mlx5's own (include/uroce/vocab/counters.hpp), so a
// hw_counters file keeps its name: sent_pkts, duplicate_request, out_of_sequence,
// np_cnp_sent, ... mean the same on all three. The port counters (ports/N/counters, the
// IB PMA set mlx5 fills) are mapped where uroce has the meaning:
//   port_xmit_data x4 -> bytes_sent, port_rcv_data x4 -> bytes_rcvd (the PMA counts 4-byte
//   words), port_xmit_packets -> sent_pkts, port_rcv_packets -> rcvd_pkts (when hw_counters
//   has no sent_pkts / rcvd_pkts of its own, as on mlx5);
// every other one keeps its own name ("port_xmit_discards", "port_rcv_errors", ...).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kdev/kernel_device.hpp"

namespace uroce::kdev {

struct NamedCounters {
  std::vector<std::string> names;
  std::vector<uint64_t> values;
};

// The port's counters: those whose name is in `order` first, in that order, then the rest
// in name order.
[[nodiscard]] NamedCounters port_counters(const KernelPort& port,
                                          std::span<const std::string> order);

}  // namespace uroce::kdev
