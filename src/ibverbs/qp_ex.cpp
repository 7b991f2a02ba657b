// The ibv_wr_* send API (ibv_qp_ex): ibv_wr_start opens a batch, each ibv_wr_<op> adds a WR
// (wr_id and flags from qp_ex->wr_id / wr_flags at that moment) that the ibv_wr_set_* calls
// after it complete, and ibv_wr_complete posts the batch in order; ibv_wr_abort drops it.
//
// Errors found while building (a setter with no WR before it, a batch beyond the QP's
// max_send_wr, inline data beyond max_inline_data) are kept and returned by ibv_wr_complete,
// which then posts nothing, as mlx5 and rxe do. An error the engine finds when posting stops
// the batch there: the WRs before it stay posted (the engine checks each WR as it takes it).
//
// What a QP may ask for (IBV_QP_EX_WITH_*): RC the operations uroce's requester sends (RDMA
// WRITE with and without immediate, SEND with immediate and invalidate, RDMA READ, both
// atomics, ATOMIC WRITE); UC WRITE and SEND; RC and UC also LOCAL_INV and BIND_MW; UD SEND.
// No TSO (raw packet QPs only).
#include <endian.h>

#include <cstring>

#include "ibverbs/objects.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

constexpr uint64_t kUcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
constexpr uint64_t kRcOps = kUcOps | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV |
                            IBV_QP_EX_WITH_ATOMIC_WRITE;
constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

UQp* uqp(ibv_qp_ex* q) {
  return reinterpret_cast<UQp*>(q);
}

void fail(WrBatch& b, int err) {
  if (b.error == 0) b.error = err;
}

// Starts a WR of `opcode`, or nullptr (and the batch's error) when the QP did not ask for the
// operation or the batch is full.
transport::SendWr* add(ibv_qp_ex* q, transport::WrOpcode opcode, uint64_t needs) {
  UQp* u = uqp(q);
  WrBatch& b = *u->batch;
  if ((u->send_ops & needs) == 0) {
    fail(b, EOPNOTSUPP);
    return nullptr;
  }
  if (b.entries.size() == b.entries.capacity()) {
    fail(b, ENOMEM);
    return nullptr;
  }
  WrBatch::Entry& e = b.entries.emplace_back();
  e.wr.wr_id = q->wr_id;
  e.wr.send_flags = q->wr_flags;
  e.wr.opcode = opcode;
  e.sge_begin = static_cast<uint32_t>(b.sges.size());
  return &e.wr;
}

// The WR the ibv_wr_set_* calls complete: the last one added.
WrBatch::Entry* last(ibv_qp_ex* q) {
  WrBatch& b = *uqp(q)->batch;
  if (b.entries.empty()) {
    fail(b, EINVAL);
    return nullptr;
  }
  return &b.entries.back();
}

void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr) {
  if (auto* w = add(q, transport::WrOpcode::kRdmaWrite, IBV_QP_EX_WITH_RDMA_WRITE)) {
    w->rdma.rkey = rkey;
    w->rdma.remote_addr = remote_addr;
  }
}

void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  if (auto* w =
          add(q, transport::WrOpcode::kRdmaWriteWithImm, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)) {
    w->rdma.rkey = rkey;
    w->rdma.remote_addr = remote_addr;
    w->imm_data = be32toh(imm);
  }
}

void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr) {
  if (auto* w = add(q, transport::WrOpcode::kRdmaRead, IBV_QP_EX_WITH_RDMA_READ)) {
    w->rdma.rkey = rkey;
    w->rdma.remote_addr = remote_addr;
  }
}

void wr_send(ibv_qp_ex* q) {
  (void)add(q, transport::WrOpcode::kSend, IBV_QP_EX_WITH_SEND);
}

void wr_send_imm(ibv_qp_ex* q, __be32 imm) {
  if (auto* w = add(q, transport::WrOpcode::kSendWithImm, IBV_QP_EX_WITH_SEND_WITH_IMM)) {
    w->imm_data = be32toh(imm);
  }
}

void wr_send_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (auto* w = add(q, transport::WrOpcode::kSendWithInv, IBV_QP_EX_WITH_SEND_WITH_INV)) {
    w->invalidate_rkey = invalidate_rkey;
  }
}

void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                       uint64_t swap) {
  if (auto* w = add(q, transport::WrOpcode::kAtomicCmpAndSwp, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)) {
    w->atomic = {remote_addr, compare, swap, rkey};
  }
}

void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, uint64_t add_value) {
  if (auto* w =
          add(q, transport::WrOpcode::kAtomicFetchAndAdd, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)) {
    w->atomic = {remote_addr, add_value, 0, rkey};
  }
}

// ATOMIC WRITE: the 8 bytes at `atomic_wr` are copied now, as rdma-core's providers do.
void wr_atomic_write(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, const void* atomic_wr) {
  if (auto* w = add(q, transport::WrOpcode::kAtomicWrite, IBV_QP_EX_WITH_ATOMIC_WRITE)) {
    w->rdma.rkey = rkey;
    w->rdma.remote_addr = remote_addr;
    std::memcpy(w->atomic_write.data(), atomic_wr, w->atomic_write.size());
  }
}

