// Two devices in one process over real UDP on 127.0.0.1 and a private port: both bind the
// same address and port, and the reuseport steering hands each datagram to the device that
// owns its destination QPN. Every operation on RC, UC and UD; 1 MiB and 0-byte messages;
// 64 QPs at once; the errors Device::open reports.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <sched.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device_integration_util.hpp"

namespace uroce::itest {
namespace {

constexpr size_t kMiB = 1 << 20;

class UdpPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = pick_udp_port();
    auto a = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(a.is_ok()) << a.error().message;
    auto b = Device::open(loopback_options(port_, registry_.path()));
    ASSERT_TRUE(b.is_ok()) << b.error().message;
    a_ = std::make_unique<Side>(std::move(a.value()), 4 * kMiB);
    b_ = std::make_unique<Side>(std::move(b.value()), 4 * kMiB);
  }

  void connect(QueuePair& qa, QueuePair& qb) {
    ASSERT_TRUE(connect_qp(qa, 100, QpEndpoint{qb.qp_num(), 200, b_->gid()}));
    ASSERT_TRUE(connect_qp(qb, 200, QpEndpoint{qa.qp_num(), 100, a_->gid()}));
  }

  TempDir registry_;
  uint16_t port_ = 0;
  std::unique_ptr<Side> a_;
  std::unique_ptr<Side> b_;
};

TEST_F(UdpPairTest, DevicesGetDistinctQpnSlotsOnOneAddress) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  // Slots are the top 6 bits of the 24-bit QPN: different devices, different slots.
  EXPECT_NE(qa.qp_num() >> 18, qb.qp_num() >> 18);
  EXPECT_EQ(a_->gid(), b_->gid());
  Gid g = a_->gid();
  EXPECT_EQ(g[10], 0xFF);
  EXPECT_EQ(g[12], 127);
  EXPECT_EQ(g[15], 1);
  PortAttr port;
  ASSERT_TRUE(a_->dev.query_port(1, port));
  EXPECT_EQ(port.netdev, "lo");
  EXPECT_EQ(port.active_mtu, Mtu::k4096);  // lo's 65536 - 80 rounds down to 4096
  EXPECT_EQ(port.state, PortState::kActive);
}

