// The data path: post_send / post_recv / post_srq_recv / poll_cq / req_notify_cq, which
// verbs.h inlines as calls through ibv_context::ops, the completion-channel calls, and the
// extended CQ polling ops (ibv_start_poll, ibv_next_poll, ibv_wc_read_*).
//
// A WR list is posted one WR at a time; the first refused WR stops the list and is returned
// in *bad_wr with its errno, the ones before it stay posted (ibverbs semantics).
#include <endian.h>
#include <poll.h>

#include <algorithm>
#include <array>

#include "ibverbs/objects.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

// Above the device's max_sge; the engine refuses lists longer than the QP's own limit.
constexpr int kMaxSge = 64;
constexpr int kPollChunk = 32;

bool copy_sges(const ibv_sge* in, int n, std::array<transport::Sge, kMaxSge>& out) {
  if (n < 0 || n > kMaxSge || (n > 0 && in == nullptr)) return false;
  for (int i = 0; i < n; ++i) out[i] = transport::Sge{in[i].addr, in[i].length, in[i].lkey};
  return true;
}

int to_send_wr(ibv_qp* qp, const ibv_send_wr& in, std::array<transport::Sge, kMaxSge>& sges,
               transport::SendWr& out) {
  if (in.opcode > IBV_WR_SEND_WITH_INV) return EINVAL;  // TSO, DRIVER1, ATOMIC_WRITE, ...
  if (!copy_sges(in.sg_list, in.num_sge, sges)) return EINVAL;
  out = transport::SendWr{};
  out.wr_id = in.wr_id;
  out.opcode = static_cast<transport::WrOpcode>(in.opcode);
  out.send_flags = in.send_flags;
  out.sg_list = std::span<const transport::Sge>(sges.data(), static_cast<size_t>(in.num_sge));
  if (in.opcode == IBV_WR_SEND_WITH_IMM || in.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    out.imm_data = be32toh(in.imm_data);
  }
  if (in.opcode == IBV_WR_SEND_WITH_INV || in.opcode == IBV_WR_LOCAL_INV) {
    out.invalidate_rkey = in.invalidate_rkey;
  }
  if (in.opcode == IBV_WR_BIND_MW) {
    if (in.bind_mw.mw == nullptr) return EINVAL;
    out.bind_mw = to_mw_bind(*in.bind_mw.mw, in.bind_mw.rkey, in.bind_mw.bind_info);
    return 0;
  }
  if (qp->qp_type == IBV_QPT_UD) {
    if (in.wr.ud.ah == nullptr) return EINVAL;
    out.ud.ah = ah_of(in.wr.ud.ah)->attr;
    out.ud.remote_qpn = in.wr.ud.remote_qpn;
    out.ud.remote_qkey = in.wr.ud.remote_qkey;
  } else if (in.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || in.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    out.atomic.remote_addr = in.wr.atomic.remote_addr;
    out.atomic.compare_add = in.wr.atomic.compare_add;
    out.atomic.swap = in.wr.atomic.swap;
    out.atomic.rkey = in.wr.atomic.rkey;
  } else {
    out.rdma.remote_addr = in.wr.rdma.remote_addr;
    out.rdma.rkey = in.wr.rdma.rkey;
  }
  return 0;
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  device::Device& dev = dev_of(qp->context);
  std::array<transport::Sge, kMaxSge> sges;
  // One doorbell for the chain, after its last WR (or the one that fails).
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    transport::SendWr sw;
    int rc = to_send_wr(qp, *w, sges, sw);
    if (rc == 0) {
      rc = dev.post_send(qp->qp_num, sw, w->next == nullptr).code();
    } else if (w != wr) {
      dev.ring_doorbell();
    }
    if (rc != 0) {
      if (bad_wr != nullptr) *bad_wr = w;
      return fail_int(rc);
    }
  }
  return 0;
}

