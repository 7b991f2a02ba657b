// Hand-built frames and capture files for the frame, pcap and dump tests: every byte is
// written here from the RFC/IEEE layouts, independently of src/wire/frame.cpp.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace uroce::test {

using Bytes = std::vector<uint8_t>;

inline void put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

inline void put32le(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

inline Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline Bytes udp(uint16_t sport, uint16_t dport, const Bytes& payload) {
  Bytes b;
  put16(b, sport);
  put16(b, dport);
  put16(b, static_cast<uint16_t>(8 + payload.size()));
  put16(b, 0);
  return cat(b, payload);
}

struct Ipv4Fields {
  uint8_t tos = 0;
  uint16_t id = 0x1234;
  uint16_t flags_frag = 0x4000;  // DF
  uint8_t ttl = 64;
  uint8_t proto = 17;
  uint8_t ihl = 5;
  int total_len_delta = 0;  // added to the true total length (to build malformed headers)
  uint8_t src[4] = {10, 77, 0, 3};
  uint8_t dst[4] = {10, 77, 0, 2};
};

inline Bytes ipv4(const Ipv4Fields& f, const Bytes& l4) {
  Bytes b;
  b.push_back(static_cast<uint8_t>(0x40 | f.ihl));
  b.push_back(f.tos);
  const size_t header_len = static_cast<size_t>(f.ihl) * 4;
  put16(b, static_cast<uint16_t>(static_cast<int>(header_len + l4.size()) + f.total_len_delta));
  put16(b, f.id);
  put16(b, f.flags_frag);
  b.push_back(f.ttl);
  b.push_back(f.proto);
  put16(b, 0);  // checksum: decap does not check it
  b.insert(b.end(), f.src, f.src + 4);
  b.insert(b.end(), f.dst, f.dst + 4);
  while (b.size() < header_len) b.push_back(0x01);  // IP options (NOP)
  return cat(b, l4);
}

inline Bytes ipv6(const Bytes& l4, uint8_t next_header = 17, uint8_t traffic_class = 0,
                  uint8_t hop_limit = 64) {
  Bytes b;
  b.push_back(static_cast<uint8_t>(0x60 | traffic_class >> 4));
  b.push_back(static_cast<uint8_t>((traffic_class & 0x0F) << 4 | 0x0A));  // flow label bits
  b.push_back(0xBC);
  b.push_back(0xDE);
  put16(b, static_cast<uint16_t>(l4.size()));
  b.push_back(next_header);
  b.push_back(hop_limit);
  for (int i = 0; i < 16; ++i) b.push_back(static_cast<uint8_t>(i == 0 ? 0xFD : i));  // src
  for (int i = 0; i < 16; ++i) b.push_back(static_cast<uint8_t>(i == 0 ? 0xFD : 0x20 + i));
  return cat(b, l4);
}

// Ethernet II with `tags` (TPID, TCI) pairs between the source MAC and the EtherType.
inline Bytes ethernet(uint16_t ether_type, const Bytes& l3,
                      const std::vector<std::pair<uint16_t, uint16_t>>& tags = {}) {
  Bytes b = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x03};
  for (const auto& [tpid, tci] : tags) {
    put16(b, tpid);
    put16(b, tci);
  }
  put16(b, ether_type);
  return cat(b, l3);
}

// Linux cooked capture v1 (LINKTYPE_LINUX_SLL, 16-byte header).
inline Bytes sll(uint16_t protocol, const Bytes& l3) {
  Bytes b;
  put16(b, 0);  // packet type: to us
  put16(b, 1);  // ARPHRD_ETHER
  put16(b, 6);  // address length
  for (int i = 0; i < 8; ++i) b.push_back(i < 6 ? 0x02 : 0);
  put16(b, protocol);
  return cat(b, l3);
}

// Linux cooked capture v2 (LINKTYPE_LINUX_SLL2, 20-byte header).
inline Bytes sll2(uint16_t protocol, const Bytes& l3) {
  Bytes b;
  put16(b, protocol);
  put16(b, 0);  // reserved
  for (int i = 0; i < 3; ++i) b.push_back(0);
  b.push_back(2);  // interface index 2
  put16(b, 1);     // ARPHRD_ETHER
  b.push_back(4);  // packet type: outgoing
  b.push_back(6);  // address length
  for (int i = 0; i < 8; ++i) b.push_back(i < 6 ? 0x02 : 0);
  return cat(b, l3);
}

// A classic pcap file (microsecond magic, little endian) written byte by byte.
inline Bytes pcap_file(uint32_t link_type, const std::vector<Bytes>& frames) {
  Bytes b;
  put32le(b, 0xA1B2C3D4);
  b.push_back(2);  // version 2.4, little endian
  b.push_back(0);
  b.push_back(4);
  b.push_back(0);
  put32le(b, 0);  // thiszone
  put32le(b, 0);  // sigfigs
  put32le(b, 262144);
  put32le(b, link_type);
  uint32_t usec = 0;
  for (const Bytes& f : frames) {
    put32le(b, 1700000000);
    put32le(b, usec += 10);
    put32le(b, static_cast<uint32_t>(f.size()));
    put32le(b, static_cast<uint32_t>(f.size()));
    b.insert(b.end(), f.begin(), f.end());
  }
  return b;
}

inline void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace uroce::test
