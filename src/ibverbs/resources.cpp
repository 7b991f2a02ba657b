// Protection domains, memory regions, completion channels, CQs, SRQs and address handles:
// each ibverbs object wraps the device's id for it (objects.hpp).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include <cstring>
#include <new>

#include "ibverbs/objects.hpp"
#include "ibverbs/options.hpp"
#include "net/netdev.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

// Access bits the engine implements; ibverbs' optional range (relaxed ordering, ...) is a
// hint a device may ignore (rdma-core drops it for devices without it).
constexpr unsigned kEngineAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                   IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED;

// The range [addr, addr + length) is mapped: madvise(MADV_NORMAL) fails with ENOMEM on a hole.
// Checked for on-demand registrations, which promise it (rdma-core's ODP MRs cover mappings).
bool range_mapped(const void* addr, size_t length) {
  if (length == 0) return true;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(addr) + length;
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_NORMAL) == 0;
}

// The engine's access bits for ibverbs' `access`, or an errno: zero-based and IOVA-offset MRs
// need an address translation the engine's memory checker does not have (it checks remote
// addresses against addr).
//
// On-demand paging: uroce reads and writes registered memory through the process's own page
// tables and pins nothing (docs/ibverbs.md), so every MR already behaves as an on-demand one:
// pages fault in when touched. An on-demand MR must be mapped when registered, as an explicit
// ODP MR; implicit ODP (the whole address space, addr 0 and SIZE_MAX) is not offered (odp_caps
// has no IBV_ODP_SUPPORT_IMPLICIT).
int engine_access(unsigned asked, void* addr, size_t length, uint64_t iova, unsigned& access,
                  bool& on_demand) {
  access = asked & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  access &= ~static_cast<unsigned>(IBV_ACCESS_HUGETLB);  // a hint about the pages only
  if ((access & IBV_ACCESS_ZERO_BASED) != 0 || iova != reinterpret_cast<uintptr_t>(addr)) {
    return EOPNOTSUPP;
  }
  on_demand = (access & IBV_ACCESS_ON_DEMAND) != 0;
  access &= ~static_cast<unsigned>(IBV_ACCESS_ON_DEMAND);
  if ((access & ~kEngineAccess) != 0) return EINVAL;
  if (on_demand && (length == SIZE_MAX || !range_mapped(addr, length))) return EFAULT;
  return 0;
}

void track_on_demand(UMr& mr) {
  UContext* uctx = ctx_of(mr.mr.context);
  std::lock_guard lock(uctx->mu);
  if (mr.on_demand) {
    uctx->odp_mrs[mr.mr.lkey] = &mr;
  } else {
    uctx->odp_mrs.erase(mr.mr.lkey);
  }
}

ibv_mr* reg_mr_common(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned asked) {
  if (pd == nullptr) return fail_null<ibv_mr>(EINVAL);
  unsigned access = 0;
  bool on_demand = false;
  if (const int rc = engine_access(asked, addr, length, iova, access, on_demand); rc != 0) {
    return fail_null<ibv_mr>(rc);
  }
  auto r = dev_of(pd->context).reg_mr(pd_of(pd)->id, addr, length, access);
  if (!r) return fail_null<ibv_mr>(r.status().code());
  auto* mr = new (std::nothrow) UMr;
  if (mr == nullptr) {
    (void)dev_of(pd->context).dereg_mr(r->lkey);
    return fail_null<ibv_mr>(ENOMEM);
  }
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.handle = r->lkey;
  mr->mr.lkey = r->lkey;
  mr->mr.rkey = r->rkey;
  mr->access = asked;
  mr->on_demand = on_demand;
  if (on_demand) track_on_demand(*mr);
  return &mr->mr;
}

