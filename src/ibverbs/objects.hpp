// The C objects the libibverbs shim hands to applications, each embedding the ibverbs struct
// an application sees (first member, so a pointer to it is a pointer to ours), plus the
// uroce id it stands for.
//
// Context layout: rdma-core's inline verbs (verbs.h) find `struct verbs_context` from an
// `ibv_context*` by container_of and check `sz` before calling an extended op, so UContext
// embeds verbs_context whole, with the ibv_context as its last field, abi_compat set to
// __VERBS_ABI_IS_EXTENDED and sz = sizeof(verbs_context). Data-path verbs (post_send,
// poll_cq, ...) are inline in verbs.h too and dispatch through ibv_context::ops.
//
// Threading: ibverbs objects may be used from several threads. The Device is thread-safe;
// the id -> object maps here (needed to turn a CQ event or an async event back into the
// application's pointer) are guarded by UContext::mu.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "device/device.hpp"

namespace uroce::ibverbs {

struct UCq;
struct UMr;
struct UQp;
struct USrq;

struct UContext {
  verbs_context vctx{};  // first: container_of(ibv_context) lands here
  std::unique_ptr<device::Device> dev;
  std::mutex mu;
  std::unordered_map<uint32_t, UCq*> cqs;      // by CqId
  std::unordered_map<uint32_t, UQp*> qps;      // by QPN
  std::unordered_map<uint32_t, USrq*> srqs;    // by SrqId
  std::unordered_map<uint32_t, UMr*> odp_mrs;  // on-demand MRs by lkey, for ibv_advise_mr
};

struct UPd {
  ibv_pd pd{};
  transport::PdId id{};
};

struct UMr {
  ibv_mr mr{};
  unsigned access = 0;     // as registered (ibv_rereg_mr keeps what it does not change)
  bool on_demand = false;  // IBV_ACCESS_ON_DEMAND (kept in odp_mrs for ibv_advise_mr)
};

struct UChannel {
  ibv_comp_channel ch{};
  device::ChannelId id{};
};

struct UCq {
  ibv_cq_ex cq{};  // ibv_cq is its prefix (ibv_cq_ex_to_cq is a cast)
  transport::CqId id{};
  // Extended polling (ibv_start_poll ... ibv_end_poll): the entry being read. Entries are
  // taken one at a time, so nothing polled is left behind when the application stops.
  transport::Wc current{};
};

struct USrq {
  ibv_srq srq{};
  transport::SrqId id{};
};

// The WRs of one ibv_wr_start ... ibv_wr_complete batch (qp_ex.cpp). Sized once when the QP
// is created (max_send_wr WRs, their SGEs and inline bytes), so building a batch allocates
// nothing; a batch that outgrows it fails at ibv_wr_complete with ENOMEM.
struct WrBatch {
  struct Entry {
    transport::SendWr wr;
    uint32_t sge_begin = 0;  // into sges
    uint32_t sge_count = 0;
  };
  std::vector<Entry> entries;
  std::vector<transport::Sge> sges;
  std::vector<uint8_t> inline_bytes;  // inline data copied at ibv_wr_set_inline_data*
  size_t inline_used = 0;
  int error = 0;  // the first error of the batch, returned by ibv_wr_complete
};

struct UQp {
  ibv_qp_ex qpx{};  // qp_base first: an ibv_qp* is a UQp*
  // Created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: ibv_qp_to_qp_ex answers qpx, whose wr_*
  // ops build `batch`; send_ops is what was asked for (IBV_QP_EX_WITH_*).
  uint64_t send_ops = 0;
  std::unique_ptr<WrBatch> batch;
};

struct UAh {
  ibv_ah ah{};
  transport::AhAttr attr;  // resolved: source GID filled in
};

inline UContext* ctx_of(ibv_context* c) {
  return reinterpret_cast<UContext*>(reinterpret_cast<uint8_t*>(c) -
                                     offsetof(verbs_context, context));
}
inline device::Device& dev_of(ibv_context* c) {
  return *ctx_of(c)->dev;
}
inline UPd* pd_of(ibv_pd* p) {
  return reinterpret_cast<UPd*>(p);
}
inline UCq* cq_of(ibv_cq* c) {
  return reinterpret_cast<UCq*>(c);
}
inline UCq* cq_of(ibv_cq_ex* c) {
  return reinterpret_cast<UCq*>(c);
}
inline USrq* srq_of(ibv_srq* s) {
  return reinterpret_cast<USrq*>(s);
}
inline UAh* ah_of(ibv_ah* a) {
  return reinterpret_cast<UAh*>(a);
}
inline UChannel* channel_of(ibv_comp_channel* c) {
  return reinterpret_cast<UChannel*>(c);
}

// ibverbs reports errors two ways: functions returning a pointer set errno and return
// NULL; functions returning int return the errno value (and rdma-core sets errno too).
template <typename T>
T* fail_null(int err) {
  errno = err;
  return nullptr;
}
inline int fail_int(int err) {
  errno = err;
  return err;
}
inline int fail_minus1(int err) {  // the older verbs: -1 and errno
  errno = err;
  return -1;
}

// Converts between ibverbs' address vector and the engine's. RoCE v2 needs the GRH; an AV
// without one is routed to UROCE_PEER when that is set (resources.cpp), else EINVAL.
int ah_from_ibv(ibv_context* context, const ibv_ah_attr& in, transport::AhAttr& out);
void ah_to_ibv(const transport::AhAttr& in, ibv_ah_attr& out);

// Extended-poll ops installed on every CQ (cq_ex.cpp).
void install_cq_ex_ops(ibv_cq_ex& cq);

// Data-path ops installed in ibv_context::ops (datapath.cpp).
void install_datapath_ops(ibv_context_ops& ops);
// ibv_alloc_mw / ibv_dealloc_mw / ibv_bind_mw (memory_window.cpp).
void install_mw_ops(ibv_context_ops& ops);
// The engine's BIND_MW of `mw` under `rkey` (ibv_send_wr::bind_mw, ibv_wr_bind_mw).
transport::MwBind to_mw_bind(const ibv_mw& mw, uint32_t rkey, const ibv_mw_bind_info& info);

// Extended ops installed in verbs_context (query.cpp, resources.cpp, qp.cpp).
int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len);
int query_rt_values(ibv_context* context, ibv_values_ex* values);
int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size);
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge);

