// The line a program's "can't read sgid of index N" does not say: which GIDs there are.
// GID index confusion is the commonest first failure on RoCE (the IPv4 address is index 1 on
// rxe and on uroce, index 3 on many mlx5 setups), and perftest reports it only as
// "Unable to set up socket connection".
#include <atomic>
#include <string>

#include "ibverbs/gid_hint.hpp"
#include "ibverbs/options.hpp"
#include "net/ip_addr.hpp"

namespace uroce::ibverbs {

std::string missing_gid_text(const device::Device& dev, uint8_t port_num, uint32_t index) {
  for (const device::PortInfo& p : dev.ports()) {
    if (p.port_num != port_num) continue;
    std::string list;
    int v4_index = -1;
    for (size_t i = 0; i < p.gids.size(); ++i) {
      if (p.gids[i].empty()) continue;
      const net::IpAddr addr{p.gids[i].gid};
      if (addr.is_v4() && v4_index < 0) v4_index = static_cast<int>(i);
      list += (list.empty() ? "" : ", ") + std::to_string(i) + " = " + addr.to_string();
    }
    std::string text =
        "GID index " + std::to_string(index) + " does not exist on " + dev.name() + " port " +
        std::to_string(port_num) + " (" +
        (list.empty() ? std::string("its GID table is empty") : "its GIDs: " + list) + ")";
    if (v4_index >= 0) {
      text += "; RoCE v2 over IPv4 is index " + std::to_string(v4_index) + " (ibv_*_pingpong -g " +
              std::to_string(v4_index) + ", perftest -x " + std::to_string(v4_index) + ")";
    }
    return text;
  }
  return {};
}

void explain_missing_gid(const device::Device& dev, uint8_t port_num, uint32_t index) {
  // Once per process: a program that probes indexes on purpose gets one line, not many.
  static std::atomic<bool> said{false};
  const std::string text = missing_gid_text(dev, port_num, index);
  if (text.empty() || said.exchange(true)) return;
  report(text);
}

}  // namespace uroce::ibverbs