// RoCE carries every packet in IP, so an address vector needs the GRH (the kernel's
// rdma_check_ah_attr refuses one without it, EINVAL). Programs written for InfiniBand LIDs
// (qperf) never set it; for them UROCE_PEER names the one peer address, and the source GID
// is the entry of the AV's port holding the address the kernel routes from.
int peer_route(ibv_context* context, transport::AhAttr& out) {
  const char* peer = std::getenv("UROCE_PEER");
  if (peer == nullptr || *peer == '\0') {
    report(
        "address vector without a GRH: RoCE needs the destination GID; for programs that "
        "never set one, give the peer's address in UROCE_PEER");
    return EINVAL;
  }
  auto dst = net::IpAddr::parse(peer);
  if (!dst) {
    report(std::string("UROCE_PEER=") + peer + " is not an IPv4 or IPv6 address");
    return EINVAL;
  }
  auto src = net::route_source_for(*dst);
  if (!src) {
    report("UROCE_PEER: " + src.error().message);
    return src.error().code != 0 ? src.error().code : EINVAL;
  }
  for (const device::PortInfo& p : dev_of(context).ports()) {
    if (p.port_num != out.port_num) continue;
    for (size_t i = 0; i < p.gids.size(); ++i) {
      if (p.gids[i].gid != src.value().bytes) continue;
      out.dgid = dst->bytes;
      out.sgid_index = static_cast<uint8_t>(i);
      out.hop_limit = 64;
      return 0;
    }
  }
  report(std::string("UROCE_PEER=") + peer + ": the source address " + src.value().to_string() +
         " is no GID of port " + std::to_string(out.port_num));
  return EINVAL;
}

void register_cq(UContext* uctx, UCq* cq) {
  std::lock_guard lock(uctx->mu);
  uctx->cqs[static_cast<uint32_t>(cq->id)] = cq;
}

ibv_cq_ex* make_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                   int comp_vector) {
  if (context == nullptr || cqe <= 0) return fail_null<ibv_cq_ex>(EINVAL);
  if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    return fail_null<ibv_cq_ex>(EINVAL);
  }
  std::optional<device::ChannelId> ch;
  if (channel != nullptr) ch = channel_of(channel)->id;
  device::Device& dev = dev_of(context);
  auto r = dev.create_cq(static_cast<uint32_t>(cqe), ch);
  if (!r) return fail_null<ibv_cq_ex>(r.status().code());
  auto* cq = new (std::nothrow) UCq;
  if (cq == nullptr) {
    (void)dev.destroy_cq(*r);
    return fail_null<ibv_cq_ex>(ENOMEM);
  }
  cq->id = *r;
  ibv_cq_ex& c = cq->cq;
  c.context = context;
  c.channel = channel;
  c.cq_context = cq_context;
  c.handle = static_cast<uint32_t>(cq->id);
  c.cqe = static_cast<int>(dev.cq_capacity(cq->id));
  pthread_mutex_init(&c.mutex, nullptr);
  pthread_cond_init(&c.cond, nullptr);
  install_cq_ex_ops(c);
  if (channel != nullptr) {
    pthread_mutex_lock(&context->mutex);
    ++channel->refcnt;
    pthread_mutex_unlock(&context->mutex);
  }
  register_cq(ctx_of(context), cq);
  return &c;
}

}  // namespace

