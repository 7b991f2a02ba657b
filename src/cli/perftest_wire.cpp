// perftest's out-of-band messages: see perftest_wire.hpp.
#include "cli/perftest_wire.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstring>

namespace uroce::cli::perftest {
namespace {

template <size_t N>
std::array<char, N> big_endian(uint64_t value) {
  std::array<char, N> out{};
  for (size_t i = 0; i < N; ++i) {
    out[i] = static_cast<char>((value >> (8 * (N - 1 - i))) & 0xff);
  }
  return out;
}

template <size_t N>
uint64_t from_big_endian(std::span<const char, N> in) {
  uint64_t v = 0;
  for (size_t i = 0; i < N; ++i) v = v << 8 | static_cast<uint8_t>(in[i]);
  return v;
}

// One hex field of exactly `width` digits followed by ':' at `pos`; advances `pos`.
bool take_hex(std::string_view text, size_t& pos, size_t width, uint64_t& value) {
  if (pos + width + 1 > text.size() || text[pos + width] != ':') return false;
  const std::string_view digits = text.substr(pos, width);
  if (!std::all_of(digits.begin(), digits.end(),
                   [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
    return false;
  }
  const auto r = std::from_chars(digits.data(), digits.data() + width, value, 16);
  if (r.ec != std::errc() || r.ptr != digits.data() + width) return false;
  pos += width + 1;
  return true;
}

}  // namespace

VersionMsg encode_version(bool uroce_marker) {
  VersionMsg v{};
  std::memcpy(v.data(), kVersion.data(), kVersion.size());
  if (uroce_marker) {
    static_assert(kVersion.size() + 1 + kUroceMarker.size() < kVersionSize);
    std::memcpy(v.data() + kVersion.size() + 1, kUroceMarker.data(), kUroceMarker.size());
  }
  return v;
}

std::optional<PeerVersion> decode_version(std::span<const char, kVersionSize> msg) {
  const auto nul = std::find(msg.begin(), msg.end(), '\0');
  if (nul == msg.begin() || nul == msg.end()) return std::nullopt;
  PeerVersion out;
  out.text.assign(msg.begin(), nul);
  const bool numeric = std::all_of(out.text.begin(), out.text.end(),
                                   [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  if (!numeric || out.text.front() == '.') return std::nullopt;
  const auto r = std::from_chars(out.text.data(), out.text.data() + out.text.size(), out.number);
  if (r.ec != std::errc()) return std::nullopt;
  const size_t after = static_cast<size_t>(nul - msg.begin()) + 1;
  out.uroce = after + kUroceMarker.size() <= kVersionSize &&
              std::string_view(msg.data() + after, kUroceMarker.size()) == kUroceMarker;
  return out;
}

IntMsg encode_int(int32_t value) {
  return big_endian<kIntSize>(static_cast<uint32_t>(value));
}

int32_t decode_int(std::span<const char, kIntSize> msg) {
  return static_cast<int32_t>(static_cast<uint32_t>(from_big_endian<kIntSize>(msg)));
}

MtuMsg encode_mtu(int mtu_enum) {
  return {static_cast<char>('0' + mtu_enum), '\0'};
}

std::optional<int> decode_mtu(std::span<const char, kMtuSize> msg) {
  if (msg[0] < '1' || msg[0] > '5' || msg[1] != '\0') return std::nullopt;
  return msg[0] - '0';
}

KeyMsg encode_keys(const Keys& k) {
  std::string text =
      fmt::format("{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:", k.lid & 0xffff,
                  k.out_reads & 0xffff, k.qpn & 0xffffff, k.psn & 0xffffff, k.rkey, k.vaddr);
  for (uint8_t b : k.gid) text += fmt::format("{:02x}:", b);
  text += fmt::format("{:08x}:", k.srqn);
  KeyMsg out{};
  std::memcpy(out.data(), text.data(), std::min(text.size(), kKeySize - 1));
  return out;
}

std::optional<Keys> decode_keys(std::span<const char, kKeySize> msg) {
  if (msg[kKeySize - 1] != '\0') return std::nullopt;
  const std::string_view text(msg.data(), kKeySize - 1);
  size_t pos = 0;
  uint64_t lid = 0, reads = 0, qpn = 0, psn = 0, rkey = 0, vaddr = 0, srqn = 0;
  Keys k;
  if (!take_hex(text, pos, 4, lid) || !take_hex(text, pos, 4, reads) ||
      !take_hex(text, pos, 6, qpn) || !take_hex(text, pos, 6, psn) ||
      !take_hex(text, pos, 8, rkey) || !take_hex(text, pos, 16, vaddr)) {
    return std::nullopt;
  }
  for (uint8_t& b : k.gid) {
    uint64_t v = 0;
    if (!take_hex(text, pos, 2, v)) return std::nullopt;
    b = static_cast<uint8_t>(v);
  }
  if (!take_hex(text, pos, 8, srqn) || pos != text.size()) return std::nullopt;
  k.lid = static_cast<uint32_t>(lid);
  k.out_reads = static_cast<uint32_t>(reads);
  k.qpn = static_cast<uint32_t>(qpn);
  k.psn = static_cast<uint32_t>(psn);
  k.rkey = static_cast<uint32_t>(rkey);
  k.vaddr = vaddr;
  k.srqn = static_cast<uint32_t>(srqn);
  return k;
}

ReportField encode_u64(uint64_t value) {
  return big_endian<kReportFieldSize>(value);
}

uint64_t decode_u64(std::span<const char, kReportFieldSize> msg) {
  return from_big_endian<kReportFieldSize>(msg);
}

ReportField encode_double(double value) {
  return big_endian<kReportFieldSize>(std::bit_cast<uint64_t>(value));
}

double decode_double(std::span<const char, kReportFieldSize> msg) {
  return std::bit_cast<double>(from_big_endian<kReportFieldSize>(msg));
}

}  // namespace uroce::cli::perftest
