// Packets in flight in the simulator: a pool of fixed-size buffers (one RoCE v2 UDP payload,
// BTH .. ICRC, up to a 4096-byte MTU plus headers) with their metadata, recycled through a
// free list. The engine builds each packet straight into a pool buffer (poll_tx) and reads
// it from there (on_packet); switches move only the index. The pool grows in chunks when
// more packets are in flight than ever before and never shrinks, so the steady state
// allocates nothing per packet.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "transport/engine.hpp"

namespace uroce::sim {

inline constexpr size_t kPacketBufBytes = 4096 + 192;

struct SimPacket {
  transport::PacketMeta meta;
  uint32_t len = 0;         // RoCE bytes (BTH .. ICRC)
  uint32_t wire_bytes = 0;  // what it occupies on links and in buffers (wire_bytes())
  uint32_t src_host = 0;
  uint32_t dst_host = 0;
  uint32_t channel = 0;     // the link direction it is on (conservation counters)
  uint8_t priority = 0;     // 802.1p class: DSCP >> 3 (the engine writes DSCP << 2 | ECN)
  bool corrupted = false;   // a link flipped a bit: the receiver's ICRC check drops it
  uint8_t* data = nullptr;  // kPacketBufBytes
};

class PacketPool {
 public:
  uint32_t alloc() {
    if (free_.empty()) grow();
    const uint32_t id = free_.back();
    free_.pop_back();
    ++in_use_;
    return id;
  }
  void release(uint32_t id) {
    free_.push_back(id);
    --in_use_;
  }
  SimPacket& operator[](uint32_t id) { return packets_[id]; }
  [[nodiscard]] size_t in_use() const { return in_use_; }
  [[nodiscard]] std::span<uint8_t> buffer(uint32_t id) {
    return {packets_[id].data, kPacketBufBytes};
  }

 private:
  static constexpr size_t kChunk = 1024;
  void grow() {
    chunks_.push_back(std::make_unique<uint8_t[]>(kChunk * kPacketBufBytes));
    const size_t base = packets_.size();
    packets_.resize(base + kChunk);
    free_.reserve(packets_.size());
    for (size_t i = 0; i < kChunk; ++i) {
      packets_[base + i].data = chunks_.back().get() + i * kPacketBufBytes;
    }
    for (size_t i = kChunk; i-- > 0;) free_.push_back(static_cast<uint32_t>(base + i));
  }

  std::vector<SimPacket> packets_;
  std::vector<std::unique_ptr<uint8_t[]>> chunks_;
  std::vector<uint32_t> free_;
  size_t in_use_ = 0;
};

// Bytes a RoCE v2 packet of `roce_len` (BTH .. ICRC) takes on an Ethernet link: UDP header 8,
// IPv4 header 20, Ethernet header 14 and FCS 4 (the frame, 46), plus preamble and SFD 8 and
// the minimum inter-frame gap 12 (20): a frame's time on the wire is roce_len + 66 bytes at
// the line rate. Switch buffers count the same number (a simplification: real buffers hold
// the 46-byte-overhead frame; the 20 bytes make the per-packet link time exact).
inline constexpr uint32_t kWireOverheadBytes = 66;
[[nodiscard]] inline uint32_t wire_bytes(uint32_t roce_len) {
  return roce_len + kWireOverheadBytes;
}

}  // namespace uroce::sim
