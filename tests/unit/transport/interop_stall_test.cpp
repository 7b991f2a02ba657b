// The interop stall of `ib_write_lat -s 65536 -m 1024` with uroce as server and Linux 6.1
// rxe as client (docs/interop.md finding 1; the capture's tail is
// tests/data/interop/rxe_uroce_write_lat_64k_mtu1024_stall.pcap), replayed packet by packet
// against one uroce QP. What the capture shows:
//
//   rxe  -> WRITE First 790, Middle 791, (39 ms, slow guest) Middle 792..852, Last 853 AckReq
//   rxe  -> retransmit timer fired: go-back-N from comp.psn, First 790, Middle 791, 792
//   uroce-> ACK 853 msn=14, four times: one for the Last, one per duplicate 790, 791, 792
//   uroce-> its own WRITE 5295931..5295994 (the ping-pong answer)
//   rxe  -> Middle 793 (resent)                   uroce -> ACK 853 msn=14 (fifth)
//   rxe  -> ACK 5295994 msn=15, then nothing from either side for 60 s.
//
// Why rxe stops (rxe_comp.c check_psn, rxe_req.c req_next_wqe): the first ACK 853 reaches
// rxe's completer while the retried WQE is "processing", so it only moves comp.psn to 854.
// The second ACK 853 is behind comp.psn and equals the WQE's last PSN, which check_psn
// takes for "a retried packet" and completes the WQE that rxe's requester is still
// resending. ib_write_lat (tx_depth 1, an SQ of two slots) posts its next WRITE into the
// freed slot; the producer index wraps onto the requester's wqe_index, so req_next_wqe
// sees an empty queue, and the retransmit timer finds the head WQE "posted" and does
// nothing. Only ACKs after the first trip this, and they were all answers to duplicates
// without AckReq; the fix is to re-ACK a duplicate SEND/WRITE only when it asks for an
// ACK (as rdmavt's rc_rcv_error does). The resent Last carries AckReq, so rxe's retry ends
// with an ACK it accepts (the WQE is "pending" by then).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "script_harness.hpp"

namespace uroce::script {
namespace {

constexpr uint32_t kFirstPsn = 14829790;  // rxe's write in the capture
constexpr uint32_t kPackets = 64;         // 64 KiB at path MTU 1024
constexpr uint32_t kLastPsn = kFirstPsn + kPackets - 1;

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 13 + (i >> 10));
  return v;
}

class RxeWrite {
 public:
  explicit RxeWrite(ScriptQp& s) : s_(s), data_(pattern(kPackets * 1024)) {}

  // One packet of the 64 KiB WRITE as rxe builds it: RETH on First, AckReq on Last only.
  void send(uint32_t index) {
    const uint32_t psn = kFirstPsn + index;
    const std::span<const uint8_t> payload =
        std::span<const uint8_t>(data_).subspan(size_t{index} * 1024, 1024);
    if (index == 0) {
      s_.receive(s_.rdma(Op::kWriteFirst, psn, s_.va(0), s_.mr().rkey,
                         static_cast<uint32_t>(data_.size()), /*ackreq=*/false),
                 payload);
    } else if (index + 1 == kPackets) {
      s_.receive(s_.request(Op::kWriteLast, psn, /*ackreq=*/true), payload);
    } else {
      s_.receive(s_.request(Op::kWriteMiddle, psn, /*ackreq=*/false), payload);
    }
  }
  [[nodiscard]] const std::vector<uint8_t>& data() const { return data_; }

 private:
  ScriptQp& s_;
  std::vector<uint8_t> data_;
};

TEST(InteropStall, RxeGoBackNOfA64KiBWriteGetsOneAckForItsLastAndNoneForInteriorDuplicates) {
  ScriptOptions o;
  o.rq_psn = kFirstPsn;
  o.mem_size = kPackets * 1024;
  ScriptQp s(o);
  RxeWrite w(s);

  // receive WRITE First 790 .. Middle 852 (no AckReq) / expect nothing yet
  for (uint32_t i = 0; i + 1 < kPackets; ++i) {
    w.send(i);
    EXPECT_TRUE(s.transmit().empty()) << "packet " << i;
  }
  // receive WRITE Last 853 AckReq / expect ACK psn=853 msn=1, the data in memory
  w.send(kPackets - 1);
  expect_ack(one(s.transmit()), kLastPsn, 1);
  EXPECT_EQ(std::memcmp(s.mem(0), w.data().data(), w.data().size()), 0);

  // The application reuses the buffer; a re-executed WRITE would overwrite it.
  std::memset(s.mem(0), 0, w.data().size());

  // rxe's retransmit timer fires: go-back-N from 790.
  // receive WRITE First 790, Middle 791, 792 again / expect NO ACK: a second ACK 853 here
  // is what made rxe complete the WQE it was still resending.
  for (uint32_t i = 0; i < 3; ++i) {
    w.send(i);
    EXPECT_TRUE(s.transmit().empty()) << "duplicate " << i << " must not be ACKed";
  }
  // receive Middle 793 again (it came 20 ms later) / expect NO ACK either
  w.send(3);
  EXPECT_TRUE(s.transmit().empty());

  // receive the rest of the retry, Middle 794 .. 852 / expect nothing
  for (uint32_t i = 4; i + 1 < kPackets; ++i) {
    w.send(i);
    EXPECT_TRUE(s.transmit().empty()) << "duplicate " << i;
  }
  // receive the resent Last 853 with AckReq / expect ACK psn=853 (ePSN-1) msn=1: this is
  // the ACK rxe's completer accepts, its WQE being "pending" after the resent Last.
  w.send(kPackets - 1);
  expect_ack(one(s.transmit()), kLastPsn, 1);

  // Nothing of the retry was executed again.
  const std::vector<uint8_t> zeros(w.data().size(), 0);
  EXPECT_EQ(std::memcmp(s.mem(0), zeros.data(), zeros.size()), 0);

  s.expect_qp_counters({{Counter::kDuplicateRequest, kPackets}, {Counter::kRxWriteRequests, 1}});
}

// A duplicate that asks for an ACK always gets one (C9-105), also in the middle of a long
// message (rxe sets AckReq on every 66th packet): the requester's retry must end.
TEST(InteropStall, DuplicateWithAckReqIsReAckedWithEpsnMinusOne) {
  ScriptOptions o;
  o.rq_psn = kFirstPsn;
  o.mem_size = kPackets * 1024;
  ScriptQp s(o);
  RxeWrite w(s);
  for (uint32_t i = 0; i < kPackets; ++i) w.send(i);
  expect_ack(one(s.transmit()), kLastPsn, 1);

  // receive Middle 795 again, now with AckReq / expect ACK psn=853 msn=1
  const std::vector<uint8_t> payload(1024, 0xEE);
  s.receive(s.request(Op::kWriteMiddle, kFirstPsn + 5, /*ackreq=*/true), payload);
  expect_ack(one(s.transmit()), kLastPsn, 1);
  EXPECT_EQ(*s.mem(5 * 1024), w.data()[5 * 1024]) << "a duplicate is never executed";

  // receive Middle 796 again without AckReq / expect nothing
  s.receive(s.request(Op::kWriteMiddle, kFirstPsn + 6, /*ackreq=*/false), payload);
  EXPECT_TRUE(s.transmit().empty());

  s.expect_qp_counters({{Counter::kDuplicateRequest, 2}, {Counter::kRxWriteRequests, 1}});
}

}  // namespace
}  // namespace uroce::script
