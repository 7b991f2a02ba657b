#include "cli/doctor_checks.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "net/udp_device.hpp"

namespace uroce::cli {

namespace {

// What a uroce device asks for (net/udp_port.hpp UdpPortConfig): the kernel caps it at
// net.core.rmem_max / wmem_max, and a smaller receive buffer drops bursts.
constexpr uint64_t kWantRcvbuf = static_cast<uint64_t>(net::UdpPortConfig{}.rcvbuf_bytes);
constexpr uint64_t kWantSndbuf = static_cast<uint64_t>(net::UdpPortConfig{}.sndbuf_bytes);

bool port_in_spec(const std::string& spec, uint16_t port) {
  // "4791", "{ 4791, 80 }", "4000-5000", "4791,80" (multiport), "4000:5000" (iptables).
  static const std::regex kToken(R"((\d+)(?:\s*[-:]\s*(\d+))?)");
  for (std::sregex_iterator it(spec.begin(), spec.end(), kToken), end; it != end; ++it) {
    const unsigned lo = std::stoul((*it)[1]);
    const unsigned hi = (*it)[2].matched ? std::stoul((*it)[2]) : lo;
    if (port >= lo && port <= hi) return true;
  }
  return false;
}

}  // namespace

// /proc and /sys values end in a newline: without stripping it, "performance\n" never equals
// "performance" and a value printed mid-line breaks the line.
std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  const size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string_view level_name(CheckLevel l) {
  switch (l) {
    case CheckLevel::kPass:
      return "PASS";
    case CheckLevel::kWarn:
      return "WARN";
    case CheckLevel::kFail:
      return "FAIL";
  }
  return "?";
}

std::string format_check(const CheckResult& r) {
  std::string out = fmt::format("{} {}: {}\n", level_name(r.level), r.name, r.detail);
  if (r.level != CheckLevel::kPass && !r.fix.empty()) out += fmt::format("     fix: {}\n", r.fix);
  return out;
}

nlohmann::json check_json(const CheckResult& r) {
  nlohmann::json j = {{"check", r.name}, {"level", level_name(r.level)}, {"detail", r.detail}};
  if (!r.fix.empty()) j["fix"] = r.fix;
  return j;
}

std::vector<FirewallDrop> parse_nft_drops(const std::string& ruleset, uint16_t port) {
  std::vector<FirewallDrop> out;
  static const std::regex kTable(R"(^\s*table\s+(\S+)\s+(\S+)\s*\{)");
  static const std::regex kChain(R"(^\s*chain\s+(\S+)\s*\{)");
  static const std::regex kDport(R"((?:udp|th)\s+dport\s+(\{[^}]*\}|[\d\-]+))");
  static const std::regex kHandle(R"(#\s*handle\s+(\d+))");
  std::string family, table, chain;
  std::istringstream in(ruleset);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kTable)) {
      family = m[1];
      table = m[2];
      continue;
    }
    if (std::regex_search(line, m, kChain)) {
      chain = m[1];
      continue;
    }
    const bool verdict = std::regex_search(line, std::regex(R"(\b(drop|reject)\b)"));
    if (!verdict || !std::regex_search(line, m, kDport) || !port_in_spec(m[1], port)) continue;
    if (line.find("tcp dport") != std::string::npos) continue;
    FirewallDrop d;
    d.tool = "nft";
    d.rule = trim(line);
    std::smatch h;
    if (std::regex_search(line, h, kHandle)) {
      d.fix = fmt::format("nft delete rule {} {} {} handle {}", family, table, chain, h[1].str());
    } else {
      d.fix = fmt::format("nft -a list chain {} {} {}  # then: nft delete rule {} {} {} handle N",
                          family, table, chain, family, table, chain);
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<FirewallDrop> parse_iptables_drops(const std::string& save, uint16_t port,
                                               const std::string& tool) {
  std::vector<FirewallDrop> out;
  static const std::regex kDport(R"(--dports?\s+(\S+))");
  std::string table = "filter";
  std::istringstream in(save);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("*")) {
      table = trim(line.substr(1));
      continue;
    }
    if (!line.starts_with("-A ")) continue;
    if (line.find("-p udp") == std::string::npos) continue;
    if (line.find("-j DROP") == std::string::npos && line.find("-j REJECT") == std::string::npos) {
      continue;
    }
    std::smatch m;
    if (!std::regex_search(line, m, kDport) || !port_in_spec(m[1], port)) continue;
    FirewallDrop d;
    d.tool = tool;
    d.rule = trim(line);
    d.fix = fmt::format("{}{} -D {}", tool, table == "filter" ? "" : " -t " + table,
                        trim(line.substr(3)));
    out.push_back(std::move(d));
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<std::string> command_output(const std::string& command) {
  FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  if (status != 0) return std::nullopt;
  return out;
}

std::optional<Route> route_to(const std::string& peer, std::string* error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(peer.c_str(), "4791", &hints, &res) != 0 || res == nullptr) {
    if (error != nullptr) *error = "cannot resolve " + peer;
    return std::nullopt;
  }
  const int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  const bool named = ok && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const int family = res->ai_family;
  freeaddrinfo(res);
  if (fd >= 0) close(fd);
  if (!named) {
    if (error != nullptr) *error = "no route to " + peer;
    return std::nullopt;
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, text, sizeof(text));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, text, sizeof(text));
  }
  Route r;
  r.local_address = text;
  auto ifs = net::discover_interfaces();
  if (ifs) {
    for (const net::Interface& i : ifs.value()) {
      for (const auto* list : {&i.ipv4, &i.ipv6}) {
        for (const net::InterfaceAddr& a : *list) {
          if (a.addr.to_string() == r.local_address) {
            r.netdev = i.name;
            r.mtu = i.mtu;
          }
        }
      }
    }
  }
  return r;
}

