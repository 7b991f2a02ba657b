// Send queue: a ring of send WQEs sized at QP creation, with each WQE's SGE list and inline
// data stored in flat arrays beside it (capacity x max_sge, capacity x max_inline), so
// posting never allocates. WQEs are named by a 64-bit sequence number that only grows:
// [head, tail) are posted and not yet completed; the requester and completer keep their
// own positions inside that range.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "uroce/vocab/psn.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce::transport {

enum class WqeState : uint8_t {
  kPosted,   // not started by the requester (or rewound by a retry)
  kStarted,  // PSNs assigned, packets (partly) sent
};

struct SendWqe {
  // The work request as posted.
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  bool signaled = false;
  bool is_inline = false;
  uint32_t num_sge = 0;
  uint32_t length = 0;  // message length in bytes (atomics: 8)
  uint32_t imm_data = 0;
  uint32_t invalidate_rkey = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;  // ATOMIC_WRITE: its 8 bytes (memcpy, wire order as posted)
  uint64_t swap = 0;
  uint8_t flush_type = 0;   // FLUSH: FlushType bits
  uint8_t flush_level = 0;  // FLUSH: FlushLevel
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  AhAttr ah;
  MwBind bind;  // BIND_MW

  // Progress.
  WqeState state = WqeState::kPosted;
  Psn first_psn;
  Psn last_psn;
  uint32_t npkts = 0;      // PSNs the message consumes (a READ: its response packets)
  uint32_t pkts_sent = 0;  // packets of the message sent so far (the next is first_psn+pkts_sent)
  WcStatus error = WcStatus::kSuccess;  // a local error found before the WQE completed
};

class SendQueue {
 public:
  void init(uint32_t capacity, uint32_t max_sge, uint32_t max_inline);

  [[nodiscard]] bool full() const { return tail_ - head_ == capacity_; }
  [[nodiscard]] bool empty() const { return tail_ == head_; }
  [[nodiscard]] uint64_t head() const { return head_; }
  [[nodiscard]] uint64_t tail() const { return tail_; }
  [[nodiscard]] uint32_t capacity() const { return capacity_; }

  SendWqe& at(uint64_t seq) { return wqes_[seq % capacity_]; }
  [[nodiscard]] const SendWqe& at(uint64_t seq) const { return wqes_[seq % capacity_]; }

  // Storage of the WQE at `seq`: its SGE array (max_sge) and its inline buffer (max_inline).
  std::span<Sge> sge_storage(uint64_t seq) {
    return {sges_.data() + (seq % capacity_) * max_sge_, max_sge_};
  }
  std::span<uint8_t> inline_storage(uint64_t seq) {
    return {inline_.data() + (seq % capacity_) * max_inline_, max_inline_};
  }
  [[nodiscard]] std::span<const Sge> sges(uint64_t seq) const {
    return {sges_.data() + (seq % capacity_) * max_sge_, at(seq).num_sge};
  }
  [[nodiscard]] std::span<const uint8_t> inline_data(uint64_t seq) const {
    return {inline_.data() + (seq % capacity_) * max_inline_, at(seq).length};
  }

  // Appends a WQE slot (the caller fills it); returns its sequence number.
  uint64_t push() { return tail_++; }
  void pop() { ++head_; }
  void clear() { head_ = tail_ = 0; }

 private:
  uint32_t capacity_ = 0;
  uint32_t max_sge_ = 0;
  uint32_t max_inline_ = 0;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
  std::vector<SendWqe> wqes_;
  std::vector<Sge> sges_;
  std::vector<uint8_t> inline_;
};

}  // namespace uroce::transport
