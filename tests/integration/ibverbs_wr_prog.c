/* The ibv_wr_* send API (ibv_qp_ex) over the drop-in, run by ibverbs_wr_test.cpp: two RC QPs of
 * one context on lo (GID 1), A created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, B plain. Prints
 * one line per check; the test compares the whole output. */
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibverbs_prog_check.h"

enum { kBuf = 4096 };

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static struct ibv_cq* cq_a;
static struct ibv_cq* cq_b;

static struct ibv_qp* create(uint64_t ops, enum ibv_qp_type type, struct ibv_cq* cq) {
  struct ibv_qp_init_attr_ex a = {
      .send_cq = cq,
      .recv_cq = cq,
      .qp_type = type,
      .cap = {.max_send_wr = 4,
              .max_recv_wr = 4,
              .max_send_sge = 2,
              .max_recv_sge = 1,
              .max_inline_data = 64},
      .comp_mask = IBV_QP_INIT_ATTR_PD | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0),
      .pd = pd,
      .send_ops_flags = ops};
  return ibv_create_qp_ex(ctx, &a);
}

static void connect_to(struct ibv_qp* qp, uint32_t remote_qpn, const union ibv_gid* gid) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                             IBV_ACCESS_REMOTE_ATOMIC};
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote_qpn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = *gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
        "RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS");
}

