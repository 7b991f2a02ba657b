// `uroce pingpong [--transport rc|uc|ud] [--srq] [HOST]`: rdma-core's ibv_rc_pingpong,
// ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong on uroce, with their flags, their
// TCP exchange (pingpong_dest.hpp: "%04x:%06x:%06x:<gid>" messages, port 18515, the client
// writes first, then "done") and their output, so either side can be a real rdma-core
// program on a RoCE NIC or rxe.
//
// One difference on purpose: rdma-core without -g sends no GRH, which RoCE cannot carry.
// Without -g uroce uses the GID whose address the TCP connection runs over, so it connects
// the local side channel first and prints "local address" after that.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/cc_options.hpp"
#include "cli/command.hpp"
#include "cli/oob_socket.hpp"
#include "cli/peer_diagnosis.hpp"
#include "cli/perf_run.hpp"
#include "cli/pingpong_dest.hpp"
#include "cli/verbs_setup.hpp"
#include "cli/watchdog.hpp"

namespace uroce::cli {
namespace {

using transport::QpType;
using transport::Sge;
using transport::Wc;
using transport::WcStatus;

constexpr const char* kPingpongCommand = "uroce pingpong";
constexpr uint64_t kRecvWrid = 1;
constexpr uint64_t kSendWrid = 2;
constexpr int kSrqMaxQp = 256;  // srq_pingpong's MAX_QP: it always exchanges 256 messages
constexpr uint32_t kPingpongUdGrh = 40;
constexpr size_t kPageSize = 4096;
constexpr auto kPingpongStallLimit = std::chrono::seconds(10);
constexpr Nanos kPingpongEventWait = std::chrono::milliseconds(100);

struct PingpongOptions {
  std::string host;
  std::string transport = "rc";
  bool srq = false;
  uint16_t port = 18515;
  std::string device;
  std::optional<int> ib_port;
  std::optional<uint32_t> size;
  uint32_t mtu = 1024;
  int num_qp = 16;
  int rx_depth = 500;
  int iters = 1000;
  int sl = 0;
  bool events = false;
  int gid_index = -1;
  bool check = false;
  double timeout = 0;
  CcCliOptions cc;  // --cc, --dcqcn
};

struct Pingpong {
  std::shared_ptr<device::Device> dev;
  QpType type = QpType::kRc;
  bool srq_mode = false;
  bool ud = false;
  uint32_t size = 0;
  int rx_depth = 0;
  int num_qp = 1;
  GidChoice gid;
  // Declared parents first, so children go first (QPs, the SRQ, the MR, the CQ, its
  // channel, the PD), as ibverbs wants them destroyed.
  std::optional<ProtectionDomain> pd;
  std::optional<CompletionChannel> channel;
  std::optional<CompletionQueue> cq;
  std::unique_ptr<RegisteredBuffer> buf;
  std::optional<SharedReceiveQueue> srq;
  std::vector<QueuePair> qps;
  transport::AhAttr ah;  // UD
  std::vector<PingpongDest> remote;
  uint32_t send_flags = transport::kSendSignaled;

  [[nodiscard]] uint32_t recv_length() const { return ud ? size + kPingpongUdGrh : size; }

  int post_recv(int n) {
    const Sge sge{buf->addr(), recv_length(), buf->mr().lkey()};
    transport::RecvWr wr;
    wr.wr_id = kRecvWrid;
    wr.sg_list = std::span<const Sge>(&sge, 1);
    int i = 0;
    for (; i < n; ++i) {
      const auto st = srq ? srq->post_recv(wr) : qps[0].post_recv(wr);
      if (!st) break;
    }
    return i;
  }

  transport::Status post_send(int qp_index) {
    const Sge sge{buf->addr() + (ud ? kPingpongUdGrh : 0), size, buf->mr().lkey()};
    transport::SendWr wr;
    wr.wr_id = kSendWrid;
    wr.sg_list = std::span<const Sge>(&sge, 1);
    wr.opcode = transport::WrOpcode::kSend;
    wr.send_flags = send_flags;
    if (ud) {
      wr.ud.ah = ah;
      wr.ud.remote_qpn = remote[0].qpn;
      wr.ud.remote_qkey = kPingpongQkey;
    }
    return qps[static_cast<size_t>(qp_index)].post_send(wr);
  }

