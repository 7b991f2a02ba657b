// Shared pieces of the engine fuzz targets (responder_fuzz.cpp, completer_fuzz.cpp): one
// engine in virtual time, memory with guard bytes around every registered range, QPs brought
// to RTS against an imaginary peer, packets built from fuzzer choices (so most of them pass
// the ICRC and header checks and reach the transport logic), and the invariant failure.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "transport/engine.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::fuzz {

// Reads fuzzer input front to back (unlike libFuzzer's FuzzedDataProvider, which takes
// integers from the end), so seed inputs can be written by a script: a range of width w
// takes as many bytes as w needs, big endian; past the end every value is the minimum.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  [[nodiscard]] size_t remaining_bytes() const { return size_ - pos_; }

  template <typename T>
  T ConsumeIntegralInRange(T min, T max) {
    const uint64_t range = static_cast<uint64_t>(max) - static_cast<uint64_t>(min);
    uint64_t v = 0;
    for (uint64_t width = range; width != 0 && pos_ < size_; width >>= 8)
      v = v << 8 | data_[pos_++];
    if (range != UINT64_MAX) v %= range + 1;
    return static_cast<T>(static_cast<uint64_t>(min) + v);
  }
  template <typename T>
  T ConsumeIntegral() {
    return ConsumeIntegralInRange<T>(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  }
  bool ConsumeBool() { return (ConsumeIntegral<uint8_t>() & 1) != 0; }
  template <typename T>
  std::vector<T> ConsumeBytes(size_t n) {
    n = std::min(n, remaining_bytes());
    std::vector<T> out(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};
using FuzzedDataProvider = Reader;

[[noreturn]] inline void fail(const char* target, const char* what) {
  std::fprintf(stderr, "%s invariant violated: %s\n", target, what);
  std::abort();
}

inline std::array<uint8_t, 16> v4_gid(uint8_t last) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, last};
}

inline const std::array<uint8_t, 16> kLocalGid = v4_gid(1);
inline const std::array<uint8_t, 16> kPeerGid = v4_gid(2);
inline constexpr uint32_t kPeerQpn = 0x4D2;
inline constexpr uint32_t kQkey = 0x11111111;

// One arena: [guard | region 0 | guard | region 1 | ... | guard]. Regions are 8-byte
// aligned; guard bytes hold a pattern that no operation may change.
class Arena {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr uint8_t kGuardByte = 0xA5;

  explicit Arena(std::initializer_list<size_t> sizes) {
    size_t off = kGuard;
    for (size_t s : sizes) {
      offsets_.push_back(off);
      sizes_.push_back(s);
      off += (s + 7) / 8 * 8 + kGuard;
    }
    mem_.assign(off, kGuardByte);
    for (size_t i = 0; i < sizes_.size(); ++i) std::memset(region(i), 0, sizes_[i]);
  }
  uint8_t* region(size_t i) { return mem_.data() + offsets_[i]; }
  [[nodiscard]] size_t size(size_t i) const { return sizes_[i]; }
  [[nodiscard]] uint64_t va(size_t i) const {
    return reinterpret_cast<uint64_t>(mem_.data() + offsets_[i]);
  }
  [[nodiscard]] const std::vector<uint8_t>& bytes() const { return mem_; }
  // Index of the region holding arena byte `pos`, or -1 for a guard byte.
  [[nodiscard]] int region_of(size_t pos) const {
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (pos >= offsets_[i] && pos < offsets_[i] + sizes_[i]) return static_cast<int>(i);
    }
    return -1;
  }
  [[nodiscard]] size_t offset(size_t i) const { return offsets_[i]; }

 private:
  std::vector<uint8_t> mem_;
  std::vector<size_t> offsets_;
  std::vector<size_t> sizes_;
};

inline transport::EngineConfig fuzz_engine_config() {
  transport::EngineConfig c;
  c.seed = 42;
  // Small tables: the engine is built for every input, and its default limits (65536-entry
  // CQs, 4096 MRs, ...) would cost more than the input itself.
  c.limits.max_qp = 8;
  c.limits.max_qp_wr = 64;
  c.limits.max_cq = 4;
  c.limits.max_cqe = 4096;
  c.limits.max_pd = 4;
  c.limits.max_mr = 16;
  c.limits.max_srq = 2;
  c.limits.max_srq_wr = 64;
  c.limits.max_qp_rd_atom = 16;
  c.limits.max_qp_init_rd_atom = 16;
  c.active_mtu = transport::Mtu::k4096;
  return c;
}

