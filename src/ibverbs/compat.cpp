// The rest of libibverbs' exported surface, so that every program linked against rdma-core
// loads: helpers for the kernel's ABI structs (librdmacm uses them), sysfs access, fork
// support, and the verbs uroce does not implement, which fail with EOPNOTSUPP (or the
// documented error value) rather than pretending to succeed.
#include <fcntl.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <unistd.h>

#include <cstring>

#include <infiniband/sa.h>

#include "ibverbs/objects.hpp"

using namespace uroce::ibverbs;

extern "C" {

// ---- Kernel ABI struct conversions (rdma-core marshall.c).

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<int>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = static_cast<int>(src->reversible);
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = static_cast<uint8_t>(src->mtu);
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time = src->packet_life_time;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->preference = src->preference;
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof src->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof src->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<__u32>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = static_cast<__u32>(src->reversible);
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time = src->packet_life_time;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->preference = src->preference;
}

// ---- sysfs (librdmacm reads attributes of devices through these).

const char* ibv_get_sysfs_path(void) {
  const char* env = getenv("SYSFS_PATH");
  return env != nullptr && *env != '\0' ? env : "/sys";
}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (dir == nullptr || file == nullptr || buf == nullptr || size == 0) return fail_minus1(EINVAL);
  std::string path = std::string(dir) + "/" + file;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t len = read(fd, buf, size);
  const int saved = errno;
  close(fd);
  if (len <= 0) {
    errno = len < 0 ? saved : EINVAL;
    return -1;
  }
  if (static_cast<size_t>(len) < size && buf[len - 1] == '\n') buf[len - 1] = '\0';
  if (static_cast<size_t>(len) < size) buf[len] = '\0';
  return static_cast<int>(len);
}

// ---- fork(): uroce pins nothing and maps no device memory, so a forked child sees plain
// private memory; there is nothing to prepare (rdma-core reports "unneeded" likewise when
// the kernel copies pinned pages on fork).

int ibv_fork_init(void) {
  return 0;
}
ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}
int ibv_dontfork_range(void*, size_t) {
  return 0;
}
int ibv_dofork_range(void*, size_t) {
  return 0;
}

// ---- Not supported.

int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return fail_int(EOPNOTSUPP);
}
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return fail_int(EOPNOTSUPP);
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail_null<ibv_mr>(EOPNOTSUPP);
}

int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) {
  return fail_int(EOPNOTSUPP);  // uroce sends over UDP sockets: the kernel resolves L2
}

ibv_context* ibv_import_device(int) {
  return fail_null<ibv_context>(EOPNOTSUPP);
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  return fail_null<ibv_pd>(EOPNOTSUPP);
}
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  return fail_null<ibv_mr>(EOPNOTSUPP);
}
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  return fail_null<ibv_dm>(EOPNOTSUPP);
}
void ibv_unimport_dm(ibv_dm*) {}

int ibv_set_ece(ibv_qp*, ibv_ece*) {
  return fail_int(EOPNOTSUPP);
}
int ibv_query_ece(ibv_qp*, ibv_ece*) {
  return fail_int(EOPNOTSUPP);
}

// 0: placement order of the payload bytes is not guaranteed to the poller (the documented
// safe answer; a receiver must wait for the completion).
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 0;
}

}  // extern "C"