CheckResult check_mtu(const std::vector<net::Interface>& interfaces,
                      const std::optional<Route>& route) {
  CheckResult r{"mtu"};
  if (route && !route->netdev.empty()) {
    const uint32_t active = net::active_mtu_for_netdev_mtu(route->mtu);
    r.detail = fmt::format("{} (to the peer) has MTU {}: active_mtu {}", route->netdev, route->mtu,
                           active);
    if (active < 1024) {
      r.level = CheckLevel::kWarn;
      r.detail += "; RoCE needs an MTU of at least 1104 for active_mtu 1024";
      r.fix = fmt::format("ip link set dev {} mtu 1500", route->netdev);
    }
    return r;
  }
  std::string seen;
  for (const net::Interface& i : interfaces) {
    if (!i.admin_up || i.loopback) continue;
    const uint32_t active = net::active_mtu_for_netdev_mtu(i.mtu);
    seen += fmt::format("{}{} {} (active_mtu {})", seen.empty() ? "" : ", ", i.name, i.mtu, active);
    if (active < 1024 && r.level == CheckLevel::kPass) {
      r.level = CheckLevel::kWarn;
      r.fix = fmt::format("ip link set dev {} mtu 1500", i.name);
    }
  }
  r.detail = seen.empty() ? "no interface other than loopback is up" : "interfaces " + seen;
  return r;
}

