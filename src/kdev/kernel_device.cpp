#include "kdev/kernel_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "kdev/kernel_verbs.hpp"

namespace uroce::kdev {
namespace {

namespace fs = std::filesystem;

// A sysfs value without its trailing newline; "" when the file cannot be read (absent, or a
// counter the driver refuses to read without privileges).
std::string read_value(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  std::string v = s.str();
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ' || v.back() == '\t')) v.pop_back();
  return v;
}

std::vector<std::string> dir_names(const fs::path& p) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "4: ACTIVE" -> {4, "ACTIVE"}.
std::pair<int, std::string> numbered(const std::string& v) {
  const size_t colon = v.find(':');
  if (colon == std::string::npos) return {0, v};
  const std::string num = v.substr(0, colon);
  std::string name = v.substr(colon + 1);
  while (!name.empty() && name.front() == ' ') name.erase(name.begin());
  return {all_digits(num) ? std::stoi(num) : 0, name};
}

// sysfs' GID spelling: eight groups of four hex digits.
std::optional<GidBytes> parse_gid(const std::string& text) {
  GidBytes g{};
  size_t pos = 0;
  for (int group = 0; group < 8; ++group) {
    if (pos + 4 > text.size()) return std::nullopt;
    unsigned v = 0;
    for (size_t i = pos; i < pos + 4; ++i) {
      const char c = text[i];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + static_cast<unsigned>(d);
    }
    g[static_cast<size_t>(group) * 2] = static_cast<uint8_t>(v >> 8);
    g[static_cast<size_t>(group) * 2 + 1] = static_cast<uint8_t>(v & 0xff);
    pos += 4;
    if (group < 7) {
      if (pos >= text.size() || text[pos] != ':') return std::nullopt;
      ++pos;
    }
  }
  return g;
}

std::string ipv4_of(const GidBytes& g) {
  for (int i = 0; i < 10; ++i) {
    if (g[static_cast<size_t>(i)] != 0) return {};
  }
  if (g[10] != 0xff || g[11] != 0xff) return {};
  return fmt::format("{}.{}.{}.{}", g[12], g[13], g[14], g[15]);
}

std::vector<std::pair<std::string, uint64_t>> read_counter_dir(const fs::path& dir) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const std::string& name : dir_names(dir)) {
    // hw_counters/lifespan is the refresh period of the others (ms), not a counter.
    if (name == "lifespan") continue;
    const std::string v = read_value(dir / name);
    if (!all_digits(v)) continue;
    out.emplace_back(name, std::strtoull(v.c_str(), nullptr, 10));
  }
  return out;
}

std::string driver_of(const fs::path& dev, const std::string& name,
                      const std::vector<KernelPort>& ports) {
  std::error_code ec;
  const fs::path link = fs::read_symlink(dev / "device" / "driver", ec);
  if (!ec && !link.filename().empty()) return link.filename().string();
  // rxe devices are virtual (no device/ link) and may be named anything (`rdma link add NAME
  // type rxe`); ack_deferred is a counter only rxe has.
  for (const KernelPort& p : ports) {
    for (const auto& [n, v] : p.hw_counters) {
      if (n == "ack_deferred") return "rxe";
    }
  }
  if (name.starts_with("rxe")) return "rxe";
  if (name.starts_with("mlx5")) return "mlx5_core";
  return {};
}

KernelPort read_port(const std::string& root, const std::string& dev_name, const fs::path& dir,
                     uint8_t num, bool query_mtu) {
  KernelPort p;
  p.port_num = num;
  std::tie(p.state, p.state_name) = numbered(read_value(dir / "state"));
  std::tie(p.phys_state, p.phys_state_name) = numbered(read_value(dir / "phys_state"));
  p.link_layer = read_value(dir / "link_layer");
  p.rate = read_value(dir / "rate");
  const std::string active = read_value(dir / "active_mtu");
  const std::string max = read_value(dir / "max_mtu");
  if (all_digits(active)) {
    p.active_mtu = static_cast<uint32_t>(std::stoul(active));
    p.max_mtu = all_digits(max) ? static_cast<uint32_t>(std::stoul(max)) : 0;
    p.mtu_source = "sysfs file";
  } else if (query_mtu) {
    if (auto m = query_port_mtu(dev_name, num)) {
      p.active_mtu = m->active_mtu;
      p.max_mtu = m->max_mtu;
      p.mtu_source = "ibv_query_port";
    }
  }
  std::vector<uint32_t> indexes;
  for (const std::string& n : dir_names(dir / "gids")) {
    if (all_digits(n)) indexes.push_back(static_cast<uint32_t>(std::stoul(n)));
  }
  std::sort(indexes.begin(), indexes.end());
  for (uint32_t i : indexes) {
    const std::string idx = std::to_string(i);
    const auto gid = parse_gid(read_value(dir / "gids" / idx));
    if (!gid || *gid == GidBytes{}) continue;
    KernelGid g;
    g.index = i;
    g.gid = *gid;
    g.type = read_value(dir / "gid_attrs" / "types" / idx);
    g.ndev = read_value(dir / "gid_attrs" / "ndevs" / idx);
    g.ipv4 = ipv4_of(*gid);
    p.gids.push_back(std::move(g));
  }
  for (const KernelGid& g : p.gids) {
    if (!g.ndev.empty()) {
      p.netdev = g.ndev;
      break;
    }
  }
  read_port_counters(root, dev_name, p);
  return p;
}