// RESET -> INIT -> RTR -> RTS against kPeerGid/kPeerQpn; false when the engine refused.
inline bool bring_up(transport::Engine& e, uint32_t qpn, transport::QpType type, uint32_t sq_psn,
                     uint32_t rq_psn, uint8_t retry_cnt = 3, uint8_t rnr_retry = 3) {
  using namespace transport;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = kQkey;
  a.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  const bool ud = type == QpType::kUd;
  if (!e.modify_qp(qpn, a, kQpState | kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags))
           .is_ok()) {
    return false;
  }
  a.qp_state = QpState::kRtr;
  uint32_t mask = kQpState;
  if (!ud) {
    a.path_mtu = Mtu::k1024;
    a.dest_qp_num = kPeerQpn;
    a.rq_psn = rq_psn;
    a.ah_attr.dgid = kPeerGid;
    a.ah_attr.sgid = kLocalGid;
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (type == QpType::kRc) {
      a.max_dest_rd_atomic = 4;
      a.min_rnr_timer = 1;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
  }
  if (!e.modify_qp(qpn, a, mask).is_ok()) return false;
  a.qp_state = QpState::kRts;
  a.sq_psn = sq_psn;
  mask = kQpState | kQpSqPsn;
  if (type == QpType::kRc) {
    a.timeout = 8;  // 4.096 us * 2^8 ~ 1 ms of virtual time
    a.retry_cnt = retry_cnt;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 4;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  return e.modify_qp(qpn, a, mask).is_ok();
}

inline transport::QpState qp_state(transport::Engine& e, uint32_t qpn) {
  transport::QpAttr a;
  transport::QpInitAttr i;
  if (!e.query_qp(qpn, a, i).is_ok()) return transport::QpState::kReset;
  return a.qp_state;
}

inline transport::PacketMeta peer_meta() {
  transport::PacketMeta meta;
  meta.ip.src = kPeerGid;
  meta.ip.dst = kLocalGid;
  meta.ip.sport = 0xC123;
  meta.ip.dport = wire::kRoceV2Port;
  meta.ip_id_known = true;
  return meta;
}

// Builds `h` with `payload` and a valid ICRC into `out`; an opcode the codec cannot build
// (reserved) gives raw fuzzer bytes with that first byte instead. Then optionally damages one
// byte, so the ICRC and length checks see bad packets too.
inline void build_wire(FuzzedDataProvider& fdp, const wire::Headers& h,
                       std::span<const uint8_t> payload, std::vector<uint8_t>& out) {
  const size_t size = wire::packet_size(h.bth.opcode, payload.size());
  if (size == 0) {
    out = fdp.ConsumeBytes<uint8_t>(fdp.ConsumeIntegralInRange<size_t>(0, 96));
    if (!out.empty()) out[0] = h.bth.opcode;
    return;
  }
  out.assign(size, 0);
  if (wire::build_packet(h, payload, out) != size) fail("engine_fuzz", "build_packet size");
  const transport::PacketMeta meta = peer_meta();
  wire::write_icrc(meta.ip, out);
  const uint8_t damage = fdp.ConsumeIntegral<uint8_t>();
  if (damage >= 0xF0 && !out.empty()) {
    out[fdp.ConsumeIntegralInRange<size_t>(0, out.size() - 1)] ^= fdp.ConsumeIntegral<uint8_t>();
  } else if (damage >= 0xE8 && out.size() > 1) {
    out.resize(fdp.ConsumeIntegralInRange<size_t>(0, out.size() - 1));  // truncated
  }
}

// Everything the engine wants to send: each packet must parse and carry a correct ICRC.
inline size_t drain_tx(transport::Engine& e, TimePoint now, const char* target,
                       std::vector<wire::Headers>* sent = nullptr) {
  static std::array<uint8_t, 4096 + 128> buf;
  size_t n = 0;
  for (int guard = 0; e.has_tx() && guard < 4096; ++guard) {
    transport::TxSlot slot;
    slot.buf = buf;
    if (e.poll_tx(now, std::span<transport::TxSlot>(&slot, 1)) == 0) break;
    const std::span<const uint8_t> bytes(buf.data(), slot.len);
    wire::ParsedPacket p;
    if (wire::parse_packet(bytes, p) != wire::ParseError::kOk) fail(target, "sent a bad packet");
    if (wire::icrc_of(slot.meta.ip, bytes.first(bytes.size() - wire::kIcrcLen)) != p.icrc) {
      fail(target, "sent a bad ICRC");
    }
    if (sent != nullptr) sent->push_back(p.hdr);
    ++n;
  }
  return n;
}

inline bool valid_status(transport::WcStatus s) {
  return static_cast<uint8_t>(s) <= static_cast<uint8_t>(transport::WcStatus::kGeneralErr);
}

}  // namespace uroce::fuzz
