// Memory windows through the drop-in: ibv_alloc_mw / ibv_dealloc_mw / ibv_bind_mw, which
// verbs.h inlines as calls through ibv_context::ops, and the BIND_MW work request both
// ibv_post_send and ibv_wr_bind_mw build. The rules live in the engine (transport/memory.hpp).
#include "ibverbs/objects.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return fail_null<ibv_mw>(EINVAL);
  auto r = dev_of(pd->context).alloc_mw(pd_of(pd)->id, static_cast<transport::MwType>(type));
  if (!r) return fail_null<ibv_mw>(r.status().code());
  auto* mw = new (std::nothrow) ibv_mw{};
  if (mw == nullptr) {
    (void)dev_of(pd->context).dealloc_mw(*r);
    return fail_null<ibv_mw>(ENOMEM);
  }
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = *r;
  mw->handle = *r >> 8;  // the window's tag: what names it whatever its key byte
  mw->type = type;
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  transport::Status st = dev_of(mw->context).dealloc_mw(mw->rkey);
  if (!st) return fail_int(st.code());
  delete mw;
  return 0;
}

// ibv_bind_mw (type 1; verbs.h has checked the type and the PDs): a BIND_MW work request
// under the next key byte, which becomes mw->rkey once posted (as rxe's provider does). The
// bind itself happens, and may still fail (IBV_WC_MW_BIND_ERR), when the QP reaches it.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
  transport::SendWr wr;
  wr.wr_id = mw_bind->wr_id;
  wr.opcode = transport::WrOpcode::kBindMw;
  wr.send_flags = mw_bind->send_flags;
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw = to_mw_bind(*mw, rkey, mw_bind->bind_info);
  transport::Status st = dev_of(qp->context).post_send(qp->qp_num, wr);
  if (!st) return fail_int(st.code());
  mw->rkey = rkey;
  return 0;
}

}  // namespace

namespace uroce::ibverbs {

transport::MwBind to_mw_bind(const ibv_mw& mw, uint32_t rkey, const ibv_mw_bind_info& info) {
  transport::MwBind b;
  b.mw_rkey = mw.rkey;
  b.rkey = rkey;
  b.mr_lkey = info.mr != nullptr ? info.mr->lkey : 0;
  b.addr = info.addr;
  b.length = info.mr != nullptr ? info.length : 0;
  b.access = info.mw_access_flags;
  return b;
}

void install_mw_ops(ibv_context_ops& ops) {
  ops.alloc_mw = alloc_mw;
  ops.dealloc_mw = dealloc_mw;
  ops.bind_mw = bind_mw;
}

}  // namespace uroce::ibverbs