template <typename Post>
int post_recv_list(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, Post post) {
  std::array<transport::Sge, kMaxSge> sges;
  for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
    int rc = EINVAL;
    if (copy_sges(w->sg_list, w->num_sge, sges)) {
      transport::RecvWr rw;
      rw.wr_id = w->wr_id;
      rw.sg_list = std::span<const transport::Sge>(sges.data(), static_cast<size_t>(w->num_sge));
      rc = post(rw).code();
    }
    if (rc != 0) {
      if (bad_wr != nullptr) *bad_wr = w;
      return fail_int(rc);
    }
  }
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  device::Device& dev = dev_of(qp->context);
  const uint32_t qpn = qp->qp_num;
  return post_recv_list(wr, bad_wr,
                        [&](const transport::RecvWr& rw) { return dev.post_recv(qpn, rw); });
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  device::Device& dev = dev_of(srq->context);
  const transport::SrqId id = srq_of(srq)->id;
  return post_recv_list(wr, bad_wr,
                        [&](const transport::RecvWr& rw) { return dev.post_srq_recv(id, rw); });
}

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  if (num_entries <= 0) return 0;
  device::Device& dev = dev_of(cq->context);
  const transport::CqId id = cq_of(cq)->id;
  std::array<transport::Wc, kPollChunk> chunk;
  int total = 0;
  while (total < num_entries) {
    const int want = std::min(num_entries - total, kPollChunk);
    const int n =
        dev.poll_cq(id, std::span<transport::Wc>(chunk.data(), static_cast<size_t>(want)));
    if (n < 0) return total > 0 ? total : -1;
    for (int i = 0; i < n; ++i) wc_to_ibv(chunk[i], wc[total + i]);
    total += n;
    if (n < want) break;
  }
  return total;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  transport::Status st = dev_of(cq->context).req_notify_cq(cq_of(cq)->id, solicited_only != 0);
  return st ? 0 : st.code();
}

// ---- Extended CQ polling: one entry at a time (objects.hpp says why).

int read_one(ibv_cq_ex* cq) {
  UCq* u = cq_of(cq);
  const int n = dev_of(cq->context).poll_cq(u->id, std::span<transport::Wc>(&u->current, 1));
  if (n < 0) return EINVAL;
  if (n == 0) return ENOENT;
  cq->wr_id = u->current.wr_id;
  cq->status = static_cast<ibv_wc_status>(u->current.status);
  return 0;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  return read_one(cq);
}
int next_poll(ibv_cq_ex* cq) {
  return read_one(cq);
}
void end_poll(ibv_cq_ex*) {}
const transport::Wc& cur(ibv_cq_ex* cq) {
  return cq_of(cq)->current;
}
ibv_wc_opcode read_opcode(ibv_cq_ex* cq) {
  return static_cast<ibv_wc_opcode>(cur(cq).opcode);
}
uint32_t read_vendor_err(ibv_cq_ex* cq) {
  return cur(cq).vendor_err;
}
uint32_t read_byte_len(ibv_cq_ex* cq) {
  return cur(cq).byte_len;
}
__be32 read_imm_data(ibv_cq_ex* cq) {
  const transport::Wc& w = cur(cq);
  return (w.wc_flags & transport::kWcWithInv) != 0 ? w.invalidated_rkey : htobe32(w.imm_data);
}
uint32_t read_qp_num(ibv_cq_ex* cq) {
  return cur(cq).qp_num;
}
uint32_t read_src_qp(ibv_cq_ex* cq) {
  return cur(cq).src_qp;
}
unsigned int read_wc_flags(ibv_cq_ex* cq) {
  return cur(cq).wc_flags;
}
uint32_t read_slid(ibv_cq_ex* cq) {
  return cur(cq).slid;
}
uint8_t read_sl(ibv_cq_ex* cq) {
  return cur(cq).sl;
}
uint8_t read_dlid_path_bits(ibv_cq_ex* cq) {
  return cur(cq).dlid_path_bits;
}
// The device clock is CLOCK_MONOTONIC in ns: hca_core_clock is 1 GHz, so the raw timestamp
// is already nanoseconds. The wall-clock reading moves it by the current REALTIME-MONOTONIC
// offset (the mapping mlx5 makes with its clock info page).
uint64_t read_completion_ts(ibv_cq_ex* cq) {
  return static_cast<uint64_t>(cur(cq).timestamp_ns);
}
uint64_t read_completion_wallclock_ns(ibv_cq_ex* cq) {
  timespec mono{};
  timespec real{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  const int64_t offset =
      (real.tv_sec - mono.tv_sec) * 1'000'000'000LL + (real.tv_nsec - mono.tv_nsec);
  return static_cast<uint64_t>(cur(cq).timestamp_ns + offset);
}

}  // namespace