namespace uroce::ibverbs {

int ah_from_ibv(ibv_context* context, const ibv_ah_attr& in, transport::AhAttr& out) {
  out = transport::AhAttr{};
  out.sl = in.sl;
  out.port_num = in.port_num == 0 ? 1 : in.port_num;
  out.is_global = true;
  if (in.is_global == 0) return peer_route(context, out);
  std::memcpy(out.dgid.data(), in.grh.dgid.raw, 16);
  out.flow_label = in.grh.flow_label;
  out.sgid_index = in.grh.sgid_index;
  out.hop_limit = in.grh.hop_limit == 0 ? 64 : in.grh.hop_limit;
  out.traffic_class = in.grh.traffic_class;
  return 0;
}

void ah_to_ibv(const transport::AhAttr& in, ibv_ah_attr& out) {
  std::memset(&out, 0, sizeof out);
  std::memcpy(out.grh.dgid.raw, in.dgid.data(), 16);
  out.grh.flow_label = in.flow_label;
  out.grh.sgid_index = in.sgid_index;
  out.grh.hop_limit = in.hop_limit;
  out.grh.traffic_class = in.traffic_class;
  out.sl = in.sl;
  out.is_global = in.is_global ? 1 : 0;
  out.port_num = in.port_num;
}

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (attr == nullptr) return fail_null<ibv_cq_ex>(EINVAL);
  // The standard fields and completion timestamps; no VLAN, flow tags or tag matching.
  constexpr uint64_t kWcFlags = static_cast<uint64_t>(IBV_WC_STANDARD_FLAGS) |
                                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  if ((attr->wc_flags & ~kWcFlags) != 0) {
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  }
  if ((attr->comp_mask & ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS)) != 0) {
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0 &&
      (attr->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
                                            IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) != 0) {
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  }
  return make_cq(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                 static_cast<int>(attr->comp_vector));
}

}  // namespace uroce::ibverbs

namespace uroce::ibverbs {

// ibv_advise_mr on on-demand MRs: every SGE must lie in an on-demand MR of `pd` (EINVAL
// otherwise, as for a pinned MR on mlx5). Prefetching asks the kernel to read the pages in
// (MADV_WILLNEED); uroce needs nothing more, since its accesses fault pages in as the
// application's own would. IBV_ADVISE_MR_FLAG_FLUSH (wait until done) changes nothing here.
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge) {
  if (pd == nullptr || (num_sge > 0 && sg_list == nullptr)) return fail_int(EINVAL);
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
    return fail_int(EOPNOTSUPP);
  }
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0) return fail_int(EINVAL);
  UContext* uctx = ctx_of(pd->context);
  std::lock_guard lock(uctx->mu);
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    auto it = uctx->odp_mrs.find(s.lkey);
    if (it == uctx->odp_mrs.end() || it->second->mr.pd != pd) return fail_int(EINVAL);
    const ibv_mr& mr = it->second->mr;
    const auto begin = reinterpret_cast<uintptr_t>(mr.addr);
    if (s.addr < begin || s.length > mr.length || s.addr - begin > mr.length - s.length) {
      return fail_int(EINVAL);
    }
  }
  if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) return 0;  // nothing to map
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (uint32_t i = 0; i < num_sge; ++i) {
    if (sg_list[i].length == 0) continue;
    const uintptr_t begin = sg_list[i].addr & ~(page - 1);
    (void)madvise(reinterpret_cast<void*>(begin), sg_list[i].addr + sg_list[i].length - begin,
                  MADV_WILLNEED);
  }
  return 0;
}

}  // namespace uroce::ibverbs

extern "C" {

// ---- Protection domains.

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (context == nullptr) return fail_null<ibv_pd>(EINVAL);
  auto r = dev_of(context).alloc_pd();
  if (!r) return fail_null<ibv_pd>(r.status().code());
  auto* pd = new (std::nothrow) UPd;
  if (pd == nullptr) {
    (void)dev_of(context).dealloc_pd(*r);
    return fail_null<ibv_pd>(ENOMEM);
  }
  pd->id = *r;
  pd->pd.context = context;
  pd->pd.handle = static_cast<uint32_t>(*r);
  return &pd->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (pd == nullptr) return fail_int(EINVAL);
  transport::Status st = dev_of(pd->context).dealloc_pd(pd_of(pd)->id);
  if (!st) return fail_int(st.code());
  delete pd_of(pd);
  return 0;
}

// ---- Memory regions.

ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  return reg_mr_common(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                       static_cast<unsigned>(access));
}

