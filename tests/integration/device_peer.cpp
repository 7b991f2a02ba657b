// uroce_device_peer: the passive side of the two-process device tests. Opens a device,
// creates QPs of one type over one registered buffer, then obeys one-line commands on stdin
// and answers on stdout (see device_process_test.cpp for the conversation):
//   READY <gid> <addr> <rkey> <qpn,...>        printed at start
//   CONNECT <gid> <psn> <qpn,...>   -> OK      RC/UC: QP i connects to qpn i; UD: to RTS
//   POST_RECV <qp> <count> <offset> <len> -> OK
//   WAIT_RECV <count> <timeout_ms>  -> RECVD <n> <n_success> <total_bytes>
//   FILL <offset> <len> <seed>      -> OK      HASH <offset> <len> -> HASH <fnv1a>
//   READ64 <offset>                 -> VALUE <v>
//   QUIT
// One-sided operations need nothing from here: the device's progress thread serves them
// while this program sits in a blocking read of stdin.
#include <cstdlib>
#include <iostream>
#include <string>

#include "device_integration_util.hpp"

using namespace uroce;
using namespace uroce::itest;

int main(int argc, char** argv) {
  OpenOptions opts;
  std::string type = "rc";
  size_t qps = 1;
  size_t buf_bytes = 4 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--port") opts.udp_port = static_cast<uint16_t>(std::stoul(v));
    if (k == "--registry") opts.registry_dir = v;
    if (k == "--bind") opts.bind.push_back(v);
    if (k == "--netdev") opts.netdevs.push_back(v);
    if (k == "--type") type = v;
    if (k == "--qps") qps = std::stoul(v);
    if (k == "--buf") buf_bytes = std::stoul(v);
  }
  auto opened = Device::open(opts);
  if (!opened) {
    std::cout << "ERR " << opened.error().code << " " << opened.error().message << std::endl;
    return 1;
  }
  Device& dev = opened.value();
  ProtectionDomain pd = std::move(dev.alloc_pd().value());
  CompletionQueue cq = std::move(dev.create_cq(8192).value());
  std::vector<uint8_t> buf(buf_bytes);
  MemoryRegion mr = std::move(pd.reg_mr(buf.data(), buf.size(), kAllAccess).value());
  const QpType qp_type = type == "ud" ? QpType::kUd : type == "uc" ? QpType::kUc : QpType::kRc;
  std::vector<QueuePair> qp_list;
  std::vector<uint32_t> qpns;
  for (size_t i = 0; i < qps; ++i) {
    QpInitAttr init;
    init.qp_type = qp_type;
    init.send_cq = cq.id();
    init.recv_cq = cq.id();
    init.cap = QpCap{64, 1024, 1, 1, 0};
    auto qp = pd.create_qp(init);
    if (!qp) {
      std::cout << "ERR " << qp.status().code() << " " << qp.status().message() << std::endl;
      return 1;
    }
    qpns.push_back(qp->qp_num());
    qp_list.push_back(std::move(qp.value()));
  }
  Gid gid{};
  (void)dev.query_gid(1, 1, gid);
  std::cout << "READY " << gid_hex(gid) << " " << mr.info().addr << " " << mr.rkey() << " "
            << join(qpns) << std::endl;

  std::string line;
  // The buffer is shared with the remote peer: FILL happens before the parent lets the peer
  // READ it, and a remote WRITE completes before the parent asks for HASH. That order runs
  // through other processes (pipes, UDP), which ThreadSanitizer cannot follow, so this
  // process would look racy between its main thread and the progress thread that copies to
  // and from the buffer. Reading the CQ's capacity is an engine call, so it takes the engine
  // lock that the progress thread holds while it copies, and makes the order the protocol
  // guarantees visible to TSan. (A poll no longer does: it reads the CQ without that lock.)
  auto order_with_device = [&cq] { (void)cq.capacity(); };
  while (std::getline(std::cin, line)) {
    const auto w = words(line);
    if (w.empty()) continue;
    const std::string& cmd = w[0];
    if (cmd == "QUIT") return 0;
    if (cmd == "CONNECT" && w.size() == 4) {
      const Gid remote_gid = gid_from_hex(w[1]);
      const uint32_t psn = static_cast<uint32_t>(std::stoul(w[2]));
      const auto remote = split_u32(w[3]);
      Status st;
      for (size_t i = 0; i < qp_list.size() && st; ++i) {
        const uint32_t rq = i < remote.size() ? remote[i] : 0;
        st = connect_qp(qp_list[i], 1000, QpEndpoint{rq, psn, remote_gid});
      }
      if (st) {
        std::cout << "OK" << std::endl;
      } else {
        std::cout << "ERR " << st.code() << " " << st.message() << std::endl;
      }
    } else if (cmd == "POST_RECV" && w.size() == 5) {
      const size_t q = std::stoul(w[1]);
      const size_t count = std::stoul(w[2]);
      const uint64_t off = std::stoull(w[3]);
      const uint32_t len = static_cast<uint32_t>(std::stoul(w[4]));
      Status st;
      for (size_t i = 0; i < count && st; ++i) {
        const Sge sge = mr.sge(off, len);
        st = qp_list.at(q).post_recv(RecvWr{i, std::span<const Sge>(&sge, 1)});
      }
      std::cout << (st ? "OK" : "ERR") << std::endl;
    } else if (cmd == "WAIT_RECV" && w.size() == 3) {
      const auto wcs = wait_wcs(cq, std::stoul(w[1]), std::chrono::milliseconds(std::stoul(w[2])));
      size_t ok = 0;
      uint64_t bytes = 0;
      for (const Wc& wc : wcs) {
        if (wc.status == WcStatus::kSuccess) ++ok;
        bytes += wc.byte_len;
      }
      std::cout << "RECVD " << wcs.size() << " " << ok << " " << bytes << std::endl;
    } else if (cmd == "FILL" && w.size() == 4) {
      fill_pattern(buf.data() + std::stoull(w[1]), std::stoull(w[2]),
                   static_cast<uint32_t>(std::stoul(w[3])));
      order_with_device();
      std::cout << "OK" << std::endl;
    } else if (cmd == "HASH" && w.size() == 3) {
      order_with_device();
      std::cout << "HASH " << fnv1a(buf.data() + std::stoull(w[1]), std::stoull(w[2])) << std::endl;
    } else if (cmd == "READ64" && w.size() == 2) {
      order_with_device();
      uint64_t v = 0;
      std::memcpy(&v, buf.data() + std::stoull(w[1]), 8);
      std::cout << "VALUE " << v << std::endl;
    } else {
      std::cout << "ERR unknown command" << std::endl;
    }
  }
  return 0;
}
