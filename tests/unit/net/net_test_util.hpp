// Helpers shared by the uroce_net tests: BTH-shaped payloads, a temporary registry directory,
// and receive-with-timeout loops. Every test uses its own fixed UDP port (24791 + n) or port 0,
// so tests run in parallel with each other and with a demo on 4791.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "net/udp_port.hpp"

namespace uroce::net::testing {

inline IpAddr ip(const char* text) {
  return IpAddr::parse(text).value();
}

// A 12-byte BTH (RC SEND Only to `dqpn`) plus `extra` payload bytes.
inline std::vector<uint8_t> bth_packet(uint32_t dqpn, size_t extra = 4, uint8_t fill = 0) {
  std::vector<uint8_t> p(12 + extra, fill);
  p[0] = 0x04;
  p[1] = 0;
  p[2] = p[3] = 0xff;
  p[4] = 0;
  p[5] = static_cast<uint8_t>(dqpn >> 16);
  p[6] = static_cast<uint8_t>(dqpn >> 8);
  p[7] = static_cast<uint8_t>(dqpn);
  return p;
}

inline uint32_t dqpn_of(const std::vector<uint8_t>& p) {
  return (uint32_t{p[5]} << 16) | (uint32_t{p[6]} << 8) | p[7];
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/uroce-net-test-XXXXXX";
    if (const char* made = mkdtemp(tmpl)) path_ = made;  // empty path: mkdtemp failed
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One received datagram, copied out.
struct Got {
  std::vector<uint8_t> bytes;
  RxDatagram meta;
};

// Receives from `port` until `count` datagrams arrived or `timeout` passed.
inline std::vector<Got> receive(UdpPort& port, size_t count, std::chrono::milliseconds timeout) {
  std::vector<Got> out;
  std::vector<std::vector<uint8_t>> bufs(UdpPort::kMaxBurst, std::vector<uint8_t>(9000));
  std::vector<RxDatagram> rx(UdpPort::kMaxBurst);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < rx.size(); ++i) rx[i].buf = bufs[i];
    size_t n = port.recv_burst(rx);
    // rx[i].buf: the caller's buffer, or the port's own memory (UDP GRO hands out in place).
    for (size_t i = 0; i < n; ++i)
      out.push_back(
          {std::vector<uint8_t>(rx[i].buf.begin(), rx[i].buf.begin() + rx[i].len), rx[i]});
    if (n == 0) (void)port.wait(std::chrono::milliseconds(5));
  }
  return out;
}

// A datagram of `bytes` to `dst`:`dport` (the bytes must outlive it).
inline TxDatagram to(const IpAddr& dst, uint16_t dport, std::span<const uint8_t> bytes,
                     uint8_t tos = 0) {
  TxDatagram d;
  d.data = bytes;
  d.ip.ipv6 = !dst.is_v4();
  d.ip.dst = dst.bytes;
  d.ip.dport = dport;
  d.tos = tos;
  return d;
}
inline TxDatagram to(const UdpPort& rx, std::span<const uint8_t> bytes, uint8_t tos = 0) {
  return to(rx.local(), rx.port(), bytes, tos);
}

// One datagram to `dst`:`dport` (or `rx`) per packet, in order.
inline std::vector<TxDatagram> to_all(const IpAddr& dst, uint16_t dport,
                                      const std::vector<std::vector<uint8_t>>& packets,
                                      uint8_t tos = 0) {
  std::vector<TxDatagram> burst;
  for (const auto& p : packets) burst.push_back(to(dst, dport, p, tos));
  return burst;
}
inline std::vector<TxDatagram> to_all(const UdpPort& rx,
                                      const std::vector<std::vector<uint8_t>>& packets,
                                      uint8_t tos = 0) {
  return to_all(rx.local(), rx.port(), packets, tos);
}

inline size_t send_one(UdpPort& from, const std::vector<uint8_t>& bytes, const IpAddr& dst,
                       uint16_t dport, uint8_t tos = 0, uint16_t sport = 0) {
  TxDatagram d = to(dst, dport, bytes, tos);
  d.ip.sport = sport;
  return from.send_burst({&d, 1});
}

inline UdpPortConfig unshared(const char* addr, uint16_t port = 0) {
  UdpPortConfig c;
  c.local = ip(addr);
  c.port = port;
  c.share = false;
  return c;
}

inline UdpPortConfig shared(const char* addr, uint16_t port, const std::string& dir,
                            int slot = kAnySlot) {
  UdpPortConfig c;
  c.local = ip(addr);
  c.port = port;
  c.registry_dir = dir;
  c.slot = slot;
  return c;
}

}  // namespace uroce::net::testing