TEST_F(UdpPairTest, RcEveryOperationWithOneMibAndZeroBytes) {
  QueuePair qa = a_->make_qp(QpType::kRc);
  QueuePair qb = b_->make_qp(QpType::kRc);
  connect(qa, qb);
  fill_pattern(a_->buf.data(), kMiB, 1);

  // SEND 1 MiB and SEND 0 bytes with immediate.
  const Sge r1 = b_->mr.sge(0, kMiB);
  const Sge r0 = b_->mr.sge(0, 0);
  ASSERT_TRUE(qb.post_recv(RecvWr{1, std::span<const Sge>(&r1, 1)}));
  ASSERT_TRUE(qb.post_recv(RecvWr{2, std::span<const Sge>(&r0, 1)}));
  const Sge s1 = a_->mr.sge(0, kMiB);
  ASSERT_TRUE(qa.post_send(make_wr(10, WrOpcode::kSend, &s1, 1)));
  SendWr zero = make_wr(11, WrOpcode::kSendWithImm, nullptr, 0);
  zero.imm_data = 0xCAFE;
  ASSERT_TRUE(qa.post_send(zero));
  auto sw = wait_wcs(a_->cq, 2);
  ASSERT_EQ(sw.size(), 2u);
  EXPECT_EQ(sw[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sw[1].status, WcStatus::kSuccess);
  auto rw = wait_wcs(b_->cq, 2);
  ASSERT_EQ(rw.size(), 2u);
  EXPECT_EQ(rw[0].wr_id, 1u);
  EXPECT_EQ(rw[0].byte_len, kMiB);
  EXPECT_EQ(rw[1].wr_id, 2u);
  EXPECT_EQ(rw[1].byte_len, 0u);
  EXPECT_EQ(rw[1].imm_data, 0xCAFEu);
  EXPECT_EQ(std::memcmp(b_->buf.data(), a_->buf.data(), kMiB), 0);

  // WRITE 1 MiB to B at 1 MiB, WRITE 0 bytes, READ 1 MiB back to A at 2 MiB, READ 0 bytes.
  const uint64_t b_addr = b_->mr.info().addr;
  SendWr w = make_wr(20, WrOpcode::kRdmaWrite, &s1, 1);
  w.rdma = {b_addr + kMiB, b_->mr.rkey()};
  SendWr w0 = make_wr(21, WrOpcode::kRdmaWrite, nullptr, 0);
  w0.rdma = {b_addr, b_->mr.rkey()};
  const Sge rd = a_->mr.sge(2 * kMiB, kMiB);
  SendWr r = make_wr(22, WrOpcode::kRdmaRead, &rd, 1);
  r.rdma = {b_addr + kMiB, b_->mr.rkey()};
  SendWr rz = make_wr(23, WrOpcode::kRdmaRead, nullptr, 0);
  rz.rdma = {b_addr, b_->mr.rkey()};
  for (const SendWr* wr : {&w, &w0, &r, &rz}) ASSERT_TRUE(qa.post_send(*wr));
  auto ow = wait_wcs(a_->cq, 4);
  ASSERT_EQ(ow.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ow[i].wr_id, 20u + i);
    EXPECT_EQ(ow[i].status, WcStatus::kSuccess) << i;
  }
  EXPECT_EQ(ow[2].byte_len, kMiB);
  EXPECT_EQ(std::memcmp(b_->buf.data() + kMiB, a_->buf.data(), kMiB), 0);
  EXPECT_EQ(std::memcmp(a_->buf.data() + 2 * kMiB, a_->buf.data(), kMiB), 0);

  // Atomics.
  uint64_t v = 5;
  std::memcpy(b_->buf.data() + 3 * kMiB, &v, 8);
  const Sge at = a_->mr.sge(3 * kMiB, 8);
  SendWr fa = make_wr(30, WrOpcode::kAtomicFetchAndAdd, &at, 1);
  fa.atomic = {b_addr + 3 * kMiB, 10, 0, b_->mr.rkey()};
  SendWr cs = make_wr(31, WrOpcode::kAtomicCmpAndSwp, &at, 1);
  cs.atomic = {b_addr + 3 * kMiB, 15, 99, b_->mr.rkey()};
  ASSERT_TRUE(qa.post_send(fa));
  ASSERT_EQ(wait_wcs(a_->cq, 1).at(0).status, WcStatus::kSuccess);
  std::memcpy(&v, a_->buf.data() + 3 * kMiB, 8);
  EXPECT_EQ(v, 5u);
  ASSERT_TRUE(qa.post_send(cs));
  ASSERT_EQ(wait_wcs(a_->cq, 1).at(0).status, WcStatus::kSuccess);
  std::memcpy(&v, a_->buf.data() + 3 * kMiB, 8);
  EXPECT_EQ(v, 15u);
  std::memcpy(&v, b_->buf.data() + 3 * kMiB, 8);
  EXPECT_EQ(v, 99u);
}

