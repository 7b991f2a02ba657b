// rc_write: two RC QPs in one process over UDP on loopback. Opens the device twice (two
// members sharing 127.0.0.1:<port> through the reuseport steering), registers a buffer on
// each, connects the QPs, RDMA WRITEs from one to the other and checks every byte.
//
//   rc_write [--port 4791] [--size 1048576] [--iters 10]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "uroce/connect.hpp"
#include "uroce/verbs.hpp"

namespace {

struct Endpoint {
  uroce::Device dev;
  uroce::ProtectionDomain pd;
  uroce::CompletionQueue cq;
  std::vector<uint8_t> buf;
  uroce::MemoryRegion mr;
  uroce::QueuePair qp;
};

int fail(const char* what, const uroce::Status& st) {
  std::fprintf(stderr, "rc_write: %s: %s (errno %d)\n", what, st.message(), st.code());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  uint16_t port = 4791;
  size_t size = 1 << 20;
  int iters = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--port") port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    if (k == "--size") size = std::strtoull(argv[i + 1], nullptr, 0);
    if (k == "--iters") iters = std::atoi(argv[i + 1]);
  }
  uroce::OpenOptions options;
  options.netdevs = {"lo"};
  options.bind = {"127.0.0.1"};
  options.udp_port = port;

  std::vector<Endpoint> ends;
  for (int i = 0; i < 2; ++i) {
    auto opened = uroce::Device::open(options);
    if (!opened) {
      std::fprintf(stderr, "rc_write: %s\n", opened.error().message.c_str());
      return 1;
    }
    uroce::Device dev = std::move(opened.value());
    auto pd = dev.alloc_pd();
    if (!pd) return fail("alloc_pd", pd.status());
    auto cq = dev.create_cq(64);
    if (!cq) return fail("create_cq", cq.status());
    std::vector<uint8_t> buf(size);
    auto mr = pd.value().reg_mr(buf.data(), buf.size(),
                                uroce::kAccessLocalWrite | uroce::kAccessRemoteWrite);
    if (!mr) return fail("reg_mr", mr.status());
    uroce::QpInitAttr init;
    init.qp_type = uroce::QpType::kRc;
    init.send_cq = cq->id();
    init.recv_cq = cq->id();
    init.cap = {16, 16, 1, 1, 0};
    auto qp = pd.value().create_qp(init);
    if (!qp) return fail("create_qp", qp.status());
    ends.push_back(Endpoint{std::move(dev), std::move(pd.value()), std::move(cq.value()),
                            std::move(buf), std::move(mr.value()), std::move(qp.value())});
  }
  Endpoint& a = ends[0];
  Endpoint& b = ends[1];
  uroce::Gid gid_a{}, gid_b{};
  (void)a.dev.query_gid(1, 1, gid_a);
  (void)b.dev.query_gid(1, 1, gid_b);
  uroce::ConnectOptions copt;
  copt.path_mtu = uroce::Mtu::k4096;
  uroce::Status st = uroce::connect_qp(a.qp, 1, {b.qp.qp_num(), 2, gid_b}, copt);
  if (!st) return fail("connect a", st);
  st = uroce::connect_qp(b.qp, 2, {a.qp.qp_num(), 1, gid_a}, copt);
  if (!st) return fail("connect b", st);

  for (size_t i = 0; i < size; ++i) a.buf[i] = static_cast<uint8_t>(i * 31 + 7);
  const uroce::Sge sge = a.mr.sge(0, static_cast<uint32_t>(size));
  uroce::SendWr wr;
  wr.opcode = uroce::WrOpcode::kRdmaWrite;
  wr.send_flags = uroce::kSendSignaled;
  wr.sg_list = std::span<const uroce::Sge>(&sge, 1);
  wr.rdma = {b.mr.info().addr, b.mr.rkey()};

  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    wr.wr_id = static_cast<uint64_t>(i);
    st = a.qp.post_send(wr);
    if (!st) return fail("post_send", st);
    uroce::Wc wc;
    while (a.cq.poll(std::span<uroce::Wc>(&wc, 1)) == 0) std::this_thread::yield();
    if (wc.status != uroce::WcStatus::kSuccess) {
      std::fprintf(stderr, "rc_write: WRITE completed with status %d\n",
                   static_cast<int>(wc.status));
      return 1;
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (std::memcmp(a.buf.data(), b.buf.data(), size) != 0) {
    std::fprintf(stderr, "rc_write: target bytes differ\n");
    return 1;
  }
  std::printf("rc_write: %d x %zu bytes written and verified, %.1f MB/s\n", iters, size,
              static_cast<double>(size) * iters / secs / 1e6);
  return 0;
}
