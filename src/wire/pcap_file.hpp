// Reading and writing capture files through libpcap (which reads both pcap and pcapng).
// Used by `uroce dump`, by `--capture`, and by tests that replay real Soft-RoCE traffic.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "uroce/vocab/time.hpp"
#include "wire/frame.hpp"

namespace uroce::wire {

struct CapturedFrame {
  uint64_t number = 0;             // 1-based, counting every frame in the file
  TimePoint time{};                // capture timestamp since the Unix epoch
  uint32_t original_len = 0;       // length on the wire
  std::span<const uint8_t> bytes;  // valid until the next next() call
};

class PcapReader {
 public:
  PcapReader();
  ~PcapReader();
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;

  // Opens a pcap or pcapng file. On failure returns false and error() says why.
  [[nodiscard]] bool open(const std::string& path);
  [[nodiscard]] LinkType link_type() const;
  // Next frame; false at the end of the file or on a damaged/truncated file (then error()
  // is non-empty and says where it stopped).
  [[nodiscard]] bool next(CapturedFrame& out);
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

// Writes Ethernet frames (LINKTYPE_ETHERNET) with nanosecond timestamps.
class PcapWriter {
 public:
  PcapWriter();
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  [[nodiscard]] bool open(const std::string& path);
  // Writes one RoCE packet wrapped by encap_frame(). Not thread-safe; callers serialise.
  bool write_roce(TimePoint time, const IpContext& ip, uint8_t tos, std::span<const uint8_t> roce);
  void write_frame(TimePoint time, std::span<const uint8_t> frame);
  void flush();
  void close();
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

}  // namespace uroce::wire
