// The management datagram (MAD) that carries every CM message: a UD SEND of exactly 256
// bytes to QP1 (Q_Key 0x80010000), a 24-byte common header (IBA 13.4.3, the kernel's
// struct ib_mad_hdr) and 232 bytes of class data. docs/cm.md has the layouts and sources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uroce::cm {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kMadHeaderSize = 24;
inline constexpr size_t kCmDataSize = kMadSize - kMadHeaderSize;  // every CM message: 232

inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kCmMgmtClass = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;  // IB_CM_CLASS_VERSION
inline constexpr uint8_t kMethodSend = 0x03;   // the only method CM messages use
inline constexpr uint32_t kQp1Qkey = 0x80010000;

// CM attribute IDs (IBA Table 104; the kernel's CM_*_ATTR_ID).
enum class AttrId : uint16_t {
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,  // alternate paths: not used on RoCE, recognised only to be dropped
  kApr = 0x001A,
};

struct MadHeader {
  uint8_t base_version = kMadBaseVersion;
  uint8_t mgmt_class = kCmMgmtClass;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;  // transaction ID: REQ/DREQ/SIDR_REQ make one, replies echo it
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;  // Linux puts its ECE options here on REQ/REP/SIDR_REP; else 0

  friend bool operator==(const MadHeader&, const MadHeader&) = default;
};

void encode_mad_header(const MadHeader& h, std::span<uint8_t, kMadHeaderSize> out);
[[nodiscard]] MadHeader decode_mad_header(std::span<const uint8_t, kMadHeaderSize> in);

}  // namespace uroce::cm