TEST_F(UdpPairTest, UcWriteAndSendWithOneMibAndZeroBytes) {
  QueuePair qa = a_->make_qp(QpType::kUc);
  QueuePair qb = b_->make_qp(QpType::kUc);
  connect(qa, qb);
  fill_pattern(a_->buf.data(), kMiB, 2);
  const Sge s1 = a_->mr.sge(0, kMiB);
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, &s1, 1);
  w.rdma = {b_->mr.info().addr + kMiB, b_->mr.rkey()};
  SendWr w0 = make_wr(2, WrOpcode::kRdmaWriteWithImm, nullptr, 0);
  w0.rdma = {b_->mr.info().addr, b_->mr.rkey()};
  w0.imm_data = 7;
  const Sge r1 = b_->mr.sge(0, kMiB);
  ASSERT_TRUE(qb.post_recv(RecvWr{50, std::span<const Sge>(&r1, 1)}));  // for WRITE_WITH_IMM
  ASSERT_TRUE(qb.post_recv(RecvWr{51, std::span<const Sge>(&r1, 1)}));  // for the SEND
  ASSERT_TRUE(qa.post_send(w));
  ASSERT_TRUE(qa.post_send(w0));
  ASSERT_TRUE(qa.post_send(make_wr(3, WrOpcode::kSend, &s1, 1)));
  auto sw = wait_wcs(a_->cq, 3);
  ASSERT_EQ(sw.size(), 3u);
  for (const Wc& wc : sw) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  auto rw = wait_wcs(b_->cq, 2);
  ASSERT_EQ(rw.size(), 2u);
  EXPECT_EQ(rw[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rw[0].byte_len, 0u);
  EXPECT_EQ(rw[0].imm_data, 7u);
  EXPECT_EQ(rw[1].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rw[1].byte_len, kMiB);
  EXPECT_EQ(std::memcmp(b_->buf.data() + kMiB, a_->buf.data(), kMiB), 0);
  EXPECT_EQ(std::memcmp(b_->buf.data(), a_->buf.data(), kMiB), 0);
}

TEST_F(UdpPairTest, UdSendFullMtuAndZeroBytes) {
  QueuePair qa = a_->make_qp(QpType::kUd);
  QueuePair qb = b_->make_qp(QpType::kUd);
  connect(qa, qb);
  auto ah = a_->pd.create_ah(make_ah_attr(b_->gid()));
  ASSERT_TRUE(ah.is_ok()) << ah.status().message();
  fill_pattern(a_->buf.data(), 4096, 3);
  const Sge r = b_->mr.sge(0, 40 + 4096);
  ASSERT_TRUE(qb.post_recv(RecvWr{1, std::span<const Sge>(&r, 1)}));
  ASSERT_TRUE(qb.post_recv(RecvWr{2, std::span<const Sge>(&r, 1)}));
  const Sge s = a_->mr.sge(0, 4096);
  for (uint32_t len : {4096u, 0u}) {
    SendWr wr = make_wr(len, WrOpcode::kSend, &s, len ? 1 : 0);
    wr.ud.ah = ah->attr();
    wr.ud.remote_qpn = qb.qp_num();
    wr.ud.remote_qkey = ConnectOptions{}.qkey;
    ASSERT_TRUE(qa.post_send(wr));
    ASSERT_EQ(wait_wcs(a_->cq, 1).at(0).status, WcStatus::kSuccess);
    auto rw = wait_wcs(b_->cq, 1);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, WcStatus::kSuccess);
    EXPECT_EQ(rw[0].byte_len, 40 + len);
    EXPECT_EQ(rw[0].src_qp, qa.qp_num());
    if (len != 0) {
      EXPECT_EQ(std::memcmp(b_->buf.data() + 40, a_->buf.data(), len), 0);
    }
  }
  // A UD message longer than the MTU is refused at post time or completes in error.
  const Sge big = a_->mr.sge(0, 4097);
  SendWr wr = make_wr(9, WrOpcode::kSend, &big, 1);
  wr.ud.ah = ah->attr();
  wr.ud.remote_qpn = qb.qp_num();
  wr.ud.remote_qkey = ConnectOptions{}.qkey;
  Status st = qa.post_send(wr);
  if (st) {
    EXPECT_NE(wait_wcs(a_->cq, 1).at(0).status, WcStatus::kSuccess);
  }
}

