// rc_pingpong_client_server: ibv_rc_pingpong on the uroce C++ API. The server waits for one
// client on a TCP side channel; both exchange "QPN:PSN:GID" (ibv_rc_pingpong's message
// without the LID), connect an RC QP and bounce a message of --size bytes --iters times with
// SEND/RECV, optionally sleeping on the completion channel (--events) instead of polling.
//
//   server:  rc_pingpong_client_server [options]
//   client:  rc_pingpong_client_server [options] SERVER_ADDRESS
//   options: --tcp-port 18515  --udp-port 4791  --bind ADDR  --netdev NAME  --gid-idx 1
//            --size 4096  --iters 1000  --mtu 1024  --events
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "uroce/connect.hpp"
#include "uroce/verbs.hpp"

namespace {

struct Args {
  std::string server;
  uint16_t tcp_port = 18515;
  uroce::OpenOptions open;
  uint8_t gid_idx = 1;
  size_t size = 4096;
  int iters = 1000;
  uroce::Mtu mtu = uroce::Mtu::k1024;
  bool events = false;
};

int die(const std::string& what) {
  std::fprintf(stderr, "rc_pingpong: %s\n", what.c_str());
  return 1;
}

// The TCP side channel: the server listens and accepts one client.
int side_channel(const Args& args) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = args.server.empty() ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(args.tcp_port);
  if (getaddrinfo(args.server.empty() ? nullptr : args.server.c_str(), port.c_str(), &hints,
                  &res) != 0) {
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, 0);
    if (fd < 0) continue;
    if (args.server.empty()) {
      int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1) == 0) {
        int c = accept(fd, nullptr, nullptr);
        close(fd);
        fd = c;
      } else {
        close(fd);
        fd = -1;
      }
    } else {
      // The server may not be listening yet: retry for a few seconds.
      int rc = -1;
      for (int i = 0; i < 50 && rc != 0; ++i) {
        rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0) usleep(100000);
      }
      if (rc != 0) {
        close(fd);
        fd = -1;
      }
    }
  }
  freeaddrinfo(res);
  return fd;
}

std::string gid_text(const uroce::Gid& g) {
  std::string s;
  char b[3];
  for (uint8_t v : g) {
    std::snprintf(b, sizeof b, "%02x", v);
    s += b;
  }
  return s;
}