ibv_mr*(ibv_reg_mr_iova)(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return reg_mr_common(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  return reg_mr_common(pd, addr, length, iova, access);
}

// ibv_rereg_mr: the MR keeps its lkey and rkey (a peer holding the rkey goes on using it, as
// on rxe and mlx5) and takes the new translation, PD and access; what `flags` does not name
// stays. A refused change leaves the MR as it was (IBV_REREG_MR_ERR_INPUT for bad arguments,
// IBV_REREG_MR_ERR_CMD when the device refuses; errno says why).
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (mr == nullptr || flags <= 0 || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) != 0 ||
      ((flags & IBV_REREG_MR_CHANGE_PD) != 0 && (pd == nullptr || pd->context != mr->context))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  UMr* u = reinterpret_cast<UMr*>(mr);
  ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) != 0 ? pd : mr->pd;
  const bool translate = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
  void* new_addr = translate ? addr : mr->addr;
  const size_t new_length = translate ? length : mr->length;
  const unsigned asked =
      (flags & IBV_REREG_MR_CHANGE_ACCESS) != 0 ? static_cast<unsigned>(access) : u->access;
  unsigned engine = 0;
  bool on_demand = false;
  if (const int rc = engine_access(asked, new_addr, new_length,
                                   reinterpret_cast<uintptr_t>(new_addr), engine, on_demand);
      rc != 0) {
    errno = rc;
    return IBV_REREG_MR_ERR_INPUT;
  }
  auto r = dev_of(mr->context).rereg_mr(mr->lkey, pd_of(new_pd)->id, new_addr, new_length, engine);
  if (!r) {
    errno = r.status().code();
    return IBV_REREG_MR_ERR_CMD;
  }
  mr->pd = new_pd;
  mr->addr = new_addr;
  mr->length = new_length;
  u->access = asked;
  u->on_demand = on_demand;
  track_on_demand(*u);
  return 0;
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (mr == nullptr) return fail_int(EINVAL);
  transport::Status st = dev_of(mr->context).dereg_mr(mr->lkey);
  if (!st) return fail_int(st.code());
  if (reinterpret_cast<UMr*>(mr)->on_demand) {
    UContext* uctx = ctx_of(mr->context);
    std::lock_guard lock(uctx->mu);
    uctx->odp_mrs.erase(mr->lkey);
  }
  delete reinterpret_cast<UMr*>(mr);
  return 0;
}

// ---- Completion channels.

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (context == nullptr) return fail_null<ibv_comp_channel>(EINVAL);
  device::Device& dev = dev_of(context);
  auto r = dev.create_comp_channel();
  if (!r) return fail_null<ibv_comp_channel>(r.status().code());
  auto* ch = new (std::nothrow) UChannel;
  if (ch == nullptr) {
    (void)dev.destroy_comp_channel(*r);
    return fail_null<ibv_comp_channel>(ENOMEM);
  }
  ch->id = *r;
  ch->ch.context = context;
  ch->ch.fd = make_app_fd(dev.channel_fd(*r));
  if (ch->ch.fd < 0) {
    const int err = -ch->ch.fd;
    (void)dev.destroy_comp_channel(*r);
    delete ch;
    return fail_null<ibv_comp_channel>(err);
  }
  ch->ch.refcnt = 0;
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel == nullptr) return fail_int(EINVAL);
  transport::Status st = dev_of(channel->context).destroy_comp_channel(channel_of(channel)->id);
  if (!st) return fail_int(st.code());
  close_app_fd(channel->fd);
  delete channel_of(channel);
  return 0;
}

// ---- Completion queues.

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  return ibv_cq_ex_to_cq(make_cq(context, cqe, cq_context, channel, comp_vector));
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (cq == nullptr) return fail_int(EINVAL);
  UContext* uctx = ctx_of(cq->context);
  UCq* ucq = cq_of(cq);
  transport::Status st = uctx->dev->destroy_cq(ucq->id);
  if (!st) return fail_int(st.code());
  {
    std::lock_guard lock(uctx->mu);
    uctx->cqs.erase(static_cast<uint32_t>(ucq->id));
  }
  if (cq->channel != nullptr) {
    pthread_mutex_lock(&cq->context->mutex);
    --cq->channel->refcnt;
    pthread_mutex_unlock(&cq->context->mutex);
  }
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete ucq;
  return 0;
}