CheckResult check_gids(const std::optional<Route>& route) {
  CheckResult r{"gid"};
  auto devices = net::discover_host_devices({});
  if (!devices) {
    r.level = CheckLevel::kFail;
    r.detail = devices.error().message;
    r.fix = "ip link set dev IFACE up; ip addr add ADDR/PREFIX dev IFACE";
    return r;
  }
  std::string table;
  struct Use {
    std::string device;
    uint32_t index = 0;
  };
  std::optional<Use> for_route;
  for (const net::HostDevice& d : devices.value()) {
    for (const net::GidEntry& g : d.port.gids) {
      // A route to an IPv6 peer leaves from an IPv6 address: its GID is that address itself.
      net::IpAddr gid_addr;
      gid_addr.bytes = g.gid;
      if (route && !for_route &&
          (g.ipv4.empty() ? gid_addr.to_string() : g.ipv4) == route->local_address) {
        for_route = Use{d.name, g.index};
      }
      if (g.ipv4.empty()) continue;
      table += fmt::format("{}{} {}={}", table.empty() ? "" : ", ", d.name, g.index, g.ipv4);
    }
  }
  r.detail = "RoCE v2 IPv4 GIDs: " + (table.empty() ? std::string("none") : table);
  if (route) {
    if (for_route) {
      const bool first =
          !devices.value().empty() && devices.value().front().name == for_route->device;
      r.detail += fmt::format(
          "; to reach the peer use device {} GID index {} ({} on {}), e.g. -d {} -g {} / "
          "-d {} -x {}{}",
          for_route->device, for_route->index, route->local_address, route->netdev,
          for_route->device, for_route->index, for_route->device, for_route->index,
          first ? " (it is the first device, so -d may be left out)" : "");
    } else {
      r.level = CheckLevel::kFail;
      r.detail +=
          fmt::format("; the address {} that routes to the peer has no GID", route->local_address);
      r.fix = fmt::format("ip link set dev {} up", route->netdev.empty() ? "IFACE" : route->netdev);
    }
  }
  return r;
}

CheckResult check_firewall(uint16_t port) {
  CheckResult r{"firewall"};
  std::vector<FirewallDrop> drops;
  std::string looked;
  if (auto nft = command_output("nft -a list ruleset")) {
    looked += "nft";
    auto d = parse_nft_drops(*nft, port);
    drops.insert(drops.end(), d.begin(), d.end());
  }
  for (const char* tool : {"iptables", "ip6tables"}) {
    // iptables-nft shows nft rules too; the nft listing above already has them, so only the
    // legacy backend adds anything new here.
    if (auto save = command_output(std::string(tool) + "-legacy-save")) {
      looked += std::string(looked.empty() ? "" : ", ") + tool + "-legacy";
      auto d = parse_iptables_drops(*save, port, std::string(tool) + "-legacy");
      drops.insert(drops.end(), d.begin(), d.end());
    }
  }
  if (looked.empty()) {
    r.level = CheckLevel::kWarn;
    r.detail = "cannot read the firewall rules (nft / iptables-legacy-save need root)";
    r.fix = "sudo uroce doctor";
    return r;
  }
  if (drops.empty()) {
    r.detail = fmt::format("no {} rule drops UDP port {}", looked, port);
    return r;
  }
  r.level = CheckLevel::kFail;
  r.detail = fmt::format("{} rule(s) drop UDP port {} (RoCE v2): ", drops.size(), port);
  for (size_t i = 0; i < drops.size(); ++i) {
    r.detail += fmt::format("{}{}: {}", i == 0 ? "" : "; ", drops[i].tool, drops[i].rule);
    r.fix += (i == 0 ? "" : " && ") + drops[i].fix;
  }
  return r;
}

// uroce pins nothing by default: ibv_reg_mr on the drop-in, the `uroce` commands and the C++
// API's reg_mr without `pin` only record the range (src/device/device.cpp mlocks only for
// pin = true), so RLIMIT_MEMLOCK, the first thing kernel RDMA needs raised, limits nothing
// here. Saying so is the check; a WARN would send users to fix what does not matter.
CheckResult check_memlock_value(uint64_t soft) {
  CheckResult r{"memlock"};
  const std::string limit =
      soft == RLIM_INFINITY ? std::string("unlimited") : fmt::format("{} KiB", soft / 1024);
  r.detail = fmt::format(
      "ulimit -l {}: not needed, uroce pins no memory (ibv_reg_mr on the drop-in and the uroce "
      "commands do not mlock); only C++ API programs that call reg_mr with pin = true are "
      "limited to it",
      limit);
  return r;
}

