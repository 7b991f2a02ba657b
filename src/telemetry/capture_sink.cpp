#include "telemetry/capture_sink.hpp"

#include <map>

#include "telemetry/wall_clock.hpp"

namespace uroce::telemetry {

namespace {

std::mutex& sink_registry_mu() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, std::weak_ptr<CaptureSink>>& sink_registry() {
  static std::map<std::string, std::weak_ptr<CaptureSink>> sinks;
  return sinks;
}

}  // namespace

std::shared_ptr<CaptureSink> CaptureSink::open(const std::string& path, std::string* error,
                                               uint16_t udp_port) {
  std::lock_guard lock(sink_registry_mu());
  if (auto existing = sink_registry()[path].lock()) return existing;
  auto sink = std::shared_ptr<CaptureSink>(new CaptureSink());
  if (!sink->writer_.open(path)) {
    if (error != nullptr) *error = "cannot write capture " + path + ": " + sink->writer_.error();
    return nullptr;
  }
  sink->path_ = path;
  sink->udp_port_ = udp_port;
  sink_registry()[path] = sink;
  return sink;
}

CaptureSink::~CaptureSink() {
  std::lock_guard lock(mu_);
  writer_.close();
}

void CaptureSink::write(const transport::PacketMeta& meta, std::span<const uint8_t> roce,
                        TimePoint t) {
  wire::IpContext ip = meta.ip;
  if (ip.dport == wire::kRoceV2Port) ip.dport = udp_port_;
  if (writer_.write_roce(t, ip, meta.tos, roce)) ++frames_;
}

void CaptureSink::write_sent(std::span<const transport::TxSlot> pkts) {
  const TimePoint t = TimePoint(static_cast<int64_t>(unix_ns()));
  std::lock_guard lock(mu_);
  for (const transport::TxSlot& p : pkts) {
    if (p.payload.empty()) {
      write(p.meta, std::span<const uint8_t>(p.buf.data(), p.len), t);
      continue;
    }
    // Its payload by reference: the packet as it left, joined in a scratch buffer.
    joined_.assign(p.buf.begin(), p.buf.begin() + static_cast<std::ptrdiff_t>(p.len));
    transport::join_payload(p, joined_);
    write(p.meta, joined_, t);
  }
}

void CaptureSink::write_received(std::span<const device::RxPacket> pkts) {
  const TimePoint t = TimePoint(static_cast<int64_t>(unix_ns()));
  std::lock_guard lock(mu_);
  for (const device::RxPacket& p : pkts) {
    transport::PacketMeta meta = p.meta;
    if (!meta.ip_id_known) {
      // Unknown to a UDP socket (see the header comment), but the ICRC covers them: record
      // the ID and DF it was computed over (a GSO segment's ID k, rxe's changing IDs), so the
      // capture verifies exactly; a packet no ID explains (corrupted) is recorded with ID 0.
      const auto id = wire::solve_ipv4_id(meta.ip, p.bytes());
      meta.ip.ipv4_id = id ? id->id : 0;
      meta.ip.ipv4_df = id ? id->df : true;
    }
    write(meta, p.bytes(), t);
  }
}

void CaptureSink::flush() {
  std::lock_guard lock(mu_);
  writer_.flush();
}

uint64_t CaptureSink::frames() const {
  std::lock_guard lock(mu_);
  return frames_;
}

}  // namespace uroce::telemetry