// Waits until `fd` is readable, as a blocking read() of rdma-core's event fds would: a
// signal interrupts the wait with EINTR (programs such as qperf stop on SIGALRM that way).
// Returns 0 when readable, else an errno value.
int wait_readable(int fd);

// The application's event fds (app_fd.cpp): an epoll fd over a device queue's eventfd, so
// that O_NONBLOCK set by the application is its own. make_app_fd returns the fd or -errno.
int make_app_fd(int queue_fd);
void close_app_fd(int fd);
// After a get-event found nothing: EAGAIN if the application made `fd` non-blocking, else
// waits until readable (0, or EINTR when a signal came).
int wait_app_fd(int fd);
// EAGAIN if the application made `fd` non-blocking, 0 if a get-event on it should block.
int app_fd_nonblocking(int fd);

// The ibv_wr_* send API (qp_ex.cpp): which IBV_QP_EX_WITH_* flags a QP of `type` may ask for,
// and the ops and batch storage of a QP created with them.
[[nodiscard]] uint64_t supported_send_ops(ibv_qp_type type);
[[nodiscard]] int install_qp_ex_ops(UQp& qp, uint64_t send_ops, const ibv_qp_cap& cap);

// Creates a QP as ibv_create_qp does; gsi: QP1 (a UD QP the engine gives QPN 1 and the GSI
// Q_Key), which only the uroce librdmacm asks for (uroce_private.h).
ibv_qp* make_qp(ibv_pd* pd, const ibv_qp_init_attr_ex& attr, ibv_qp_cap& granted_out, bool gsi);
// ibv_create_qp's attributes as ibv_create_qp_ex's, with `pd`.
ibv_qp_init_attr_ex init_attr_ex(ibv_pd* pd, const ibv_qp_init_attr& attr);

// Converts one engine completion to ibverbs' layout (imm_data back to network order).
void wc_to_ibv(const transport::Wc& in, ibv_wc& out);

}  // namespace uroce::ibverbs