TEST_F(UdpPairTest, SixtyFourQpsAtOnce) {
  constexpr size_t kQps = 64;
  constexpr size_t kChunk = 64 << 10;
  std::vector<QueuePair> qas;
  std::vector<QueuePair> qbs;
  for (size_t i = 0; i < kQps; ++i) {
    qas.push_back(a_->make_qp(QpType::kRc));
    qbs.push_back(b_->make_qp(QpType::kRc));
    connect(qas.back(), qbs.back());
  }
  fill_pattern(a_->buf.data(), kQps * kChunk, 4);
  std::vector<Sge> sges(kQps);
  for (size_t i = 0; i < kQps; ++i) {
    sges[i] = a_->mr.sge(i * kChunk, kChunk);
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, &sges[i], 1);
    w.rdma = {b_->mr.info().addr + i * kChunk, b_->mr.rkey()};
    ASSERT_TRUE(qas[i].post_send(w));
  }
  auto wcs = wait_wcs(a_->cq, kQps, std::chrono::seconds(30));
  ASSERT_EQ(wcs.size(), kQps);
  std::vector<bool> seen(kQps);
  for (const Wc& wc : wcs) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    seen.at(wc.wr_id) = true;
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(kQps));
  EXPECT_EQ(std::memcmp(b_->buf.data(), a_->buf.data(), kQps * kChunk), 0);
}

TEST_F(UdpPairTest, GidWithoutABoundAddressIsRefused) {
  // Only 127.0.0.1 is bound: lo's index 0 (::1) has no socket.
  QueuePair qa = a_->make_qp(QpType::kRc);
  ConnectOptions opt;
  opt.sgid_index = 0;
  Status st = connect_qp(qa, 1, QpEndpoint{0x11, 1, b_->gid()}, opt);
  EXPECT_EQ(st.code(), EADDRNOTAVAIL);
  EXPECT_NE(std::string(st.message()).find("bind"), std::string::npos);
}

TEST(DeviceListTest, ListsLoWithItsIpv4GidAtIndexOne) {
  const auto devices = Device::list();
  ASSERT_GE(devices.size(), 1u);
  // One device per netdev with one port; loopback is the last device.
  EXPECT_EQ(devices.back().name, "uroce_lo");
  for (const DeviceInfo& d : devices) {
    ASSERT_EQ(d.ports.size(), 1u) << d.name;
    EXPECT_EQ(d.ports[0].port_num, 1) << d.name;
    EXPECT_EQ(d.name, "uroce_" + d.ports[0].netdev);
  }
  ASSERT_EQ(devices.back().ports[0].netdev, "lo");
  const PortInfo* lo = &devices.back().ports[0];
  EXPECT_EQ(Device::list({"lo"}).size(), 1u);
  ASSERT_GE(lo->gids.size(), 2u);
  const Gid v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1};
  EXPECT_EQ(lo->gids[1], v4);
  EXPECT_EQ(lo->active_mtu, Mtu::k4096);
}

class OpenErrorTest : public ::testing::Test {
 protected:
  TempDir registry_;
  uint16_t port_ = pick_udp_port();
};

TEST_F(OpenErrorTest, PortHeldByAnotherProgram) {
  // A plain socket without SO_REUSEPORT holds the port: uroce cannot join it.
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port_);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  auto r = Device::open(loopback_options(port_, registry_.path()));
  close(fd);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().code, EADDRINUSE);
  EXPECT_NE(r.error().message.find(std::to_string(port_)), std::string::npos) << r.error().message;
}

TEST_F(OpenErrorTest, AddressWithoutGid) {
  OpenOptions o = loopback_options(port_, registry_.path());
  o.bind = {"192.0.2.77"};
  auto r = Device::open(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().code, EADDRNOTAVAIL);
  EXPECT_NE(r.error().message.find("192.0.2.77"), std::string::npos) << r.error().message;
}

TEST_F(OpenErrorTest, MtuOverrideMustBeAnIbMtu) {
  OpenOptions o = loopback_options(port_, registry_.path());
  o.active_mtu = 1500;
  auto r = Device::open(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_NE(r.error().message.find("256, 512, 1024, 2048 or 4096"), std::string::npos);
  o.active_mtu = 1024;
  auto ok = Device::open(o);
  ASSERT_TRUE(ok.is_ok()) << ok.error().message;
  PortAttr port;
  ASSERT_TRUE(ok.value().query_port(1, port));
  EXPECT_EQ(port.active_mtu, Mtu::k1024);
}

// The Cpus_allowed_list line of /proc/<path>/status ("0-1", say).
std::string cpus_allowed(const std::filesystem::path& status_file) {
  std::ifstream status(status_file);
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("Cpus_allowed_list:")) {
      return line.substr(line.find_first_not_of(" \t", 18));
    }
  }
  return {};
}