// The engine sizes a CQ's ring at creation.
// The CQ holds `cqe` entries afterwards (cq->cqe); EINVAL when more completions are queued.
int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (cq == nullptr || cqe <= 0) return fail_int(EINVAL);
  device::Device& dev = dev_of(cq->context);
  const transport::CqId id = cq_of(cq)->id;
  if (transport::Status st = dev.resize_cq(id, static_cast<uint32_t>(cqe)); !st) {
    return fail_int(st.code());
  }
  cq->cqe = static_cast<int>(dev.cq_capacity(id));
  return 0;
}

// ---- Shared receive queues.

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_srq>(EINVAL);
  device::Device& dev = dev_of(pd->context);
  transport::SrqInitAttr init;
  init.max_wr = attr->attr.max_wr;
  init.max_sge = attr->attr.max_sge;
  init.srq_limit = attr->attr.srq_limit;
  auto r = dev.create_srq(pd_of(pd)->id, init);
  if (!r) return fail_null<ibv_srq>(r.status().code());
  auto* srq = new (std::nothrow) USrq;
  if (srq == nullptr) {
    (void)dev.destroy_srq(*r);
    return fail_null<ibv_srq>(ENOMEM);
  }
  srq->id = *r;
  srq->srq.context = pd->context;
  srq->srq.srq_context = attr->srq_context;
  srq->srq.pd = pd;
  srq->srq.handle = static_cast<uint32_t>(*r);
  pthread_mutex_init(&srq->srq.mutex, nullptr);
  pthread_cond_init(&srq->srq.cond, nullptr);
  transport::SrqAttr granted;
  if (dev.query_srq(*r, granted)) {
    attr->attr.max_wr = granted.max_wr;
    attr->attr.max_sge = granted.max_sge;
  }
  UContext* uctx = ctx_of(pd->context);
  std::lock_guard lock(uctx->mu);
  uctx->srqs[static_cast<uint32_t>(*r)] = srq;
  return &srq->srq;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (srq == nullptr || attr == nullptr) return fail_int(EINVAL);
  transport::SrqAttr a;
  a.max_wr = attr->max_wr;
  a.max_sge = attr->max_sge;
  a.srq_limit = attr->srq_limit;
  transport::Status st =
      dev_of(srq->context).modify_srq(srq_of(srq)->id, a, static_cast<uint32_t>(mask));
  return st ? 0 : fail_int(st.code());
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (srq == nullptr || attr == nullptr) return fail_int(EINVAL);
  transport::SrqAttr a;
  transport::Status st = dev_of(srq->context).query_srq(srq_of(srq)->id, a);
  if (!st) return fail_int(st.code());
  attr->max_wr = a.max_wr;
  attr->max_sge = a.max_sge;
  attr->srq_limit = a.srq_limit;
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (srq == nullptr) return fail_int(EINVAL);
  UContext* uctx = ctx_of(srq->context);
  transport::Status st = uctx->dev->destroy_srq(srq_of(srq)->id);
  if (!st) return fail_int(st.code());
  {
    std::lock_guard lock(uctx->mu);
    uctx->srqs.erase(static_cast<uint32_t>(srq_of(srq)->id));
  }
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete srq_of(srq);
  return 0;
}

// ---- Address handles.

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_ah>(EINVAL);
  transport::AhAttr av;
  if (int rc = ah_from_ibv(pd->context, *attr, av); rc != 0) return fail_null<ibv_ah>(rc);
  transport::Status st = dev_of(pd->context).resolve_av(av);
  if (!st) return fail_null<ibv_ah>(st.code());
  auto* ah = new (std::nothrow) UAh;
  if (ah == nullptr) return fail_null<ibv_ah>(ENOMEM);
  ah->ah.context = pd->context;
  ah->ah.pd = pd;
  ah->attr = av;
  return &ah->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  if (ah == nullptr) return fail_int(EINVAL);
  delete ah_of(ah);
  return 0;
}

}  // extern "C"
