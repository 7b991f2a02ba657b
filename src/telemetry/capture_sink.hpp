// CaptureSink: writes every RoCE packet a device sends and receives to a pcap file as an
// Ethernet/IPv4-or-IPv6/UDP frame that tshark and `uroce dump` dissect (wire::PcapWriter,
// wire::encap_frame). One sink per file per process: several devices of one process given
// the same path (UROCE_CAPTURE) share it, so both directions of a loopback test land in one
// file in order.
//
// IPv4 ID: RoCE v2 masks TTL, TOS, checksum and flow label out of the ICRC, not the ID
// (docs/wire-facts.md), so a frame must carry the ID the ICRC was computed with to verify.
// Sent frames get ID 0 + DF, which is what the engine seals its ICRC for (the port corrects a
// UDP GSO segment's ICRC for the ID the kernel gives it on the wire; the capture keeps the
// packet as sealed). A UDP socket does not see a received packet's ID, but the ICRC covers it:
// received frames get the ID and DF that explain their ICRC (wire::solve_ipv4_id: a GSO
// segment's k, rxe's changing IDs), so they verify exactly too; a corrupted packet, which no
// ID explains, is written with ID 0 + DF and shows icrc_ok false.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "device/packet_io.hpp"
#include "transport/engine.hpp"
#include "wire/pcap_file.hpp"

namespace uroce::telemetry {

class CaptureSink {
 public:
  // The process' sink for `path` (created and truncated on first use); null with *error.
  // `udp_port`: the port the device really uses. The engine sees every packet as sent to
  // 4791 (src/net/udp_device.hpp translates), so frames get `udp_port` written instead:
  // the capture shows what was on the wire (decode it with `uroce dump --port N`).
  static std::shared_ptr<CaptureSink> open(const std::string& path, std::string* error,
                                           uint16_t udp_port = wire::kRoceV2Port);
  ~CaptureSink();

  void write_sent(std::span<const transport::TxSlot> pkts);
  void write_received(std::span<const device::RxPacket> pkts);
  void flush();
  [[nodiscard]] uint64_t frames() const;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  CaptureSink() = default;
  void write(const transport::PacketMeta& meta, std::span<const uint8_t> roce, TimePoint t);

  mutable std::mutex mu_;
  wire::PcapWriter writer_;
  std::string path_;
  uint16_t udp_port_ = wire::kRoceV2Port;
  uint64_t frames_ = 0;
  std::vector<uint8_t> joined_;  // a sent packet whose payload was by reference, under mu_
};

}  // namespace uroce::telemetry
