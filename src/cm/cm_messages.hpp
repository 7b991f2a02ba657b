// The CM messages (IBA 12.6, the kernel's include/rdma/ibta_vol1_c12.h), field for field,
// with their 232-byte encodings. Message offsets, bit positions and private-data sizes are
// tabled in docs/cm.md. Reserved bits are sent as zero and ignored on receipt, so decoding
// and re-encoding keeps every field but not necessarily every byte.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>

#include "cm/mad.hpp"

namespace uroce::cm {

using Gid = std::array<uint8_t, 16>;

// The private data each message carries (IBA Table 103; the kernel's ib_cm_data_size).
inline constexpr size_t kReqPrivateData = 92;
inline constexpr size_t kMraPrivateData = 222;
inline constexpr size_t kRejPrivateData = 148;
inline constexpr size_t kRepPrivateData = 196;
inline constexpr size_t kRtuPrivateData = 224;
inline constexpr size_t kDreqPrivateData = 220;
inline constexpr size_t kDrepPrivateData = 224;
inline constexpr size_t kSidrReqPrivateData = 216;
inline constexpr size_t kSidrRepPrivateData = 136;
inline constexpr size_t kRejAriLength = 72;
inline constexpr size_t kSidrRepInfoLength = 72;

// REQ's Transport Service Type.
enum class CmTransport : uint8_t { kRc = 0, kUc = 1, kRd = 2, kXrc = 3 };

// One path of a REQ (primary: message bytes 52..95; alternate: 96..139).
struct CmPath {
  uint16_t local_lid = 0xFFFF;  // RoCE: permissive
  uint16_t remote_lid = 0xFFFF;
  Gid local_gid{};
  Gid remote_gid{};
  uint32_t flow_label = 0;  // 20 bits
  uint8_t packet_rate = 0;  // 6 bits
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;  // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits

  friend bool operator==(const CmPath&, const CmPath&) = default;
};

struct Req {
  uint32_t local_comm_id = 0;
  uint32_t vendor_id = 0;  // 24 bits (Linux ECE)
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;  // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;                // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  CmTransport transport = CmTransport::kRc;
  bool e2e_flow_control = false;
  uint32_t starting_psn = 0;              // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;                // 3 bits
  uint16_t pkey = 0xFFFF;
  uint8_t path_mtu = 0;  // IB MTU enum, 4 bits
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  uint8_t extended_transport = 0;  // 3 bits
  CmPath primary;
  // Present when its Local LID is not 0 (the kernel's cm_req_has_alt_path); RoCE has none.
  std::optional<CmPath> alternate;
  std::array<uint8_t, kReqPrivateData> private_data{};

  friend bool operator==(const Req&, const Req&) = default;
};

// Which message a REJ or an MRA answers (2 bits).
enum class CmMsgResponse : uint8_t { kReq = 0, kRep = 1, kOther = 2 };

struct Mra {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  CmMsgResponse message_mraed = CmMsgResponse::kReq;
  uint8_t service_timeout = 0;  // 5 bits
  std::array<uint8_t, kMraPrivateData> private_data{};

  friend bool operator==(const Mra&, const Mra&) = default;
};

// REJ reasons uroce sends or acts on (IBA Table 112; the kernel's ib_cm_rej_reason).
enum class RejReason : uint16_t {
  kNoQp = 1,
  kNoResources = 3,
  kTimeout = 4,
  kUnsupported = 5,
  kInvalidCommId = 6,
  kInvalidServiceId = 8,
  kInvalidTransport = 9,
  kStaleConnection = 10,
  kInvalidGid = 12,
  kInvalidMtu = 26,
  kConsumerDefined = 28,
  kInvalidClassVersion = 31,
};

struct Rej {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  CmMsgResponse message_rejected = CmMsgResponse::kReq;
  uint8_t ari_length = 0;  // 7 bits
  uint16_t reason = 0;     // RejReason values, and any other the peer sends
  std::array<uint8_t, kRejAriLength> ari{};
  std::array<uint8_t, kRejPrivateData> private_data{};

  friend bool operator==(const Rej&, const Rej&) = default;
};

struct Rep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint32_t local_eecn = 0;
  uint32_t starting_psn = 0;  // 24 bits
  uint32_t vendor_id = 0;     // 24 bits, spread over bytes 15, 19 and 23
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;   // 5 bits
  uint8_t failover_accepted = 0;  // 2 bits
  bool e2e_flow_control = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivateData> private_data{};

  friend bool operator==(const Rep&, const Rep&) = default;
};

struct Rtu {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivateData> private_data{};

  friend bool operator==(const Rtu&, const Rtu&) = default;
};

struct Dreq {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits: the receiver's QPN (a mismatch is ignored silently)
  std::array<uint8_t, kDreqPrivateData> private_data{};

  friend bool operator==(const Dreq&, const Dreq&) = default;
};

struct Drep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivateData> private_data{};

  friend bool operator==(const Drep&, const Drep&) = default;
};

struct SidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = 0xFFFF;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivateData> private_data{};

  friend bool operator==(const SidrReq&, const SidrReq&) = default;
};

// SIDR_REP status (the kernel's ib_cm_sidr_status).
enum class SidrStatus : uint8_t {
  kSuccess = 0,
  kUnsupported = 1,  // no listener for the service ID
  kReject = 2,
  kNoQp = 3,
  kRedirect = 4,
  kUnsupportedVersion = 5,
};

struct SidrRep {
  uint32_t request_id = 0;
  uint8_t status = 0;  // SidrStatus values
  uint8_t info_length = 0;
  uint32_t vendor_id = 0;  // 24 bits
  uint32_t qpn = 0;        // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kSidrRepInfoLength> info{};
  std::array<uint8_t, kSidrRepPrivateData> private_data{};

  friend bool operator==(const SidrRep&, const SidrRep&) = default;
};

using CmMessage = std::variant<Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep>;

[[nodiscard]] AttrId attr_id_of(const CmMessage& m);

// Why a received MAD was not taken (each has its drop counter).
enum class MadError : uint8_t {
  kOk = 0,
  kWrongSize,         // a CM MAD is exactly 256 bytes
  kBadBaseVersion,    // not 1
  kNotCm,             // management class other than 0x07
  kBadClassVersion,   // not 2 (Linux answers REJ 31; uroce drops it)
  kNotSend,           // CM messages use method Send only
  kUnknownAttribute,  // LAP, APR, ClassPortInfo, or no CM attribute at all
};
[[nodiscard]] const char* mad_error_name(MadError e);

struct CmMad {
  MadHeader header;
  CmMessage message;
};

// The 256-byte MAD of `message` (header.attr_id is set from the message).
void encode_cm_mad(const MadHeader& header, const CmMessage& message,
                   std::span<uint8_t, kMadSize> out);
// Parses a received MAD; every field of `out` is set when kOk.
[[nodiscard]] MadError decode_cm_mad(std::span<const uint8_t> mad, CmMad& out);

}  // namespace uroce::cm