CheckResult check_memlock() {
  rlimit l{};
  getrlimit(RLIMIT_MEMLOCK, &l);
  return check_memlock_value(l.rlim_cur);
}

CheckResult check_hugepages(const std::string& meminfo) {
  CheckResult r{"hugepages"};
  std::smatch m;
  static const std::regex kTotal(R"(HugePages_Total:\s+(\d+))");
  static const std::regex kFree(R"(HugePages_Free:\s+(\d+))");
  static const std::regex kSize(R"(Hugepagesize:\s+(\d+) kB)");
  uint64_t total = 0, free = 0, size_kb = 0;
  if (std::regex_search(meminfo, m, kTotal)) total = std::stoull(m[1]);
  if (std::regex_search(meminfo, m, kFree)) free = std::stoull(m[1]);
  if (std::regex_search(meminfo, m, kSize)) size_kb = std::stoull(m[1]);
  r.detail = fmt::format("{} of {} huge pages of {} kB free (uroce does not need them)", free,
                         total, size_kb);
  return r;
}

// Like UdpPort (src/net/udp_port.cpp set_buffer): ask with SO_RCVBUF/SO_SNDBUF, which the
// kernel caps at rmem_max/wmem_max, and when that falls short with SO_RCVBUFFORCE /
// SO_SNDBUFFORCE, which ignore the caps for a process with CAP_NET_ADMIN (root).
SocketBuffers probe_socket_buffers() {
  SocketBuffers b;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return b;
  auto grant = [fd](int opt, int force_opt, uint64_t want) {
    const int bytes = static_cast<int>(want);
    setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
    int got = 0;
    socklen_t len = sizeof got;
    getsockopt(fd, SOL_SOCKET, opt, &got, &len);
    if (got / 2 < bytes && setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) == 0) {
      len = sizeof got;
      getsockopt(fd, SOL_SOCKET, opt, &got, &len);
    }
    return static_cast<uint64_t>(got / 2);  // the kernel reports twice what it grants for data
  };
  b.rcvbuf = grant(SO_RCVBUF, SO_RCVBUFFORCE, kWantRcvbuf);
  b.sndbuf = grant(SO_SNDBUF, SO_SNDBUFFORCE, kWantSndbuf);
  close(fd);
  return b;
}

CheckResult check_socket_buffers(uint64_t rmem_max, uint64_t wmem_max,
                                 const SocketBuffers& granted) {
  CheckResult r{"socket_buffers"};
  r.detail = fmt::format(
      "a uroce socket gets SO_RCVBUF {} (asks {}) and SO_SNDBUF {} (asks {}); "
      "net.core.rmem_max={}, net.core.wmem_max={}",
      granted.rcvbuf, kWantRcvbuf, granted.sndbuf, kWantSndbuf, rmem_max, wmem_max);
  const bool rcv_short = granted.rcvbuf < kWantRcvbuf;
  const bool snd_short = granted.sndbuf < kWantSndbuf;
  if (!rcv_short && !snd_short) {
    if (rmem_max < kWantRcvbuf || wmem_max < kWantSndbuf) {
      r.detail += " (above the limits through SO_RCVBUFFORCE/SO_SNDBUFFORCE: CAP_NET_ADMIN)";
    }
    return r;
  }
  std::string fix;
  if (rcv_short) fix += fmt::format("sysctl -w net.core.rmem_max={}", kWantRcvbuf);
  if (snd_short) {
    fix += fmt::format("{}sysctl -w net.core.wmem_max={}", fix.empty() ? "" : " && ", kWantSndbuf);
  }
  r.level = CheckLevel::kWarn;
  r.detail +=
      "; a capped receive buffer drops bursts (seen as rcvd_seq_err / retransmissions); "
      "uroce run as root is not capped (SO_RCVBUFFORCE)";
  r.fix = fix;
  return r;
}

