// Verbs vocabulary of the transport engine: ibverbs-shaped enums and structs whose numeric
// values equal libibverbs' (<infiniband/verbs.h>), so the libibverbs shim maps them 1:1 by
// value (a static_cast), plus the Status / Result<T> types every setup call returns.
//
// Differences from ibverbs, on purpose:
//  - Objects are named by small ids (PdId, CqId, SrqId, QPN, lkey) instead of pointers.
//  - imm_data is in HOST order here (the value of the big-endian ImmDt field); ibverbs keeps
//    it in network order, so the shim converts with htobe32/be32toh.
//  - Scatter/gather lists are spans; the engine copies what it needs at post time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "uroce/vocab/cc_types.hpp"
#include "uroce/vocab/recovery.hpp"

namespace uroce::transport {

// ---------------------------------------------------------------------------------------
// Status and Result<T>: errno-like code plus a static message a user can act on.

class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  constexpr Status(int code, const char* message) : code_(code), message_(message) {}
  static constexpr Status ok() { return Status(); }

  [[nodiscard]] constexpr bool is_ok() const { return code_ == 0; }
  constexpr explicit operator bool() const { return is_ok(); }
  [[nodiscard]] constexpr int code() const { return code_; }  // 0 or a positive errno value
  [[nodiscard]] constexpr const char* message() const { return message_; }

 private:
  int code_ = 0;
  const char* message_ = "ok";  // always a string literal: never owned, never freed
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(status) {}     // NOLINT: must be an error status

  [[nodiscard]] bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  [[nodiscard]] const Status& status() const { return status_; }
  [[nodiscard]] const T& value() const { return *value_; }
  [[nodiscard]] T& value() { return *value_; }
  const T& operator*() const { return *value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// ---------------------------------------------------------------------------------------
// Object ids. Strong enums so a CqId cannot be passed where a PdId is meant.

enum class PdId : uint32_t {};
enum class CqId : uint32_t {};
enum class SrqId : uint32_t {};

// ---------------------------------------------------------------------------------------
// Enums with ibverbs values.

enum class QpState : uint8_t {
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,
  kSqe = 5,
  kErr = 6
};

// ibv_qp_type values; kGsi (QP1) is the kernel's IB_QPT_GSI, which userspace cannot create but
// the device layer uses for its connection-manager QP.
enum class QpType : uint8_t { kGsi = 1, kRc = 2, kUc = 3, kUd = 4 };

enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };

[[nodiscard]] constexpr uint32_t mtu_bytes(Mtu m) {
  return 128u << static_cast<uint8_t>(m);
}

enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kFlush = 8,        // IBV_WC_FLUSH
  kAtomicWrite = 9,  // IBV_WC_ATOMIC_WRITE
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
  kFlush = 14,        // IBV_WR_FLUSH (IBA 1.5 FLUSH, RC only): SendWr::flush
  kAtomicWrite = 15,  // IBV_WR_ATOMIC_WRITE (IBA 1.5, RC only): rdma + atomic_write
};

// FLUSH placement type (FETH bits 0..3; ibv_wr_flush's `type`, IBV_FLUSH_GLOBAL/PERSISTENT).
enum FlushType : uint8_t {
  kFlushGlobal = 1 << 0,      // global visibility
  kFlushPersistent = 1 << 1,  // persistence
};
// FLUSH selectivity level (FETH bits 4..5; ibv_wr_flush's `level`).
enum FlushLevel : uint8_t {
  kFlushRange = 0,  // [remote_addr, remote_addr + length) of the MR
  kFlushMr = 1,     // the whole MR the R_Key names (remote_addr and length ignored)
};

// ibv_send_flags
enum SendFlag : uint32_t {
  kSendFence = 1 << 0,
  kSendSignaled = 1 << 1,
  kSendSolicited = 1 << 2,
  kSendInline = 1 << 3,
};

// ibv_wc_flags
enum WcFlag : uint32_t {
  kWcGrh = 1 << 0,
  kWcWithImm = 1 << 1,
  kWcWithInv = 1 << 3,
};

// ibv_access_flags
enum Access : uint32_t {
  kAccessLocalWrite = 1 << 0,
  kAccessRemoteWrite = 1 << 1,
  kAccessRemoteRead = 1 << 2,
  kAccessRemoteAtomic = 1 << 3,
  kAccessMwBind = 1 << 4,
  kAccessZeroBased = 1 << 5,
  // rdma-core 44 IBV_ACCESS_FLUSH_GLOBAL / _PERSISTENT: the target of a FLUSH of that
  // placement type (on an MR and, as rxe requires, in the QP's qp_access_flags).
  kAccessFlushGlobal = 1 << 8,
  kAccessFlushPersistent = 1 << 9,
};

