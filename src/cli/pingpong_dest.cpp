// rdma-core pingpong address messages: see pingpong_dest.hpp.
#include "cli/pingpong_dest.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <charconv>
#include <cstring>

namespace uroce::cli {
namespace {

std::optional<uint32_t> parse_hex(std::string_view text, uint32_t max) {
  if (text.empty() || text.size() > 8) return std::nullopt;
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc() || end != text.data() + text.size() || value > max) return std::nullopt;
  return value;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string gid_to_wire(const GidBytes& gid) {
  std::string out;
  out.reserve(32);
  for (uint8_t b : gid) fmt::format_to(std::back_inserter(out), "{:02x}", b);
  return out;
}

std::optional<GidBytes> wire_to_gid(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  GidBytes gid{};
  for (size_t i = 0; i < gid.size(); ++i) {
    const int hi = hex_digit(text[2 * i]);
    const int lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    gid[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return gid;
}

PingpongMsg format_pingpong_dest(const PingpongDest& dest) {
  PingpongMsg msg{};
  const std::string text =
      fmt::format("{:04x}:{:06x}:{:06x}:{}", dest.lid, dest.qpn, dest.psn, gid_to_wire(dest.gid));
  std::memcpy(msg.data(), text.data(), std::min(text.size(), msg.size() - 1));
  return msg;
}

std::optional<PingpongDest> parse_pingpong_dest(std::span<const char> msg) {
  std::string_view text(msg.data(), msg.size());
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) text = text.substr(0, nul);
  PingpongDest dest;
  uint32_t* fields[] = {&dest.lid, &dest.qpn, &dest.psn};
  const uint32_t limits[] = {0xffff, 0xffffff, 0xffffff};
  for (size_t i = 0; i < 3; ++i) {
    const size_t colon = text.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const auto value = parse_hex(text.substr(0, colon), limits[i]);
    if (!value) return std::nullopt;
    *fields[i] = *value;
    text.remove_prefix(colon + 1);
  }
  const auto gid = wire_to_gid(text);
  if (!gid) return std::nullopt;
  dest.gid = *gid;
  return dest;
}

std::string gid_to_text(const GidBytes& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  in6_addr addr{};
  std::memcpy(&addr, gid.data(), gid.size());
  inet_ntop(AF_INET6, &addr, buf, sizeof buf);
  return buf;
}

std::string format_address_line(std::string_view who, const PingpongDest& dest) {
  // rdma-core: "  %s address:  LID" for local and "  %s address: LID" for remote, i.e. the
  // field after "address:" starts in the same column for both words.
  const std::string label = fmt::format("{} address:", who);
  return fmt::format("  {:<16}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}", label, dest.lid,
                     dest.qpn, dest.psn, gid_to_text(dest.gid));
}

}  // namespace uroce::cli
