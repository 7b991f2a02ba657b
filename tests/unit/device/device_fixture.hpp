// Two real Devices (engine + progress thread) joined by a FakeWire, driven through the public
// C++ API: a PD, a CQ and a 1 MiB registered buffer on each side, and helpers to connect QPs
// and wait for completions.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_wire.hpp"
#include "uroce/connect.hpp"
#include "uroce/verbs.hpp"

namespace uroce::test {

inline constexpr uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

struct Side {
  explicit Side(std::shared_ptr<device::Device> d)
      : dev(std::move(d)),
        pd(std::move(dev.alloc_pd().value())),
        cq(std::move(dev.create_cq(1024).value())),
        buf(1 << 20),
        mr(std::move(pd.reg_mr(buf.data(), buf.size(), kAllAccess).value())) {}

  QueuePair make_qp(QpType type, const CompletionQueue* recv_cq = nullptr) {
    QpInitAttr init;
    init.qp_type = type;
    init.send_cq = cq.id();
    init.recv_cq = recv_cq ? recv_cq->id() : cq.id();
    init.cap = QpCap{256, 256, 4, 4, 64};
    auto r = pd.create_qp(init);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return std::move(r.value());
  }

  Device dev;
  ProtectionDomain pd;
  CompletionQueue cq;
  std::vector<uint8_t> buf;
  MemoryRegion mr;
};

// Polls until one completion arrives or `timeout` passes; status kGeneralErr + wr_id ~0 on
// timeout so the assertion message says so.
inline Wc wait_wc(CompletionQueue& cq,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  Wc wc;
  while (std::chrono::steady_clock::now() < end) {
    if (cq.poll(std::span<Wc>(&wc, 1)) == 1) return wc;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  wc = Wc{};
  wc.wr_id = ~0ull;
  wc.status = WcStatus::kGeneralErr;
  return wc;
}

// A signaled SEND of `len` bytes of `side`'s buffer at `offset`.
inline void post_send(QueuePair& qp, Side& side, size_t offset, uint64_t wr_id, uint32_t len = 8) {
  const Sge sge = side.mr.sge(offset, len);
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  ASSERT_TRUE(qp.post_send(wr));
}

// A signaled UD SEND of `sge` to QP `remote_qpn` through address `ah`, with ConnectOptions'
// default Q_Key.
inline SendWr ud_send_wr(const AhAttr& ah, uint32_t remote_qpn, const Sge& sge, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSendSignaled;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  wr.ud.ah = ah;
  wr.ud.remote_qpn = remote_qpn;
  wr.ud.remote_qkey = ConnectOptions{}.qkey;
  return wr;
}

// A 64-byte receive into `side`'s buffer at `offset`.
inline void post_recv(QueuePair& qp, Side& side, size_t offset, uint64_t wr_id) {
  const Sge sge = side.mr.sge(offset, 64);
  ASSERT_TRUE(qp.post_recv(RecvWr{wr_id, std::span<const Sge>(&sge, 1)}));
}

// Connects qa (device 1) and qb (device 2) with PSNs 100 / 200 and default options.
inline void connect_rc_pair(QueuePair& qa, QueuePair& qb) {
  ConnectOptions opt;
  ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, fake_gid(2)}, opt));
  ASSERT_TRUE(connect_qp(qb, 200, QpEndpoint{qa.qp_num(), 100, fake_gid(1)}, opt));
}

// Opcodes the tests expect on the fake wire (IBTA 9.2 Table 38).
inline constexpr uint8_t kRcSendOnly = 0x04;
inline constexpr uint8_t kRcWriteOnly = 0x0A;
inline constexpr uint8_t kRcAcknowledge = 0x11;

// What device `from` put on the wire, from log entry `first` on.
inline std::vector<uint8_t> opcodes_from(const FakeWire& wire, uint8_t from, size_t first = 0) {
  std::vector<uint8_t> out;
  const auto log = wire.sent_log();
  for (size_t i = first; i < log.size(); ++i) {
    if (log[i].from == from) out.push_back(log[i].opcode);
  }
  return out;
}

// The tx_burst call (FakeWire::Sent::burst) of each packet device `from` put on the wire.
inline std::vector<uint64_t> bursts_from(const FakeWire& wire, uint8_t from) {
  std::vector<uint64_t> out;
  for (const FakeWire::Sent& s : wire.sent_log()) {
    if (s.from == from) out.push_back(s.burst);
  }
  return out;
}

// The voluntary context switches of this process's one thread named uroce-progress (-1 if
// there is not exactly one).
inline int64_t progress_thread_switches() {
  int64_t found = -1;
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != "uroce-progress") continue;
    ++threads;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("voluntary_ctxt_switches:")) found = std::stoll(line.substr(24));
    }
  }
  return threads == 1 ? found : -1;
}

class DevicePairTest : public ::testing::Test {
 protected:
  DevicePairTest()
      : a_(make_fake_device(wire_, 1, 0x100)), b_(make_fake_device(wire_, 2, 0x2000)) {}

  // Connects qa (on a_) and qb (on b_) with PSNs 100 / 200.
  void connect(QueuePair& qa, QueuePair& qb, ConnectOptions opt = {}) {
    opt.path_mtu = Mtu::k1024;
    ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, fake_gid(2)}, opt));
    ASSERT_TRUE(connect_qp(qb, 200, QpEndpoint{qa.qp_num(), 100, fake_gid(1)}, opt));
  }

  FakeWire wire_;
  Side a_;
  Side b_;
};

}  // namespace uroce::test