// The Cpus_allowed_list of each thread of this process named uroce-progress, once there are
// `count` of them with `want` (a thread names and pins itself as it starts), or after 5 s.
std::vector<std::string> progress_thread_cpus(size_t count, const std::string& want) {
  std::vector<std::string> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    out.clear();
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name) && name == "uroce-progress") {
        out.push_back(cpus_allowed(task.path() / "status"));
      }
    }
    if (out == std::vector<std::string>(count, want) ||
        std::chrono::steady_clock::now() > deadline) {
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_F(OpenErrorTest, TheProgressThreadRunsOnTheCpusItIsGiven) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) last = c;
  }
  ASSERT_GE(last, 0);
  ASSERT_FALSE(CPU_ISSET(1023, &allowed)) << "a host with 1024 CPUs: pick another";
  OpenOptions o = loopback_options(port_, registry_.path());
  // The kernel's own list syntax ("0-1"): what the error below quotes.
  const std::string mine = cpus_allowed("/proc/thread-self/status");
  {
    // Without a list: named, on the CPUs of the thread that opened the device.
    auto inherited = Device::open(o);
    ASSERT_TRUE(inherited.is_ok()) << inherited.error().message;
    EXPECT_EQ(progress_thread_cpus(1, mine), std::vector<std::string>{mine});
  }
  o.progress.cpus = {last};
  {
    auto pinned = Device::open(o);
    ASSERT_TRUE(pinned.is_ok()) << pinned.error().message;
    const std::string want = std::to_string(last);
    EXPECT_EQ(progress_thread_cpus(1, want), std::vector<std::string>{want});
  }
  o.progress.cpus = {last, 1023};
  auto refused = Device::open(o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.error().code, EINVAL);
  EXPECT_EQ(refused.error().message,
            "UROCE_PROGRESS_CPUS: CPU 1023 is not one this process may run on (" + mine +
                "); name CPUs from that list, or widen the process's affinity (taskset)");
}

TEST_F(OpenErrorTest, UnknownNetdev) {
  OpenOptions o = loopback_options(port_, registry_.path());
  o.netdevs = {"nosuchnetdev0"};
  auto r = Device::open(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().code, ENODEV);
  EXPECT_NE(r.error().message.find("nosuchnetdev0"), std::string::npos);
}

// Device names: uroce_<netdev>, the deprecated alias uroce0 for the first device, and a
// name that does not exist, which lists the devices there are.
TEST_F(OpenErrorTest, DeviceNamesAndTheDeprecatedAlias) {
  OpenOptions o = loopback_options(port_, registry_.path());
  for (const char* name : {"", "uroce0", "uroce_lo"}) {
    o.name = name;
    auto r = Device::open(o);
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.error().message;
    EXPECT_EQ(r.value().name(), "uroce_lo") << name;
    EXPECT_EQ(r.value().query_device().phys_port_cnt, 1) << name;
  }
  o.name = "uroce_eth9";
  auto r = Device::open(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error().code, ENODEV);
  EXPECT_EQ(r.error().message, "IB device uroce_eth9 not found; uroce provides uroce_lo");
}

// Without a name, addresses to bind choose their device: 127.0.0.1 opens uroce_lo even where
// another netdev's device is first in the list.
TEST_F(OpenErrorTest, BindAddressesChooseTheDevice) {
  OpenOptions o = loopback_options(port_, registry_.path());
  o.netdevs.clear();
  auto r = Device::open(o);
  ASSERT_TRUE(r.is_ok()) << r.error().message;
  EXPECT_EQ(r.value().name(), "uroce_lo");
}

}  // namespace
}  // namespace uroce::itest