  int poll(std::span<Wc> out) {
    int n = cq->poll(out);
    if (n != 0 || !channel) return n;
    if (!cq->req_notify(false)) return -1;
    n = cq->poll(out);
    if (n != 0) return n;
    // The channel serves this one CQ, so the event is its.
    if (auto ev = channel->get_event(kPingpongEventWait); ev) cq->ack_events(1);
    return cq->poll(out);
  }

  // What both halves of the connection use: the QPs take no remote access (SEND only).
  [[nodiscard]] ConnectOptions connect_options(const PingpongOptions& o) const {
    ConnectOptions c = cli_connect_options(gid, 0);
    c.path_mtu = mtu_from_bytes(o.mtu).value_or(transport::Mtu::k1024);
    c.max_rd_atomic = 1;
    c.max_dest_rd_atomic = 1;
    c.sl = static_cast<uint8_t>(o.sl);
    return c;
  }
};

int fail(const std::string& message) {
  fmt::print(stderr, "{}: {}\n", kPingpongCommand, message);
  return kExitFailure;
}

// Creates PD, channel, CQ, SRQ, QPs (moved to INIT) and the buffer, like pp_init_ctx.
bool init_ctx(Pingpong& pp, const PingpongOptions& o, std::string& error) {
  Device d(pp.dev);
  auto pd = d.alloc_pd();
  if (!pd) {
    error = "Couldn't allocate PD";
    return false;
  }
  pp.pd.emplace(std::move(pd.value()));
  if (o.events) {
    auto ch = d.create_comp_channel();
    if (!ch) {
      error = "Couldn't create completion channel";
      return false;
    }
    pp.channel.emplace(std::move(ch.value()));
  }
  const size_t bytes = pp.ud ? pp.size + kPingpongUdGrh : pp.size;
  pp.buf = RegisteredBuffer::create(*pp.pd, bytes, transport::kAccessLocalWrite, error);
  if (!pp.buf) return false;
  std::memset(pp.buf->data(), 0x7b, bytes);  // what the rdma-core examples send
  auto cq = d.create_cq(static_cast<uint32_t>(pp.rx_depth + pp.num_qp),
                        pp.channel ? &*pp.channel : nullptr);
  if (!cq) {
    error = "Couldn't create CQ";
    return false;
  }
  pp.cq.emplace(std::move(cq.value()));
  if (pp.srq_mode) {
    transport::SrqInitAttr attr;
    attr.max_wr = static_cast<uint32_t>(pp.rx_depth);
    attr.max_sge = 1;
    auto srq = pp.pd->create_srq(attr);
    if (!srq) {
      error = fmt::format("Couldn't create SRQ: {}", srq.status().message());
      return false;
    }
    pp.srq.emplace(std::move(srq.value()));
  }
  const ConnectOptions options = pp.connect_options(o);
  for (int i = 0; i < pp.num_qp; ++i) {
    transport::QpInitAttr init;
    init.qp_type = pp.type;
    init.send_cq = pp.cq->id();
    init.recv_cq = pp.cq->id();
    if (pp.srq) init.srq = pp.srq->id();
    init.cap.max_send_wr = 1;
    init.cap.max_recv_wr = pp.srq ? 0 : static_cast<uint32_t>(pp.rx_depth);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    auto qp = pp.pd->create_qp(init);
    if (!qp) {
      error = fmt::format("Couldn't create QP: {}", qp.status().message());
      return false;
    }
    QueuePair& created = pp.qps.emplace_back(std::move(qp.value()));
    if (created.cap().max_inline_data >= pp.size) pp.send_flags |= transport::kSendInline;
    if (const auto st = qp_to_init(created, options); !st) {
      error = fmt::format("Failed to modify QP to INIT: {}", st.message());
      return false;
    }
  }
  return true;
}

// The TCP exchange of rdma-core's pp_{client,server}_exch_dest; `count` messages each way
// (256 for srq_pingpong, whatever its -q). The server connects its QPs in between, via
// `connect`, before it answers.
template <typename Connect>
bool exchange(OobSocket& sock, bool server, const std::vector<PingpongDest>& mine, size_t count,
              std::vector<PingpongDest>& theirs, Connect&& connect, std::string& error) {
  const Deadline deadline = deadline_after(60);
  auto send_mine = [&] {
    for (size_t i = 0; i < count; ++i) {
      const PingpongMsg msg = format_pingpong_dest(i < mine.size() ? mine[i] : PingpongDest{});
      if (!sock.send_all(msg)) {
        error = "Couldn't send local address";
        return false;
      }
    }
    return true;
  };
  auto read_theirs = [&] {
    theirs.clear();
    for (size_t i = 0; i < count; ++i) {
      PingpongMsg msg{};
      if (!sock.recv_all(msg, deadline)) {
        error = "Couldn't read remote address";
        return false;
      }
      const auto dest = parse_pingpong_dest(msg);
      if (!dest) {
        error = fmt::format("the peer sent a malformed address '{}'",
                            std::string(msg.data(), strnlen(msg.data(), msg.size())));
        return false;
      }
      theirs.push_back(*dest);
    }
    return true;
  };
  std::array<char, 5> done = {'d', 'o', 'n', 'e', '\0'};
  if (server) {
    if (!read_theirs()) return false;
    // Our address goes out even when connecting failed, so the client can tell its cause.
    const bool connected = connect(theirs);
    if (!send_mine() || !connected) return false;
    // rdma-core's client answers with "done"; a peer that just closes is fine too.
    (void)sock.recv_all(done, deadline);
    return true;
  }
  return send_mine() && read_theirs() && sock.send_all(done);
}

bool connect_ctx(Pingpong& pp, const PingpongOptions& o, uint32_t my_psn_base,
                 const std::vector<PingpongDest>& my, const std::vector<PingpongDest>& rem,
                 std::string& error) {
  if (rem.empty() || rem[0].gid == GidBytes{}) {
    error = "the peer sent no GID; RoCE needs one: run the peer with -g <gid index>";
    return false;
  }
  if (const std::string why = gid_family_mismatch(*pp.dev, pp.gid, rem[0].gid); !why.empty()) {
    error = why;
    return false;
  }
  const ConnectOptions options = pp.connect_options(o);
  for (size_t i = 0; i < pp.qps.size(); ++i) {
    // srq_pingpong addresses every QP with the first message's GID.
    const QpEndpoint peer{rem[i].qpn, rem[i].psn, rem[0].gid};
    if (const auto st = qp_to_rts(pp.qps[i], my[i].psn, peer, options); !st) {
      error = fmt::format("Failed to modify QP to RTR/RTS: {}", st.message());
      return false;
    }
  }
  (void)my_psn_base;
  if (pp.ud) {
    auto ah = pp.pd->create_ah(make_ah_attr(rem[0].gid, options));
    if (!ah) {
      error = fmt::format("Failed to create AH: {}", ah.status().message());
      return false;
    }
    pp.ah = ah->attr();
  }
  pp.remote = rem;
  return true;
}

int run_pingpong(PingpongOptions& o) {
  arm_watchdog(kPingpongCommand, o.timeout);
  Pingpong pp;
  if (o.transport == "uc") pp.type = QpType::kUc;
  if (o.transport == "ud") pp.type = QpType::kUd;
  pp.ud = pp.type == QpType::kUd;
  pp.srq_mode = o.srq;
  if (o.srq && pp.type != QpType::kRc) return fail("--srq runs over RC (as ibv_srq_pingpong)");
  if (std::string cc = finish_cc_options(o.cc); !cc.empty()) return fail(cc);
  pp.num_qp = o.srq ? o.num_qp : 1;
  if (o.srq && o.num_qp > o.rx_depth) {
    return fail(
        fmt::format("rx_depth {} is too small for {} QPs -- must have at least one "
                    "receive per QP.",
                    o.rx_depth, o.num_qp));
  }
  pp.size = o.size.value_or(pp.ud ? 2048 : 4096);
  pp.rx_depth = o.rx_depth;
  // No port has an MTU above 4096: say so now rather than after waiting for the peer (the
  // device, and so its own MTU, is only known once the side channel is up).
  if (pp.ud && pp.size > kLargestUdMessage) {
    return fail(fmt::format(
        "Requested size larger than the largest port MTU ({0}); a UD message is one packet: "
        "use -s {0} or less",
        kLargestUdMessage));
  }
  const bool server = o.host.empty();

  std::unique_ptr<device::Device> named;
  std::string error =
      open_before_side_channel(o.device, o.ib_port, o.gid_index, o.host, o.cc.resolved, named);
  if (!error.empty()) return fail(error);
  pp.dev = std::move(named);
  std::unique_ptr<OobSocket> sock =
      server ? OobSocket::accept_one(o.port, std::nullopt, error)
             : OobSocket::connect_to(o.host, o.port, deadline_after(o.timeout), error);
  if (!sock) return fail(error);
  // After the side channel: without -d, the device is the one the peer reaches us on.
  if (!pp.dev) pp.dev = open_cli_device(o.device, sock->local_address(), error, o.cc.resolved);
  if (!pp.dev) return fail(error);
  if (pp.ud) {
    const uint32_t mtu = ud_max_message(*pp.dev);
    if (pp.size > mtu) {
      return fail(
          fmt::format("Requested size larger than port MTU ({}); use -s {} or less", mtu, mtu));
    }
  }
  const auto gid = choose_gid(*pp.dev, o.ib_port, o.gid_index, sock->local_address(), error);
  if (!gid) return fail(error);
  pp.gid = *gid;
  // rdma-core's exchange carries no MTU: clamp to our own port's active MTU and say so.
  std::string mtu_note;
  o.mtu = clamp_path_mtu(*pp.dev, pp.gid.port, o.mtu, std::nullopt, &mtu_note);
  if (!mtu_note.empty()) fmt::print(stderr, "{}: {}\n", kPingpongCommand, mtu_note);
  if (!init_ctx(pp, o, error)) return fail(error);
  const int routs_initial = pp.post_recv(pp.rx_depth);
  if (routs_initial < pp.rx_depth)
    return fail(fmt::format("Couldn't post receive ({})", routs_initial));
  int routs = routs_initial;

  std::vector<PingpongDest> my;
  for (const QueuePair& qp : pp.qps) {
    my.push_back(PingpongDest{0, qp.qp_num(), random_psn(), pp.gid.gid});
  }
  for (const PingpongDest& d : my) fmt::print("{}\n", format_address_line("local", d));
  std::fflush(stdout);

  std::vector<PingpongDest> rem;
  const size_t count = o.srq ? kSrqMaxQp : 1;
  auto connect = [&](const std::vector<PingpongDest>& theirs) {
    return connect_ctx(pp, o, 0, my, theirs, error);
  };
  if (!exchange(*sock, server, my, count, rem, connect, error)) return fail(error);
  sock.reset();
  for (int i = 0; i < pp.num_qp; ++i) {
    fmt::print("{}\n", format_address_line("remote", rem[static_cast<size_t>(i)]));
  }
  std::fflush(stdout);
  if (!server && !connect_ctx(pp, o, 0, my, rem, error)) return fail(error);

  if (o.check && !server) {
    for (size_t i = 0; i < pp.size; i += kPageSize)
      pp.buf->data()[(pp.ud ? kPingpongUdGrh : 0) + i] = 0;
  }
  std::vector<uint64_t> pending(static_cast<size_t>(pp.num_qp), kRecvWrid);
  if (!server) {
    for (int i = 0; i < pp.num_qp; ++i) {
      if (!pp.post_send(i)) return fail("Couldn't post send");
      pending[static_cast<size_t>(i)] = kRecvWrid | kSendWrid;
    }
  }
  const auto start = Clock::now();
  auto last_progress = start;
  int rcnt = 0;
  int scnt = 0;
  std::vector<Wc> wcs(static_cast<size_t>(pp.rx_depth + pp.num_qp));
  while (rcnt < o.iters || scnt < o.iters) {
    const int ne = pp.poll(wcs);
    if (ne < 0) return fail(fmt::format("poll CQ failed {}", ne));
    if (ne == 0) {
      std::this_thread::yield();  // let the device's progress thread have the core
      if (Clock::now() - last_progress > kPingpongStallLimit) {
        const bool sending = std::any_of(pending.begin(), pending.end(),
                                         [](uint64_t p) { return (p & kSendWrid) != 0; });
        return fail(fmt::format(
            "no completion for {} s after {} receives and {} sends: {}",
            kPingpongStallLimit.count(), rcnt, scnt,
            stall_reason(*pp.dev, pp.qps[0].qp_num(), pp.remote[0].gid, sending, o.mtu)));
      }
      continue;
    }
    last_progress = Clock::now();
    for (int i = 0; i < ne; ++i) {
      const Wc& wc = wcs[static_cast<size_t>(i)];
      if (wc.status != WcStatus::kSuccess) {
        return fail(fmt::format("Failed status {} ({}) for wr_id {}", wc_status_str(wc.status),
                                static_cast<int>(wc.status), static_cast<int>(wc.wr_id)));
      }
      const auto it = std::find_if(pp.qps.begin(), pp.qps.end(),
                                   [&](const QueuePair& qp) { return qp.qp_num() == wc.qp_num; });
      if (it == pp.qps.end()) return fail(fmt::format("Couldn't find QPN {:06x}", wc.qp_num));
      const size_t qi = static_cast<size_t>(it - pp.qps.begin());
      if (wc.wr_id == kSendWrid) {
        ++scnt;
      } else if (wc.wr_id == kRecvWrid) {
        if (--routs <= (o.srq ? pp.num_qp : 1)) {
          routs += pp.post_recv(pp.rx_depth - routs);
          if (routs < pp.rx_depth) return fail(fmt::format("Couldn't post receive ({})", routs));
        }
        ++rcnt;
        if (o.check) {
          for (size_t off = 0; off < pp.size; off += kPageSize) {
            if (pp.buf->data()[(pp.ud ? kPingpongUdGrh : 0) + off] != 0) {
              fmt::print("invalid data in page {}\n", off / kPageSize);
            }
          }
        }
      } else {
        return fail(fmt::format("Completion for unknown wr_id {}", static_cast<int>(wc.wr_id)));
      }
      pending[qi] &= ~wc.wr_id;
      if (scnt < o.iters && pending[qi] == 0) {
        if (!pp.post_send(static_cast<int>(qi))) return fail("Couldn't post send");
        pending[qi] = kRecvWrid | kSendWrid;
      }
    }
  }
  const double usec = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  const long long bytes = static_cast<long long>(pp.size) * o.iters * 2;
  fmt::print("{} bytes in {:.2f} seconds = {:.2f} Mbit/sec\n", bytes, usec / 1e6,
             static_cast<double>(bytes) * 8.0 / usec);
  fmt::print("{} iters in {:.2f} seconds = {:.2f} usec/iter\n", o.iters, usec / 1e6,
             usec / o.iters);
  return kExitOk;
}

}  // namespace

Subcommand add_pingpong_command(CLI::App& app) {
  auto o = std::make_shared<PingpongOptions>();
  CLI::App* sub = app.add_subcommand(
      "pingpong",
      "ibv_rc/uc/ud/srq_pingpong on uroce: uroce pingpong [HOST] (server without HOST)");
  sub->add_option("HOST", o->host, "Server to connect to; without it, wait for a client");
  sub->add_option("--transport", o->transport, "rc (default), uc or ud")
      ->check(CLI::IsMember({"rc", "uc", "ud"}, CLI::ignore_case));
  sub->add_flag("--srq", o->srq, "One SRQ shared by -q QPs, like ibv_srq_pingpong (RC)");
  sub->add_option("-p,--port", o->port, "Listen on/connect to TCP port (default 18515)")
      ->check(CLI::Range(1, 65535));
  sub->add_option(
      "-d,--ib-dev", o->device,
      "Device (default: the one whose GID the TCP connection's address is, else the first)");
  sub->add_option("-i,--ib-port", o->ib_port, "Port of the device (default: the GID's)")
      ->check(CLI::Range(1, 255));
  sub->add_option("-s,--size", o->size, "Message size (default 4096, UD 2048)")
      ->check(CLI::Range(1u, 1u << 30));
  sub->add_option("-m,--mtu", o->mtu, "Path MTU (default 1024)")
      ->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  sub->add_option("-q,--num-qp", o->num_qp, "QPs with --srq (default 16)")
      ->check(CLI::Range(1, kSrqMaxQp));
  sub->add_option("-r,--rx-depth", o->rx_depth, "Receives to post at a time (default 500)")
      ->check(CLI::Range(2, 16384));
  sub->add_option("-n,--iters", o->iters, "Number of exchanges (default 1000)")
      ->check(CLI::Range(1, 1 << 30));
  sub->add_option("-l,--sl", o->sl, "Service level (default 0)")->check(CLI::Range(0, 15));
  sub->add_flag("-e,--events", o->events, "Sleep on CQ events (default poll)");
  sub->add_option("-g,--gid-idx", o->gid_index,
                  "Local port GID index (default: the GID of the TCP connection's address)")
      ->check(CLI::Range(0, 1023));
  sub->add_flag("-c,--chk", o->check, "Validate the received buffer (as rc_pingpong -c)");
  sub->add_option("--timeout", o->timeout, "Give up after this many seconds (default: never)")
      ->check(CLI::NonNegativeNumber);
  add_cc_options(*sub, o->cc, false);
  return Subcommand{sub, [o] {
                      for (char& c : o->transport) c = static_cast<char>(std::tolower(c));
                      return run_pingpong(*o);
                    }};
}

}  // namespace uroce::cli