CheckResult check_governor(const std::vector<std::string>& governors) {
  CheckResult r{"cpu_governor"};
  if (governors.empty()) {
    r.detail = "no cpufreq scaling governor exposed (VM or fixed frequency)";
    return r;
  }
  std::map<std::string, int> count;
  for (const std::string& g : governors) ++count[g];
  std::string seen;
  for (const auto& [g, n] : count) seen += fmt::format("{}{} x{}", seen.empty() ? "" : ", ", g, n);
  r.detail = "scaling governors: " + seen;
  if (count.size() != 1 || count.begin()->first != "performance") {
    r.level = CheckLevel::kWarn;
    r.detail += "; frequency scaling adds latency jitter to a polling stack";
    r.fix = "cpupower frequency-set -g performance";
  }
  return r;
}

// Documentation/networking/ip-sysctl.rst; 3-5 (Accurate ECN) since Linux 6.18.
std::string tcp_ecn_meaning(const std::string& value) {
  static const std::map<std::string, std::string> kMeaning = {
      {"0", "TCP never negotiates ECN"},
      {"1", "TCP requests ECN on outgoing connections and accepts it on incoming ones"},
      {"2",
       "TCP accepts ECN when an incoming connection asks and never requests it, the kernel "
       "default"},
      {"3", "TCP requests and accepts Accurate ECN"},
      {"4", "TCP accepts Accurate ECN on incoming connections, requests classic ECN"},
      {"5", "TCP accepts Accurate ECN on incoming connections, requests none"},
  };
  auto it = kMeaning.find(value);
  return it != kMeaning.end() ? it->second : "a value this uroce does not know";
}

CheckResult check_dscp_ecn(const std::string& tcp_ecn) {
  CheckResult r{"dscp_ecn"};
  r.detail =
      "uroce sends the TOS byte of each QP's traffic_class (default 0: DSCP 0, Not-ECT); "
      "lossless RoCE fabrics usually classify DSCP 26 with ECT(0): traffic_class 106 in the "
      "address vector (ibv_modify_qp ah_attr.grh.traffic_class); with --peer, the tos check "
      "shows what arrives. RoCE's ECN is those ECN bits, marked CE by switches and counted "
      "as np_ecn_marked_roce_packets";
  const std::string v = trim(tcp_ecn);
  if (!v.empty()) {
    r.detail += fmt::format(
        "; net.ipv4.tcp_ecn={} ({}) is TCP's setting and changes nothing for "
        "RoCE",
        v, tcp_ecn_meaning(v));
  }
  return r;
}

std::vector<CheckResult> run_local_checks(const std::string& peer, uint16_t port) {
  std::vector<CheckResult> out;
  std::optional<Route> route;
  if (!peer.empty()) {
    std::string error;
    route = route_to(peer, &error);
    if (!route) out.push_back({"route", CheckLevel::kFail, error, "ip route get " + peer});
  }
  auto ifs = net::discover_interfaces();
  out.push_back(check_mtu(ifs ? ifs.value() : std::vector<net::Interface>{}, route));
  out.push_back(check_gids(route));
  out.push_back(check_firewall(port));
  out.push_back(check_memlock());
  out.push_back(check_hugepages(read_text_file("/proc/meminfo")));
  auto num = [](const std::string& path) {
    const std::string t = trim(read_text_file(path));
    return t.empty() ? uint64_t{0} : std::stoull(t);
  };
  out.push_back(check_socket_buffers(num("/proc/sys/net/core/rmem_max"),
                                     num("/proc/sys/net/core/wmem_max"), probe_socket_buffers()));
  std::vector<std::string> governors;
  for (int cpu = 0; cpu < 4096; ++cpu) {
    const std::string g = trim(
        read_text_file(fmt::format("/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor", cpu)));
    if (g.empty()) break;
    governors.push_back(g);
  }
  out.push_back(check_governor(governors));
  out.push_back(check_dscp_ecn(read_text_file("/proc/sys/net/ipv4/tcp_ecn")));
  return out;
}

}  // namespace uroce::cli