// ibv_qp_attr_mask: identical to IBV_QP_* bits.
enum QpAttrMask : uint32_t {
  kQpState = 1 << 0,
  kQpCurState = 1 << 1,
  kQpEnSqdAsyncNotify = 1 << 2,
  kQpAccessFlags = 1 << 3,
  kQpPkeyIndex = 1 << 4,
  kQpPort = 1 << 5,
  kQpQkey = 1 << 6,
  kQpAv = 1 << 7,
  kQpPathMtu = 1 << 8,
  kQpTimeout = 1 << 9,
  kQpRetryCnt = 1 << 10,
  kQpRnrRetry = 1 << 11,
  kQpRqPsn = 1 << 12,
  kQpMaxQpRdAtomic = 1 << 13,
  kQpAltPath = 1 << 14,
  kQpMinRnrTimer = 1 << 15,
  kQpSqPsn = 1 << 16,
  kQpMaxDestRdAtomic = 1 << 17,
  kQpPathMigState = 1 << 18,
  kQpCap = 1 << 19,
  kQpDestQpn = 1 << 20,
  kQpRateLimit = 1 << 25,
  // uroce extension (no ibv bit): QpAttr::recovery, INIT -> RTR of an RC QP only.
  kQpUroceRecovery = 1u << 31,
};

// ibv_srq_attr_mask
enum SrqAttrMask : uint32_t {
  kSrqMaxWr = 1 << 0,
  kSrqLimit = 1 << 1,
};

// ibv_event_type values, plus kCqCompletion for the completion channel (ibverbs delivers
// those through ibv_get_cq_event, not as async events; the device tells them apart by type).
enum class EventType : uint16_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kSrqErr = 14,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
  kCqCompletion = 0x100,
};

// ---------------------------------------------------------------------------------------
// Structs.

struct DeviceLimits {
  uint32_t max_qp = 1024;
  uint32_t max_qp_wr = 16384;  // per send/receive queue
  uint32_t max_sge = 32;
  uint32_t max_inline_data = 256;
  uint32_t max_cq = 1024;
  uint32_t max_cqe = 65536;
  uint32_t max_pd = 1024;
  uint32_t max_mr = 4096;  // also fixes how many key bits are the MR index
  uint32_t max_mw = 4096;  // memory windows (type 1 and 2B); at most 2^24
  uint64_t max_mr_size = 1ull << 40;
  uint32_t max_srq = 1024;
  uint32_t max_srq_wr = 16384;
  uint32_t max_srq_sge = 32;
  uint32_t max_qp_rd_atom = 128;       // responder resources per QP (max_dest_rd_atomic)
  uint32_t max_qp_init_rd_atom = 128;  // outstanding READ/atomic per QP (max_rd_atomic)
  uint8_t phys_port_cnt = 1;           // valid port numbers are 1..phys_port_cnt (one per netdev)
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// Address vector (ibv_ah_attr with its GRH). On RoCE v2 the GIDs are the IP addresses:
// IPv4 as ::ffff:a.b.c.d. The device resolves sgid_index to sgid before calling the engine.
struct AhAttr {
  std::array<uint8_t, 16> dgid{};
  std::array<uint8_t, 16> sgid{};
  uint32_t flow_label = 0;    // 0: derive the UDP source port from the QPNs like rxe (§2f)
  uint8_t sgid_index = 0;     // kept for query_qp only
  uint8_t hop_limit = 64;     // IP TTL / hop limit
  uint8_t traffic_class = 0;  // IP TOS / traffic class byte (DSCP << 2 | ECN)
  uint8_t sl = 0;
  uint8_t port_num = 1;
  bool is_global = true;
};

struct QpCap {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  uint32_t max_inline_data = 0;
};

struct QpInitAttr {
  QpType qp_type = QpType::kRc;
  CqId send_cq{};
  CqId recv_cq{};
  std::optional<SrqId> srq;
  QpCap cap;
  bool sq_sig_all = false;
  // uroce: the congestion control this QP runs; kDefault takes EngineConfig::cc.algorithm.
  CcAlgorithm cc = CcAlgorithm::kDefault;
};

// Returned by create_qp: the QPN and the capabilities actually granted (>= requested).
struct QpInfo {
  uint32_t qpn = 0;
  QpCap cap;
};

// ibv_qp_attr, field for field (path_mig_state, alt path and rate limit are accepted where
// the transition table allows them and otherwise ignored: RoCE has no APM).
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint8_t path_mig_state = 0;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap;
  AhAttr ah_attr;
  AhAttr alt_ah_attr;
  uint16_t pkey_index = 0;
  uint16_t alt_pkey_index = 0;
  uint8_t en_sqd_async_notify = 0;
  uint8_t sq_draining = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t port_num = 0;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint8_t alt_port_num = 0;
  uint8_t alt_timeout = 0;
  uint32_t rate_limit = 0;
  QpCcState cc;  // uroce, read-only: filled by query_qp, ignored by modify_qp
  // uroce, with kQpUroceRecovery: selective repeat only once the peer agreed to it (both ends
  // must set it; docs/congestion.md "Loss recovery"). Default: RoCE v2 go-back-N.
  Recovery recovery = Recovery::kGoBackN;
};

