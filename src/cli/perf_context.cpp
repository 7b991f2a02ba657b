// `uroce perf` resources: see perf_context.hpp.
#include "cli/perf_context.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace uroce::cli {
namespace {

transport::QpType qp_type_of(PerfConnection c) {
  switch (c) {
    case PerfConnection::kUc:
      return transport::QpType::kUc;
    case PerfConnection::kUd:
      return transport::QpType::kUd;
    case PerfConnection::kRc:
      break;
  }
  return transport::QpType::kRc;
}

// Outstanding RDMA READ / atomic per QP (perftest's "Outstand reads"): what the device
// allows, at most 16 like mlx5.
constexpr uint8_t kMaxRdAtomic = 16;

// The buffer and the QPs allow every remote operation (a UC QP gets the write bits only, see
// uroce::qp_to_init): the test decides which it uses.
constexpr uint32_t kAccess = transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                             transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;

}  // namespace

std::unique_ptr<PerfContext> PerfContext::create(std::unique_ptr<device::Device> dev,
                                                 const PerfSetup& setup, const GidChoice& gid,
                                                 std::string& error) {
  std::unique_ptr<PerfContext> c(new PerfContext(Device(std::move(dev))));
  c->setup_ = setup;
  c->gid_ = gid;
  Device& d = c->dev_;
  const device::DeviceAttr attr = d.query_device();

  auto pd = d.alloc_pd();
  if (!pd) {
    error = fmt::format("couldn't allocate PD: {}", pd.status().message());
    return nullptr;
  }
  c->pd_.emplace(std::move(pd.value()));
  if (setup.events) {
    auto ch = d.create_comp_channel();
    if (!ch) {
      error = fmt::format("couldn't create completion channel: {}", ch.status().message());
      return nullptr;
    }
    c->channel_.emplace(std::move(ch.value()));
  }
  const uint64_t cqe = static_cast<uint64_t>(setup.num_qps) *
                           static_cast<uint64_t>(setup.tx_depth + setup.rx_depth) +
                       16;
  auto cq = d.create_cq(static_cast<uint32_t>(std::min<uint64_t>(cqe, attr.max_cqe)),
                        c->channel_ ? &*c->channel_ : nullptr);
  if (!cq) {
    error = fmt::format("couldn't create CQ: {}", cq.status().message());
    return nullptr;
  }
  c->cq_.emplace(std::move(cq.value()));

  const uint64_t bytes = perf_region_size(setup) * static_cast<uint64_t>(setup.num_qps);
  c->buffer_ = RegisteredBuffer::create(*c->pd_, bytes, kAccess, error);
  if (!c->buffer_) return nullptr;

  const transport::QpType type = qp_type_of(setup.conn);
  const ConnectOptions init_options = cli_connect_options(gid, kAccess);
  c->max_inline_ =
      static_cast<uint32_t>(std::clamp(setup.inline_size, 0, std::max(0, attr.max_inline_data)));
  for (int q = 0; q < setup.num_qps; ++q) {
    transport::QpInitAttr init;
    init.qp_type = type;
    init.send_cq = c->cq_->id();
    init.recv_cq = c->cq_->id();
    init.cap.max_send_wr = static_cast<uint32_t>(setup.tx_depth) + 1;
    init.cap.max_recv_wr = static_cast<uint32_t>(setup.rx_depth) + 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = c->max_inline_;
    init.sq_sig_all = false;
    auto qp = c->pd_->create_qp(init);
    if (!qp) {
      error = fmt::format("couldn't create QP: {}", qp.status().message());
      return nullptr;
    }
    QueuePair& created = c->qps_.emplace_back(std::move(qp.value()));
    c->max_inline_ = std::min(c->max_inline_, created.cap().max_inline_data);
    c->psns_.push_back(random_psn());
    if (const auto st = qp_to_init(created, init_options); !st) {
      error = fmt::format("failed to modify QP to INIT: {}", st.message());
      return nullptr;
    }
  }
  return c;
}

std::vector<PerfQpInfo> PerfContext::local_info() const {
  std::vector<PerfQpInfo> out;
  for (int q = 0; q < setup_.num_qps; ++q) {
    PerfQpInfo info;
    info.qpn = qpn(q);
    info.psn = psns_[static_cast<size_t>(q)];
    info.rkey = buffer_->mr().rkey();
    info.vaddr = buffer_->addr() + perf_slot_offset(setup_, q, 0);
    info.gid = gid_.gid;
    out.push_back(info);
  }
  return out;
}