/* Waits for exactly `n` completions on `cq` (up to 5 s) and prints them. */
static void expect_completions(struct ibv_cq* cq, const char* who, int n) {
  int got = 0;
  for (int spins = 0; got < n && spins < 5000; ++spins) {
    struct ibv_wc wc;
    const int r = ibv_poll_cq(cq, 1, &wc);
    CHECK(r >= 0, "ibv_poll_cq");
    if (r == 0) {
      usleep(1000);
      continue;
    }
    printf("%s wc wr_id %llu status %d opcode %d byte_len %u\n", who, (unsigned long long)wc.wr_id,
           wc.status, wc.opcode, wc.byte_len);
    ++got;
  }
  usleep(50 * 1000); /* nothing more arrives */
  struct ibv_wc extra;
  const int more = ibv_poll_cq(cq, 1, &extra);
  printf("%s completions %d%s\n", who, got, more > 0 ? " and more" : "");
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list != NULL && n >= 1, "ibv_get_device_list");
  ctx = ibv_open_device(list[0]);
  CHECK(ctx != NULL, "ibv_open_device");
  pd = ibv_alloc_pd(ctx);
  cq_a = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  cq_b = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  CHECK(pd && cq_a && cq_b, "pd/cq");

  /* What a QP may not ask for. */
  errno = 0;
  struct ibv_qp* refused = create(IBV_QP_EX_WITH_TSO, IBV_QPT_RC, cq_a);
  printf("rc tso: %s %s\n", refused ? "qp" : "NULL",
         errno == EOPNOTSUPP ? "EOPNOTSUPP" : strerror(errno));
  errno = 0;
  refused = create(IBV_QP_EX_WITH_RDMA_WRITE, IBV_QPT_UD, cq_a);
  printf("ud rdma_write: %s %s\n", refused ? "qp" : "NULL",
         errno == EOPNOTSUPP ? "EOPNOTSUPP" : strerror(errno));

  const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND |
                       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_WRITE |
                       IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
  struct ibv_qp* a = create(ops, IBV_QPT_RC, cq_a);
  struct ibv_qp* b = create(0, IBV_QPT_RC, cq_b);
  CHECK(a && b, "create_qp_ex");
  printf("qp_to_qp_ex: a %s, b %s\n", ibv_qp_to_qp_ex(a) ? "yes" : "NULL",
         ibv_qp_to_qp_ex(b) ? "yes" : "NULL");
  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0, "ibv_query_gid");
  connect_to(a, b->qp_num, &gid);
  connect_to(b, a->qp_num, &gid);

  static uint8_t abuf[kBuf] __attribute__((aligned(8)));
  static uint8_t bbuf[kBuf] __attribute__((aligned(8)));
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
  struct ibv_mr* amr = ibv_reg_mr(pd, abuf, kBuf, access);
  struct ibv_mr* bmr = ibv_reg_mr(pd, bbuf, kBuf, access);
  CHECK(amr && bmr, "ibv_reg_mr");
  struct ibv_sge rsge = {(uintptr_t)(bbuf + 2048), 256, bmr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 900, .sg_list = &rsge, .num_sge = 1};
  struct ibv_recv_wr* bad_r;
  CHECK(ibv_post_recv(b, &rwr, &bad_r) == 0, "post_recv");

  struct ibv_qp_ex* x = ibv_qp_to_qp_ex(a);
  /* 1: an inline WRITE (its source changed after ibv_wr_set_inline_data: the copy is sent)
   * and a SEND of 100 bytes from an SGE, one batch. */
  char text[32] = "written inline by ibv_wr";
  for (int i = 0; i < 100; ++i) abuf[i] = (uint8_t)(i * 7 + 1);
  ibv_wr_start(x);
  x->wr_id = 1;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, bmr->rkey, (uintptr_t)bbuf);
  ibv_wr_set_inline_data(x, text, 24);
  memset(text, 'X', sizeof text);
  x->wr_id = 2;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, amr->lkey, (uintptr_t)abuf, 100);
  printf("batch 1 complete: %d\n", ibv_wr_complete(x));
  expect_completions(cq_a, "a", 2);
  expect_completions(cq_b, "b", 1);
  printf("b write %s, send %s\n",
         memcmp(bbuf, "written inline by ibv_wr", 24) == 0 ? "equal" : "differs",
         memcmp(bbuf + 2048, abuf, 100) == 0 ? "equal" : "differs");

  /* 2: FETCH_AND_ADD into b (old value back in abuf+512) and ATOMIC WRITE of 8 bytes. */
  uint64_t start = 40, store = 0x1122334455667788ull;
  memcpy(bbuf + 1024, &start, 8);
  ibv_wr_start(x);
  x->wr_id = 3;
  ibv_wr_atomic_fetch_add(x, bmr->rkey, (uintptr_t)(bbuf + 1024), 2);
  ibv_wr_set_sge(x, amr->lkey, (uintptr_t)(abuf + 512), 8);
  x->wr_id = 4;
  ibv_wr_atomic_write(x, bmr->rkey, (uintptr_t)(bbuf + 1032), &store);
  store = 0; /* copied at the call */
  printf("batch 2 complete: %d\n", ibv_wr_complete(x));
  expect_completions(cq_a, "a", 2);
  uint64_t old, now, written;
  memcpy(&old, abuf + 512, 8);
  memcpy(&now, bbuf + 1024, 8);
  memcpy(&written, bbuf + 1032, 8);
  printf("fetch_add old %llu now %llu, atomic_write %llx\n", (unsigned long long)old,
         (unsigned long long)now, (unsigned long long)written);

  /* 3: errors found while building post nothing. */
  ibv_wr_start(x);
  ibv_wr_set_sge(x, amr->lkey, (uintptr_t)abuf, 8); /* no WR yet */
  x->wr_id = 5;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, amr->lkey, (uintptr_t)abuf, 8);
  printf("set_sge before a WR: %s\n", ibv_wr_complete(x) == EINVAL ? "EINVAL" : "other");
  ibv_wr_start(x);
  x->wr_id = 6;
  ibv_wr_rdma_read(x, bmr->rkey, (uintptr_t)bbuf); /* not asked for at create */
  printf("rdma_read not in send_ops: %s\n",
         ibv_wr_complete(x) == EOPNOTSUPP ? "EOPNOTSUPP" : "other");
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qi;
  CHECK(ibv_query_qp(a, &qa, IBV_QP_CAP, &qi) == 0, "query_qp");
  ibv_wr_start(x);
  for (uint32_t i = 0; i <= qa.cap.max_send_wr; ++i) {
    x->wr_id = 100 + i;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)abuf, 8);
  }
  printf("max_send_wr + 1 WRs: %s\n", ibv_wr_complete(x) == ENOMEM ? "ENOMEM" : "other");
  ibv_wr_start(x);
  x->wr_id = 7;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, amr->lkey, (uintptr_t)abuf, 8);
  ibv_wr_abort(x);
  ibv_wr_start(x);
  printf("aborted, then an empty batch: %d\n", ibv_wr_complete(x));
  expect_completions(cq_a, "a", 0);
  expect_completions(cq_b, "b", 0);

  /* 4: memory windows over abuf, whose MR has no remote rights of its own. A type 1 window
   * bound by ibv_bind_mw, then a type 2 window bound by ibv_wr_bind_mw; B writes through
   * each; ibv_wr_local_inv frees the type 2 window and B's next write through it fails. */
  struct ibv_device_attr da;
  CHECK(ibv_query_device(ctx, &da) == 0, "query_device");
  printf("max_mw %d, MEM_WINDOW %s, TYPE_2B %s\n", da.max_mw,
         (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) ? "yes" : "no",
         (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) ? "yes" : "no");
  struct ibv_mr* wmr = ibv_reg_mr(pd, abuf, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  struct ibv_mw* w1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  struct ibv_mw* w2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECK(wmr && w1 && w2, "reg_mr / alloc_mw");
  const uint32_t w1_first = w1->rkey;
  struct ibv_mw_bind mb = {.wr_id = 10,
                           .send_flags = IBV_SEND_SIGNALED,
                           .bind_info = {.mr = wmr,
                                         .addr = (uintptr_t)(abuf + 3072),
                                         .length = 256,
                                         .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
  const int bound = ibv_bind_mw(a, w1, &mb);
  printf("ibv_bind_mw type 1: %d, rkey %s\n", bound,
         w1->rkey == ibv_inc_rkey(w1_first) ? "incremented" : "unchanged");
  expect_completions(cq_a, "a", 1);
  for (int i = 0; i < 64; ++i) bbuf[i] = (uint8_t)(0xA0 + i);
  struct ibv_sge bsge = {(uintptr_t)bbuf, 64, bmr->lkey};
  struct ibv_send_wr bw = {.wr_id = 20,
                           .sg_list = &bsge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED,
                           .wr.rdma = {(uintptr_t)(abuf + 3072 + 192), w1->rkey}};
  struct ibv_send_wr* bad_s;
  CHECK(ibv_post_send(b, &bw, &bad_s) == 0, "post_send through w1");
  expect_completions(cq_b, "b", 1);
  printf("through type 1: %s\n", memcmp(abuf + 3072 + 192, bbuf, 64) == 0 ? "equal" : "differs");

  const uint32_t key2 = ibv_inc_rkey(w2->rkey);
  struct ibv_mw_bind_info info2 = {wmr, (uintptr_t)(abuf + 3584), 512, IBV_ACCESS_REMOTE_WRITE};
  ibv_wr_start(x);
  x->wr_id = 11;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(x, w2, key2, &info2);
  printf("ibv_wr_bind_mw type 2: %d\n", ibv_wr_complete(x));
  expect_completions(cq_a, "a", 1);
  bw.wr_id = 21;
  bw.wr.rdma.remote_addr = (uintptr_t)(abuf + 3584);
  bw.wr.rdma.rkey = key2;
  CHECK(ibv_post_send(b, &bw, &bad_s) == 0, "post_send through w2");
  expect_completions(cq_b, "b", 1);
  printf("through type 2: %s\n", memcmp(abuf + 3584, bbuf, 64) == 0 ? "equal" : "differs");
  ibv_wr_start(x);
  x->wr_id = 12;
  ibv_wr_local_inv(x, key2);
  printf("ibv_wr_local_inv: %d\n", ibv_wr_complete(x));
  expect_completions(cq_a, "a", 1);
  bw.wr_id = 22;
  CHECK(ibv_post_send(b, &bw, &bad_s) == 0, "post_send after LOCAL_INV");
  expect_completions(cq_b, "b", 1);
  printf("dereg_mr under a bound window: %s\n", ibv_dereg_mr(wmr) == EBUSY ? "EBUSY" : "other");
  CHECK(ibv_dealloc_mw(w1) == 0 && ibv_dealloc_mw(w2) == 0, "dealloc_mw");
  CHECK(ibv_dereg_mr(wmr) == 0, "dereg_mr");

  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_dereg_mr(amr);
  ibv_dereg_mr(bmr);
  ibv_destroy_cq(cq_a);
  ibv_destroy_cq(cq_b);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("done\n");
  return 0;
}