// ibv_mw_type: type 1 windows are bound with ibv_bind_mw and belong to their PD; type 2
// (2B) windows are bound by a BIND_MW work request, belong to that QP and can be invalidated
// (LOCAL_INV, SEND with Invalidate).
enum class MwType : uint8_t { kType1 = 1, kType2 = 2 };

// A BIND_MW work request (IBA 10.6.7): binds the window whose R_Key's upper 24 bits are
// mw_rkey's to [addr, addr + length) of the MR `mr_lkey` with `access` (kAccessRemote* bits;
// kAccessLocalWrite is ignored), under the new R_Key `rkey`: the window's upper 24 bits and a
// key byte of the consumer's choice (ibv_inc_rkey). Type 1: length 0 unbinds. Type 2: bound
// to the posting QP (type 2B), length > 0.
struct MwBind {
  uint32_t mw_rkey = 0;
  uint32_t rkey = 0;
  uint32_t mr_lkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;  // SendFlag bits
  std::span<const Sge>
      sg_list;            // with kSendInline: addr/length are read at post time, lkey ignored
  uint32_t imm_data = 0;  // host order; *_WITH_IMM only
  uint32_t invalidate_rkey = 0;  // SEND_WITH_INV and LOCAL_INV only
  struct {
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
  } rdma;
  struct {
    uint64_t remote_addr = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint32_t rkey = 0;
  } atomic;
  // ATOMIC_WRITE: the 8 bytes written at rdma.remote_addr (8-byte aligned), as one atomic
  // store in the responder; copied at post time like ibv_wr_atomic_write's buffer.
  std::array<uint8_t, 8> atomic_write{};
  struct {
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t length = 0;          // kFlushRange only
    uint8_t type = kFlushGlobal;  // FlushType bits
    uint8_t level = kFlushRange;  // FlushLevel
  } flush;
  MwBind bind_mw;  // BIND_MW only
  struct {
    AhAttr ah;  // copied at post time
    uint32_t remote_qpn = 0;
    uint32_t remote_qkey = 0;  // bit 31 set: use the QP's own Q_Key (IBA 10.2.5)
  } ud;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;
};

struct SrqInitAttr {
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
};

struct SrqAttr {
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
};

struct MrInfo {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
};

// ibv_wc, field for field (imm_data in host order; invalidated_rkey is its own field rather
// than a union with imm_data so both can be read without looking at wc_flags).
enum class WcNetwork : uint8_t { kNone, kIpv4, kIpv6 };

struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;
  uint32_t invalidated_rkey = 0;
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t wc_flags = 0;  // WcFlag bits
  uint16_t pkey_index = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;
  uint8_t dlid_path_bits = 0;
  // UD receives: the IP version the datagram came over (the kernel's ib_wc.network_hdr_type,
  // which RoCE consumers need to read the GRH area); kNone for everything else.
  WcNetwork network = WcNetwork::kNone;
  // When the engine made the completion, on its clock (the device's: CLOCK_MONOTONIC, ns);
  // ibv_wc_read_completion_ts reports it (hca_core_clock 1 GHz).
  int64_t timestamp_ns = 0;
};

// An event for the device: `element` is the QPN, the CQ id or the SRQ id, as `type` says.
struct AsyncEvent {
  EventType type = EventType::kCqErr;
  uint32_t element = 0;
};

}  // namespace uroce::transport