fs::path device_dir(const std::string& root, const std::string& name) {
  return fs::path(root) / "class" / "infiniband" / name;
}

}  // namespace

std::string sysfs_root() {
  const char* r = std::getenv("UROCE_SYSFS_ROOT");
  return r != nullptr && *r != '\0' ? std::string(r) : std::string("/sys");
}

void read_port_counters(const std::string& root, const std::string& dev, KernelPort& port) {
  const fs::path dir = device_dir(root, dev) / "ports" / std::to_string(port.port_num);
  port.hw_counters = read_counter_dir(dir / "hw_counters");
  port.counters = read_counter_dir(dir / "counters");
}

std::optional<KernelDevice> read_kernel_device(const std::string& root, const std::string& name,
                                               bool query_mtu) {
  const fs::path dir = device_dir(root, name);
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || !fs::is_directory(dir, ec)) {
    return std::nullopt;
  }
  KernelDevice d;
  d.name = name;
  d.node_type = read_value(dir / "node_type");
  d.node_guid = read_value(dir / "node_guid");
  d.sys_image_guid = read_value(dir / "sys_image_guid");
  d.fw_ver = read_value(dir / "fw_ver");
  d.hca_type = read_value(dir / "hca_type");
  d.board_id = read_value(dir / "board_id");
  std::vector<uint32_t> nums;
  for (const std::string& n : dir_names(dir / "ports")) {
    if (all_digits(n) && n.size() < 4) nums.push_back(static_cast<uint32_t>(std::stoul(n)));
  }
  std::sort(nums.begin(), nums.end());
  for (uint32_t n : nums) {
    if (n == 0 || n > 255) continue;
    d.ports.push_back(read_port(root, name, dir / "ports" / std::to_string(n),
                                static_cast<uint8_t>(n), query_mtu));
  }
  d.driver = driver_of(dir, name, d.ports);
  return d;
}

std::vector<KernelDevice> read_kernel_devices(const std::string& root, bool query_mtu) {
  std::vector<KernelDevice> out;
  for (const std::string& name : dir_names(fs::path(root) / "class" / "infiniband")) {
    auto d = read_kernel_device(root, name, query_mtu);
    // uroce's own devices as `uroce exec` shows them to a program: not kernel devices.
    if (d && d->hca_type != "uroce") out.push_back(std::move(*d));
  }
  return out;
}

KernelNetdev read_netdev(const std::string& root, const std::string& name) {
  KernelNetdev n;
  n.name = name;
  const fs::path dir = fs::path(root) / "class" / "net" / name;
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || !fs::is_directory(dir, ec)) return n;
  n.exists = true;
  const std::string mtu = read_value(dir / "mtu");
  n.mtu = all_digits(mtu) ? static_cast<uint32_t>(std::stoul(mtu)) : 0;
  n.operstate = read_value(dir / "operstate");
  return n;
}

std::string kernel_device_names(const std::vector<KernelDevice>& devices) {
  std::string out;
  for (const KernelDevice& d : devices) out += (out.empty() ? "" : ", ") + d.name;
  return out.empty() ? "none" : out;
}

const KernelGid* roce_v2_ipv4_gid(const KernelPort& port, std::string_view netdev) {
  for (const KernelGid& g : port.gids) {
    if (g.roce_v2() && !g.ipv4.empty() && g.ndev == netdev) return &g;
  }
  return nullptr;
}

std::string gid_text(const GidBytes& g) {
  return fmt::format(
      "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:"
      "{:02x}{:02x}",
      g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14],
      g[15]);
}

uint32_t mtu_bytes(int e) {
  return e >= 1 && e <= 5 ? 128u << e : 0;
}

int mtu_enum(uint32_t bytes) {
  for (int e = 1; e <= 5; ++e) {
    if (mtu_bytes(e) == bytes) return e;
  }
  return 0;
}

}  // namespace uroce::kdev