bool PerfContext::connect(const std::vector<PerfQpInfo>& remote, std::string& error,
                          std::optional<uint8_t> rd_atomic_override, transport::Recovery recovery) {
  if (remote.size() != qps_.size()) {
    error = fmt::format("the peer has {} QPs, we have {}", remote.size(), qps_.size());
    return false;
  }
  remote_ = remote;
  const auto mtu = mtu_from_bytes(setup_.mtu);
  const uint8_t rd_atomic = rd_atomic_override.value_or(
      static_cast<uint8_t>(std::min<int>(kMaxRdAtomic, dev_.query_device().max_qp_init_rd_atom)));
  ConnectOptions options = cli_connect_options(gid_, kAccess);
  options.path_mtu = mtu.value_or(transport::Mtu::k1024);
  options.max_rd_atomic = rd_atomic;
  options.max_dest_rd_atomic = rd_atomic;
  options.traffic_class = traffic_class_;
  options.recovery = recovery;
  for (size_t q = 0; q < qps_.size(); ++q) {
    const QpEndpoint peer{remote[q].qpn, remote[q].psn, remote[q].gid};
    if (const auto st = qp_to_rts(qps_[q], psns_[q], peer, options); !st) {
      error = fmt::format("failed to connect QP 0x{:06x} to RTR/RTS: {}", qps_[q].qp_num(),
                          st.message());
      return false;
    }
    if (qps_[q].type() == transport::QpType::kUd) {
      auto ah = pd_->create_ah(make_ah_attr(remote[q].gid, options));
      if (!ah) {
        error = fmt::format("failed to create AH: {}", ah.status().message());
        return false;
      }
      ahs_.push_back(ah->attr());
    }
  }
  return true;
}

int PerfContext::qp_index(uint32_t qpn) const {
  const auto it = std::find_if(qps_.begin(), qps_.end(),
                               [qpn](const QueuePair& qp) { return qp.qp_num() == qpn; });
  return it == qps_.end() ? -1 : static_cast<int>(it - qps_.begin());
}

int PerfContext::poll(std::span<transport::Wc> out, Nanos max_wait) {
  int n = cq_->poll(out);
  if (n == 0 && !channel_) {
    // Busy polling, but let the device's progress thread run now and then: on a host with
    // fewer cores than spinning threads it otherwise waits for a whole scheduler slice
    // (milliseconds). Not on every empty poll: a sched_yield is a system call (over a
    // microsecond on a VM), and while this thread polls the progress thread is parked.
    busy_turn();
    return 0;
  }
  if (n != 0 || !channel_) return n;
  if (!cq_->req_notify(false)) return -1;
  n = cq_->poll(out);  // a completion that raced with arming
  if (n != 0) return n;
  // The channel serves this one CQ, so the event is its.
  if (auto ev = channel_->get_event(max_wait); ev) cq_->ack_events(1);
  return cq_->poll(out);
}

void PerfContext::idle_turn() {
  if (channel_) {
    std::this_thread::yield();
  } else {
    busy_turn();
  }
}

void PerfContext::busy_turn() {
  if (++empty_polls_ % kPollsPerClock != 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_yield_ < kYieldInterval) return;
  last_yield_ = now;
  std::this_thread::yield();
}

transport::Status PerfContext::post_recv_slot(int q, uint64_t k, uint32_t length) {
  const transport::Sge sge{reinterpret_cast<uint64_t>(slot(q, k)), length, lkey()};
  transport::RecvWr wr;
  wr.wr_id = k;
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  return qps_[static_cast<size_t>(q)].post_recv(wr);
}

transport::SendWr pingpong_wr(PerfContext& ctx, const transport::Sge& sge, uint64_t it, bool write,
                              bool ud) {
  transport::SendWr wr;
  wr.wr_id = it;
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  wr.send_flags = transport::kSendSignaled;
  if (sge.length <= ctx.max_inline()) wr.send_flags |= transport::kSendInline;
  if (write) {
    wr.opcode = transport::WrOpcode::kRdmaWrite;
    wr.rdma.remote_addr = ctx.remote_slot(0, 0);
    wr.rdma.rkey = ctx.remote()[0].rkey;
  } else {
    wr.opcode = transport::WrOpcode::kSend;
    if (ud) {
      wr.ud.ah = ctx.ah(0);
      wr.ud.remote_qpn = ctx.remote()[0].qpn;
      wr.ud.remote_qkey = kPingpongQkey;
    }
  }
  return wr;
}

}  // namespace uroce::cli
