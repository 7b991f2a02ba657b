// `uroce doctor`'s checks of the classic RoCE v2 misconfigurations. Every check returns
// PASS / WARN / FAIL, what it saw, and for WARN/FAIL the command that fixes it. The parsers
// take text (nft / iptables-save output, /proc files) so tests feed them exact inputs; the
// probe exchange with a peer lives in doctor_probe.hpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net/netdev.hpp"

namespace uroce::cli {

enum class CheckLevel { kPass, kWarn, kFail };

struct CheckResult {
  std::string name;  // "mtu", "firewall", "memlock", ...
  CheckLevel level = CheckLevel::kPass;
  std::string detail;
  std::string fix;  // the command that fixes it (WARN/FAIL)
};

[[nodiscard]] std::string_view level_name(CheckLevel l);  // "PASS", "WARN", "FAIL"
[[nodiscard]] std::string format_check(const CheckResult& r);
[[nodiscard]] nlohmann::json check_json(const CheckResult& r);

// A firewall rule that drops or rejects UDP to port 4791.
struct FirewallDrop {
  std::string tool;  // "nft" or "iptables" / "ip6tables"
  std::string rule;  // the rule as listed
  std::string fix;   // the command that deletes it
};

// `nft -a list ruleset`: rules matching udp dport 4791 (alone, in a set or a range) with
// verdict drop or reject, in input/forward/output chains.
[[nodiscard]] std::vector<FirewallDrop> parse_nft_drops(const std::string& ruleset, uint16_t port);
// `iptables-save`: -A lines with -p udp, --dport 4791 (or a range/multiport holding it) and
// -j DROP/REJECT.
[[nodiscard]] std::vector<FirewallDrop> parse_iptables_drops(const std::string& save, uint16_t port,
                                                             const std::string& tool);

// The interface a packet to `peer` leaves from and the local address it is sent from
// (a connected UDP socket's getsockname; no packet is sent).
struct Route {
  std::string local_address;
  std::string netdev;
  uint32_t mtu = 0;
};
[[nodiscard]] std::optional<Route> route_to(const std::string& peer, std::string* error);

// Local checks. `interfaces`: what the device would use; `route`: to the peer, if given.
[[nodiscard]] CheckResult check_mtu(const std::vector<net::Interface>& interfaces,
                                    const std::optional<Route>& route);
[[nodiscard]] CheckResult check_gids(const std::optional<Route>& route);
[[nodiscard]] CheckResult check_firewall(uint16_t port);
[[nodiscard]] CheckResult check_memlock();
[[nodiscard]] CheckResult check_memlock_value(uint64_t soft_bytes);  // RLIM_INFINITY: unlimited
[[nodiscard]] CheckResult check_hugepages(const std::string& meminfo);
// What a UDP socket gets when asking for uroce's buffer sizes the way UdpPort asks (capped at
// rmem_max/wmem_max unless SO_*BUFFORCE works: CAP_NET_ADMIN).
struct SocketBuffers {
  uint64_t rcvbuf = 0;
  uint64_t sndbuf = 0;
};
[[nodiscard]] SocketBuffers probe_socket_buffers();
// WARN only when what a socket is granted falls short of what uroce asks.
[[nodiscard]] CheckResult check_socket_buffers(uint64_t rmem_max, uint64_t wmem_max,
                                               const SocketBuffers& granted);
[[nodiscard]] CheckResult check_governor(const std::vector<std::string>& governors);
// `tcp_ecn`: the text of /proc/sys/net/ipv4/tcp_ecn ("" when unreadable).
[[nodiscard]] std::string tcp_ecn_meaning(const std::string& value);
[[nodiscard]] CheckResult check_dscp_ecn(const std::string& tcp_ecn);

// Without leading and trailing blanks and newlines.
[[nodiscard]] std::string trim(const std::string& s);
// Reads a whole file or a command's stdout ("" when it cannot).
[[nodiscard]] std::string read_text_file(const std::string& path);
[[nodiscard]] std::optional<std::string> command_output(const std::string& command);

// Every local check on this host (peer: optional).
[[nodiscard]] std::vector<CheckResult> run_local_checks(const std::string& peer, uint16_t port);

}  // namespace uroce::cli
