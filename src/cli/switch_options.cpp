// Strict parsing of `uroce switch`'s values (switch_options.hpp).
#include "cli/switch_options.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

namespace uroce::cli {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "key=value,key=value" into pairs; false (and error) on a piece without '='.
bool split_pairs(std::string_view text, std::string_view option,
                 std::vector<std::pair<std::string, std::string>>& out, std::string& error) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string_view piece =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    const size_t eq = piece.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      error = fmt::format("{}: '{}' is not key=value", option, piece);
      return false;
    }
    out.emplace_back(lower(piece.substr(0, eq)), std::string(piece.substr(eq + 1)));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return true;
}

// The comma-separated pieces of `text` (an empty text is one empty piece).
std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  for (;;) {
    const size_t comma = text.find(',', pos);
    out.push_back(
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (comma == std::string_view::npos) return out;
    pos = comma + 1;
  }
}

// A whole decimal number in [lo, hi].
std::optional<uint32_t> parse_uint(std::string_view s, uint32_t lo, uint32_t hi) {
  uint32_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < lo || v > hi) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

bool parse_ecn(std::string_view text, fabric::RedParams& red, std::string& error) {
  std::vector<std::pair<std::string, std::string>> kv;
  if (!split_pairs(text, "--ecn", kv, error)) return false;
  red = {};
  red.enabled = true;
  bool kmin = false, kmax = false, pmax = false;
  for (const auto& [k, v] : kv) {
    std::string e;
    if (k == "kmin" || k == "kmax") {
      const auto bytes = parse_size(v, e);
      if (!bytes) {
        error = fmt::format("--ecn {}: {}", k, e);
        return false;
      }
      (k == "kmin" ? red.kmin_bytes : red.kmax_bytes) = *bytes;
      (k == "kmin" ? kmin : kmax) = true;
    } else if (k == "pmax") {
      double p = 0;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), p);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || !(p > 0) || p > 1) {
        error =
            fmt::format("--ecn pmax '{}' is not valid; use a probability in (0, 1], e.g. 0.2", v);
        return false;
      }
      red.pmax = p;
      pmax = true;
    } else if (k == "at") {
      if (v == "enqueue") {
        red.at = fabric::MarkPoint::kEnqueue;
      } else if (v == "dequeue") {
        red.at = fabric::MarkPoint::kDequeue;
      } else {
        error = fmt::format("--ecn at '{}' is not valid; use enqueue or dequeue", v);
        return false;
      }
    } else {
      error = fmt::format("--ecn: unknown key '{}'; use kmin, kmax, pmax, at", k);
      return false;
    }
  }
  if (!kmin || !kmax || !pmax) {
    error = "--ecn needs kmin, kmax and pmax, e.g. kmin=20KB,kmax=200KB,pmax=0.2";
    return false;
  }
  if (red.kmax_bytes <= red.kmin_bytes) {
    error =
        fmt::format("--ecn: kmax ({} B) must be above kmin ({} B)", red.kmax_bytes, red.kmin_bytes);
    return false;
  }
  return true;
}

bool parse_pfc(std::string_view text, fabric::PfcParams& pfc, std::string& error) {
  std::vector<std::pair<std::string, std::string>> kv;
  if (!split_pairs(text, "--pfc", kv, error)) return false;
  bool xoff = false, xon = false;
  for (const auto& [k, v] : kv) {
    uint64_t* field = k == "xoff"       ? &pfc.xoff_bytes
                      : k == "xon"      ? &pfc.xon_bytes
                      : k == "headroom" ? &pfc.headroom_bytes
                                        : nullptr;
    if (field == nullptr) {
      error = fmt::format("--pfc: unknown key '{}'; use xoff, xon, headroom", k);
      return false;
    }
    std::string e;
    const auto bytes = parse_size(v, e);
    if (!bytes) {
      error = fmt::format("--pfc {}: {}", k, e);
      return false;
    }
    *field = *bytes;
    xoff = xoff || k == "xoff";
    xon = xon || k == "xon";
  }
  if (!xoff || !xon) {
    error = "--pfc needs xoff and xon, e.g. xoff=64KB,xon=32KB";
    return false;
  }
  if (pfc.xoff_bytes == 0 || pfc.xon_bytes > pfc.xoff_bytes) {
    error = fmt::format("--pfc: xoff ({} B) must be above 0 and xon ({} B) not above it",
                        pfc.xoff_bytes, pfc.xon_bytes);
    return false;
  }
  return true;
}