// BIND_MW of `mw` under the new R_Key `rkey` (a type 2 window; rxe's provider does the same).
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  if (mw == nullptr || info == nullptr) {
    fail(*uqp(q)->batch, EINVAL);
    return;
  }
  if (auto* w = add(q, transport::WrOpcode::kBindMw, IBV_QP_EX_WITH_BIND_MW)) {
    w->bind_mw = to_mw_bind(*mw, rkey, *info);
  }
}
void wr_local_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (auto* w = add(q, transport::WrOpcode::kLocalInv, IBV_QP_EX_WITH_LOCAL_INV)) {
    w->invalidate_rkey = invalidate_rkey;
  }
}
// No TSO (no raw packet QPs): the QP could not have asked for it, so it only records the
// error (rdma-core leaves it unset on such a QP; a program calling it gets EOPNOTSUPP).
void wr_send_tso(ibv_qp_ex* q, void*, uint16_t, uint16_t) {
  fail(*uqp(q)->batch, EOPNOTSUPP);
}
void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t) {
  fail(*uqp(q)->batch, EOPNOTSUPP);
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  WrBatch::Entry* e = last(q);
  if (e == nullptr) return;
  if (ah == nullptr) {
    fail(*uqp(q)->batch, EINVAL);
    return;
  }
  e->wr.ud.ah = ah_of(ah)->attr;
  e->wr.ud.remote_qpn = remote_qpn;
  e->wr.ud.remote_qkey = remote_qkey;
}

// Replaces the last WR's SGEs with `n` new ones (the sges storage is the batch's tail).
transport::Sge* take_sges(ibv_qp_ex* q, WrBatch::Entry& e, size_t n) {
  WrBatch& b = *uqp(q)->batch;
  b.sges.resize(e.sge_begin);  // a second set_sge on the same WR replaces the first
  if (b.sges.size() + n > b.sges.capacity()) {
    fail(b, ENOMEM);
    return nullptr;
  }
  e.sge_count = static_cast<uint32_t>(n);
  b.sges.resize(b.sges.size() + n);
  return b.sges.data() + e.sge_begin;
}

void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  WrBatch::Entry* e = last(q);
  if (e == nullptr) return;
  if (transport::Sge* s = take_sges(q, *e, 1)) *s = transport::Sge{addr, length, lkey};
}

void wr_set_sge_list(ibv_qp_ex* q, size_t num_sge, const ibv_sge* list) {
  WrBatch::Entry* e = last(q);
  if (e == nullptr) return;
  if (num_sge > 0 && list == nullptr) {
    fail(*uqp(q)->batch, EINVAL);
    return;
  }
  transport::Sge* s = take_sges(q, *e, num_sge);
  if (s == nullptr) return;
  for (size_t i = 0; i < num_sge; ++i)
    s[i] = transport::Sge{list[i].addr, list[i].length, list[i].lkey};
}

// Inline data is copied into the batch now (the caller may reuse its buffer at once) and
// posted as one inline SGE over the copy.
void wr_set_inline_data_list(ibv_qp_ex* q, size_t num_buf, const ibv_data_buf* bufs) {
  WrBatch::Entry* e = last(q);
  if (e == nullptr) return;
  WrBatch& b = *uqp(q)->batch;
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) total += bufs[i].length;
  if (b.inline_used + total > b.inline_bytes.size()) {
    fail(b, ENOMEM);
    return;
  }
  uint8_t* dst = b.inline_bytes.data() + b.inline_used;
  for (size_t i = 0; i < num_buf; ++i) {
    if (bufs[i].length > 0) std::memcpy(dst, bufs[i].addr, bufs[i].length);
    dst += bufs[i].length;
  }
  transport::Sge* s = take_sges(q, *e, 1);
  if (s == nullptr) return;
  *s = transport::Sge{reinterpret_cast<uint64_t>(b.inline_bytes.data() + b.inline_used),
                      static_cast<uint32_t>(total), 0};
  b.inline_used += total;
  e->wr.send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(q, 1, &buf);
}

void wr_start(ibv_qp_ex* q) {
  WrBatch& b = *uqp(q)->batch;
  b.entries.clear();
  b.sges.clear();
  b.inline_used = 0;
  b.error = 0;
}

void wr_abort(ibv_qp_ex* q) {
  wr_start(q);
}

int wr_complete(ibv_qp_ex* q) {
  WrBatch& b = *uqp(q)->batch;
  int rc = b.error;
  if (rc == 0) {
    device::Device& dev = dev_of(q->qp_base.context);
    for (WrBatch::Entry& e : b.entries) {
      e.wr.sg_list = std::span<const transport::Sge>(b.sges.data() + e.sge_begin, e.sge_count);
      const bool last = &e == &b.entries.back();  // one doorbell for the batch
      if (transport::Status st = dev.post_send(q->qp_base.qp_num, e.wr, last); !st) {
        rc = st.code();
        break;
      }
    }
  }
  wr_start(q);
  return rc == 0 ? 0 : fail_int(rc);
}

}  // namespace

namespace uroce::ibverbs {

uint64_t supported_send_ops(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC:
      return kRcOps;
    case IBV_QPT_UC:
      return kUcOps;
    case IBV_QPT_UD:
      return kUdOps;
    default:
      return 0;
  }
}

int install_qp_ex_ops(UQp& qp, uint64_t send_ops, const ibv_qp_cap& cap) {
  auto batch = std::unique_ptr<WrBatch>(new (std::nothrow) WrBatch);
  if (batch == nullptr) return ENOMEM;
  const size_t wrs = cap.max_send_wr > 0 ? cap.max_send_wr : 1;
  const size_t sges_per_wr = cap.max_send_sge > 0 ? cap.max_send_sge : 1;
  try {
    batch->entries.reserve(wrs);
    batch->sges.reserve(wrs * sges_per_wr);
    batch->inline_bytes.resize(wrs * cap.max_inline_data);
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  qp.batch = std::move(batch);
  qp.send_ops = send_ops;
  ibv_qp_ex& x = qp.qpx;
  x.comp_mask = 0;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_atomic_write = wr_atomic_write;
  return 0;
}

}  // namespace uroce::ibverbs