bool exchange(int fd, const uroce::QpEndpoint& mine, uroce::QpEndpoint& theirs) {
  char msg[64];
  std::snprintf(msg, sizeof msg, "%06x:%06x:%s", mine.qpn, mine.psn, gid_text(mine.gid).c_str());
  if (write(fd, msg, 46) != 46) return false;
  char in[47] = {};
  size_t got = 0;
  while (got < 46) {
    ssize_t n = read(fd, in + got, 46 - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  unsigned qpn = 0, psn = 0;
  char gid[33] = {};
  if (std::sscanf(in, "%6x:%6x:%32s", &qpn, &psn, gid) != 3) return false;
  theirs.qpn = qpn;
  theirs.psn = psn;
  for (int i = 0; i < 16; ++i) {
    char byte[3] = {gid[2 * i], gid[2 * i + 1], 0};
    theirs.gid[static_cast<size_t>(i)] = static_cast<uint8_t>(std::strtoul(byte, nullptr, 16));
  }
  return true;
}

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (k == "--tcp-port") {
      a.tcp_port = static_cast<uint16_t>(std::atoi(next()));
    } else if (k == "--udp-port") {
      a.open.udp_port = static_cast<uint16_t>(std::atoi(next()));
    } else if (k == "--bind") {
      a.open.bind.push_back(next());
    } else if (k == "--netdev") {
      a.open.netdevs.push_back(next());
    } else if (k == "--gid-idx") {
      a.gid_idx = static_cast<uint8_t>(std::atoi(next()));
    } else if (k == "--size") {
      a.size = std::strtoull(next(), nullptr, 0);
    } else if (k == "--iters") {
      a.iters = std::atoi(next());
    } else if (k == "--mtu") {
      const int m = std::atoi(next());
      a.mtu = m >= 4096   ? uroce::Mtu::k4096
              : m >= 2048 ? uroce::Mtu::k2048
              : m >= 1024 ? uroce::Mtu::k1024
              : m >= 512  ? uroce::Mtu::k512
                          : uroce::Mtu::k256;
    } else if (k == "--events") {
      a.events = true;
    } else if (!k.empty() && k[0] != '-') {
      a.server = k;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    return die(
        "usage: rc_pingpong_client_server [--tcp-port P] [--udp-port P] [--bind ADDR] "
        "[--netdev NAME] [--gid-idx N] [--size B] [--iters N] [--mtu M] [--events] "
        "[SERVER]");
  }
  const bool server = args.server.empty();
  auto opened = uroce::Device::open(args.open);
  if (!opened) return die(opened.error().message);
  uroce::Device& dev = opened.value();

  auto pd = dev.alloc_pd();
  auto channel = dev.create_comp_channel();
  if (!pd || !channel) return die("alloc_pd / create_comp_channel failed");
  auto cq = dev.create_cq(16, args.events ? &channel.value() : nullptr);
  if (!cq) return die(cq.status().message());
  std::vector<uint8_t> buf(args.size + 1);
  auto mr = pd.value().reg_mr(buf.data(), buf.size(), uroce::kAccessLocalWrite);
  if (!mr) return die(mr.status().message());
  uroce::QpInitAttr init;
  init.qp_type = uroce::QpType::kRc;
  init.send_cq = cq->id();
  init.recv_cq = cq->id();
  init.cap = {1, 2, 1, 1, 0};
  auto qp = pd.value().create_qp(init);
  if (!qp) return die(qp.status().message());

  uroce::QueuePair& q = qp.value();
  uroce::CompletionQueue& c = cq.value();
  uroce::CompletionChannel& ch = channel.value();
  uroce::QpEndpoint mine;
  mine.qpn = q.qp_num();
  mine.psn = std::random_device{}() & 0xFFFFFF;
  uroce::Status st = dev.query_gid(1, args.gid_idx, mine.gid);
  if (!st)
    return die(std::string("GID index ") + std::to_string(args.gid_idx) + ": " + st.message());
  const int fd = side_channel(args);
  if (fd < 0) return die("TCP side channel on port " + std::to_string(args.tcp_port) + " failed");
  uroce::QpEndpoint theirs;
  if (!exchange(fd, mine, theirs)) return die("side-channel exchange failed");
  std::printf("  local address:  QPN 0x%06x, PSN 0x%06x, GID %s\n", mine.qpn, mine.psn,
              gid_text(mine.gid).c_str());
  std::printf("  remote address: QPN 0x%06x, PSN 0x%06x, GID %s\n", theirs.qpn, theirs.psn,
              gid_text(theirs.gid).c_str());

  uroce::ConnectOptions copt;
  copt.sgid_index = args.gid_idx;
  copt.path_mtu = args.mtu;
  st = uroce::connect_qp(q, mine.psn, theirs, copt);
  if (!st) return die(std::string("connect: ") + st.message());

  const uroce::Sge sge = mr->sge(0, static_cast<uint32_t>(args.size));
  const uroce::RecvWr recv{1, std::span<const uroce::Sge>(&sge, 1)};
  uroce::SendWr send;
  send.wr_id = 2;
  send.opcode = uroce::WrOpcode::kSend;
  send.send_flags = uroce::kSendSignaled;
  send.sg_list = std::span<const uroce::Sge>(&sge, 1);

  // Both sides have a receive posted before either sends: a barrier byte on the side channel.
  if (!q.post_recv(recv)) return die("post_recv failed");
  char sync = 'x';
  if (write(fd, &sync, 1) != 1 || read(fd, &sync, 1) != 1) return die("sync failed");

  auto next_wc = [&](uroce::Wc& wc) -> bool {
    for (;;) {
      if (c.poll(std::span<uroce::Wc>(&wc, 1)) == 1) return true;
      if (args.events) {
        if (!c.req_notify(false)) return false;
        if (c.poll(std::span<uroce::Wc>(&wc, 1)) == 1) return true;
        auto ev = ch.get_event(std::chrono::seconds(10));
        if (!ev) return false;
        c.ack_events(1);
      }
    }
  };

  const auto start = std::chrono::steady_clock::now();
  int received = 0;
  if (!server && !q.post_send(send)) return die("post_send failed");
  while (received < args.iters) {
    uroce::Wc wc;
    if (!next_wc(wc)) return die("waiting for a completion failed");
    if (wc.status != uroce::WcStatus::kSuccess) {
      return die("completion with status " + std::to_string(static_cast<int>(wc.status)));
    }
    if (wc.opcode != uroce::WcOpcode::kRecv) continue;
    ++received;
    if (received < args.iters || server) {
      if (received < args.iters && !q.post_recv(recv)) return die("post_recv failed");
      if (!q.post_send(send)) return die("post_send failed");
    }
  }
  // Drain the last send completion.
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%zu bytes in %.3f seconds = %.2f Mbit/sec\n",
              args.size * static_cast<size_t>(args.iters) * 2, secs,
              static_cast<double>(args.size) * args.iters * 2 * 8 / secs / 1e6);
  std::printf("%d iters in %.3f seconds = %.2f usec/iter\n", args.iters, secs,
              secs * 1e6 / args.iters);
  // Let the peer see our last message acknowledged before the QP goes away.
  if (write(fd, &sync, 1) != 1 || read(fd, &sync, 1) != 1) return die("final sync failed");
  close(fd);
  return 0;
}