bool parse_priorities(std::string_view text, std::string_view option, PriorityMask& mask,
                      std::string& error) {
  for (const std::string_view piece : split_commas(text)) {
    const auto p = parse_uint(piece, 0, fabric::kMaxPriorities - 1);
    if (!p) {
      error = fmt::format("{}: priority '{}' is not valid; use 0..7, e.g. 3 or 3,4", option, piece);
      return false;
    }
    mask = static_cast<PriorityMask>(mask | 1u << *p);
  }
  return true;
}

bool parse_pfc_arg(std::string_view text, fabric::PfcParams& pfc, bool& thresholds,
                   PriorityMask& lossless, std::string& error) {
  std::string kv;
  for (const std::string_view piece : split_commas(text)) {
    if (piece.find('=') != std::string_view::npos) {
      if (!kv.empty()) kv += ',';
      kv += piece;
    } else if (const auto p = parse_uint(piece, 0, fabric::kMaxPriorities - 1)) {
      lossless = static_cast<PriorityMask>(lossless | 1u << *p);
    } else {
      error = fmt::format(
          "--pfc: '{}' is neither a priority (0..7) nor key=value; use e.g. 3,4 or "
          "xoff=64KB,xon=32KB",
          piece);
      return false;
    }
  }
  if (kv.empty()) return true;
  thresholds = true;
  return parse_pfc(kv, pfc, error);
}

DscpMap default_dscp_map() {
  DscpMap m{};
  for (size_t d = 0; d < m.size(); ++d) m[d] = static_cast<uint8_t>(d >> 3);
  return m;
}

bool parse_prio_map(std::string_view text, DscpMap& map, std::string& error) {
  for (const std::string_view piece : split_commas(text)) {
    const size_t eq = piece.find('=');
    if (eq == std::string_view::npos) {
      error = fmt::format("--prio-map: '{}' is not DSCP=PRIO, e.g. 26=3,48=6", piece);
      return false;
    }
    const auto dscp = parse_uint(piece.substr(0, eq), 0, 63);
    if (!dscp) {
      error = fmt::format("--prio-map: DSCP '{}' is not valid; use 0..63", piece.substr(0, eq));
      return false;
    }
    const auto prio = parse_uint(piece.substr(eq + 1), 0, fabric::kMaxPriorities - 1);
    if (!prio) {
      error = fmt::format("--prio-map: priority '{}' is not valid; use 0..7", piece.substr(eq + 1));
      return false;
    }
    map[*dscp] = static_cast<uint8_t>(*prio);
  }
  return true;
}

bool parse_dwrr(std::string_view text, DwrrWeights& w, std::string& error) {
  w = {};
  for (const std::string_view piece : split_commas(text)) {
    if (w.count == fabric::kMaxPriorities) {
      error = "--dwrr: more than 8 weights; give one per priority, e.g. 1,1,1,4";
      return false;
    }
    const auto v = parse_uint(piece, 1, 1000);
    if (!v) {
      error = fmt::format("--dwrr: weight '{}' is not valid; use an integer in 1..1000", piece);
      return false;
    }
    w.weight[w.count++] = *v;
  }
  return true;
}

bool parse_udp_ports(std::string_view text, std::string_view option, UdpPortSet& ports,
                     std::string& error) {
  const auto bad = [&](std::string_view piece) {
    error = fmt::format(
        "{}: '{}' is not a UDP port or range; use e.g. 4791, 4791-4799 or "
        "4791,5000 (ports 1..65535)",
        option, piece);
    return false;
  };
  if (text.empty()) return bad(text);
  for (const std::string_view piece : split_commas(text)) {
    const size_t dash = piece.find('-');
    const auto lo = parse_uint(piece.substr(0, dash), 1, 65535);
    const auto hi =
        dash == std::string_view::npos ? lo : parse_uint(piece.substr(dash + 1), 1, 65535);
    if (!lo || !hi || *hi < *lo) return bad(piece);
    for (uint32_t p = *lo; p <= *hi; ++p) ports.set(p);
  }
  return true;
}

}  // namespace uroce::cli