namespace uroce::ibverbs {

int wait_readable(int fd) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  for (;;) {
    const int n = poll(&p, 1, -1);
    if (n > 0) return 0;
    if (n < 0) return errno;
  }
}

void wc_to_ibv(const transport::Wc& in, ibv_wc& out) {
  out.wr_id = in.wr_id;
  out.status = static_cast<ibv_wc_status>(in.status);
  out.opcode = static_cast<ibv_wc_opcode>(in.opcode);
  out.vendor_err = in.vendor_err;
  out.byte_len = in.byte_len;
  if ((in.wc_flags & transport::kWcWithInv) != 0) {
    out.invalidated_rkey = in.invalidated_rkey;
  } else {
    out.imm_data = htobe32(in.imm_data);
  }
  out.qp_num = in.qp_num;
  out.src_qp = in.src_qp;
  out.wc_flags = in.wc_flags;
  out.pkey_index = in.pkey_index;
  out.slid = in.slid;
  out.sl = in.sl;
  // A UD receive's sl as mlx5 reports it on RoCE: the CQE's packet type, bit 3 for "has a
  // UDP header" (RoCE v2) and bits 2-0 the L3 header, 1 IPv6 or 2 IPv4 (docs/ibverbs.md). UCX
  // reads (sl & 7) == 2 as IPv4 to find the destination address in the GRH area; rxe's 0
  // made it drop every datagram.
  if (in.network == transport::WcNetwork::kIpv4) out.sl = 0xA;
  if (in.network == transport::WcNetwork::kIpv6) out.sl = 0x9;
  out.dlid_path_bits = in.dlid_path_bits;
}

void install_datapath_ops(ibv_context_ops& ops) {
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
}

void install_cq_ex_ops(ibv_cq_ex& cq) {
  cq.start_poll = start_poll;
  cq.next_poll = next_poll;
  cq.end_poll = end_poll;
  cq.read_opcode = read_opcode;
  cq.read_vendor_err = read_vendor_err;
  cq.read_byte_len = read_byte_len;
  cq.read_imm_data = read_imm_data;
  cq.read_qp_num = read_qp_num;
  cq.read_src_qp = read_src_qp;
  cq.read_wc_flags = read_wc_flags;
  cq.read_slid = read_slid;
  cq.read_sl = read_sl;
  cq.read_dlid_path_bits = read_dlid_path_bits;
  cq.read_completion_ts = read_completion_ts;
  cq.read_completion_wallclock_ns = read_completion_wallclock_ns;
}

}  // namespace uroce::ibverbs

extern "C" {

// Like a read of the kernel's uverbs channel fd: on a blocking fd waits until an event comes
// or a signal interrupts (EINTR); on an fd the application made O_NONBLOCK, -1 with errno
// EAGAIN when no event is queued (app_fd.cpp). A blocking wait moves the device's packets
// from this thread (Device::drive_cq_event), so the packet that completes a WR wakes this
// thread alone; when another thread drives already, it waits on the channel.
int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) return fail_minus1(EINVAL);
  UContext* uctx = ctx_of(channel->context);
  const device::ChannelId id = channel_of(channel)->id;
  auto r = uctx->dev->get_cq_event(id, Nanos(0));
  while (!r && r.status().code() == EAGAIN) {
    if (int rc = app_fd_nonblocking(channel->fd); rc != 0) return fail_minus1(rc);
    r = uctx->dev->drive_cq_event(id, Nanos(-1));
    if (!r && r.status().code() == EBUSY) {
      if (int rc = wait_readable(channel->fd); rc != 0) return fail_minus1(rc);
      r = uctx->dev->get_cq_event(id, Nanos(0));
    }
  }
  if (!r) return fail_minus1(r.status().code());
  UCq* ucq = nullptr;
  {
    std::lock_guard lock(uctx->mu);
    auto it = uctx->cqs.find(static_cast<uint32_t>(*r));
    if (it != uctx->cqs.end()) ucq = it->second;
  }
  if (ucq == nullptr) return fail_minus1(EINVAL);
  *cq = ibv_cq_ex_to_cq(&ucq->cq);
  *cq_context = ucq->cq.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (cq == nullptr || nevents == 0) return;
  dev_of(cq->context).ack_cq_events(cq_of(cq)->id, nevents);
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
