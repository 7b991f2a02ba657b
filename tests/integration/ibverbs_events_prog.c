/* A C verbs program linked against the drop-in (build/lib/libibverbs.so.1), run by
 * ibverbs_events_test.cpp: non-blocking completion channel and async fd, then one UD
 * datagram to itself through the GID at argv[1] (1: ::ffff:127.0.0.1 on lo), printing the
 * receive completion and its 40-byte GRH area, then a signal ending a blocked
 * ibv_get_cq_event. Every line it prints is checked exactly. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ibverbs_prog_check.h"

enum { kQkey = 0x11111111, kPayload = 64, kGrh = 40 };

struct delayed_send {
  struct ibv_qp* qp;
  struct ibv_send_wr* wr;
  int rc;
};

static void* post_later(void* arg) {
  struct delayed_send* d = arg;
  usleep(300 * 1000);
  struct ibv_send_wr* bad;
  d->rc = ibv_post_send(d->qp, d->wr, &bad);
  return NULL;
}

struct blocked_get {
  struct ibv_comp_channel* ch;
  int rc;
  int err;
};

static void* get_blocking(void* arg) {
  struct blocked_get* g = arg;
  struct ibv_cq* cq;
  void* ctx;
  errno = 0;
  g->rc = ibv_get_cq_event(g->ch, &cq, &ctx);
  g->err = errno;
  return NULL;
}

static void on_signal(int sig) {
  (void)sig;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void set_nonblock(int fd, int on) {
  int flags = fcntl(fd, F_GETFL);
  CHECK(flags >= 0, "F_GETFL");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  CHECK(fcntl(fd, F_SETFL, flags) == 0, "F_SETFL");
}

int main(int argc, char** argv) {
  const int gid_index = argc > 1 ? atoi(argv[1]) : 1;
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list != NULL && n >= 1, "ibv_get_device_list");
  struct ibv_context* ctx = ibv_open_device(list[0]);
  CHECK(ctx != NULL, "ibv_open_device");
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  CHECK(ch != NULL, "ibv_create_comp_channel");
  struct ibv_cq* cq = ibv_create_cq(ctx, 16, (void*)0x1234, ch, 0);
  CHECK(cq != NULL, "ibv_create_cq");
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd != NULL, "ibv_alloc_pd");
  static unsigned char buf[2 * (kGrh + kPayload)];
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr != NULL, "ibv_reg_mr");
  struct ibv_qp_init_attr qia = {
      .send_cq = cq,
      .recv_cq = cq,
      .qp_type = IBV_QPT_UD,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(pd, &qia);
  CHECK(qp != NULL, "ibv_create_qp");
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = kQkey};
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0,
        "modify INIT");
  a.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "modify RTR");
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "modify RTS");

  /* Nothing pending: a non-blocking channel and async fd answer EAGAIN at once. */
  CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
  set_nonblock(ch->fd, 1);
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  errno = 0;
  int rc = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
  printf("nonblocking ibv_get_cq_event: %d %s\n", rc, errno == EAGAIN ? "EAGAIN" : strerror(errno));
  set_nonblock(ctx->async_fd, 1);
  struct ibv_async_event aev;
  errno = 0;
  rc = ibv_get_async_event(ctx, &aev);
  printf("nonblocking ibv_get_async_event: %d %s\n", rc,
         errno == EAGAIN ? "EAGAIN" : strerror(errno));

  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, gid_index, &gid) == 0, "ibv_query_gid");
  struct ibv_ah_attr aha = {
      .is_global = 1,
      .port_num = 1,
      .grh = {.dgid = gid, .sgid_index = (uint8_t)gid_index, .hop_limit = 64}};
  struct ibv_ah* ah = ibv_create_ah(pd, &aha);
  CHECK(ah != NULL, "ibv_create_ah");

  for (int round = 0; round < 2; ++round) {
    unsigned char* rx = buf + kGrh + kPayload;
    memset(rx, 0xEE, kGrh + kPayload);
    for (int i = 0; i < kPayload; ++i) buf[i] = (unsigned char)(i + round);
    struct ibv_sge rsge = {.addr = (uintptr_t)rx, .length = kGrh + kPayload, .lkey = mr->lkey};
    struct ibv_recv_wr rwr = {.wr_id = 100 + round, .sg_list = &rsge, .num_sge = 1}, *rbad;
    CHECK(ibv_post_recv(qp, &rwr, &rbad) == 0, "ibv_post_recv");
    struct ibv_sge ssge = {.addr = (uintptr_t)buf, .length = kPayload, .lkey = mr->lkey};
    struct ibv_send_wr swr = {.wr_id = 200 + round,
                              .sg_list = &ssge,
                              .num_sge = 1,
                              .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED,
                              .wr = {.ud = {.ah = ah,
                                            .remote_qpn = qp->qp_num,
                                            .remote_qkey = kQkey}}},
                       *sbad;
    if (round == 0) {
      CHECK(ibv_post_send(qp, &swr, &sbad) == 0, "ibv_post_send");
      /* poll() on the channel fd wakes on the completion; then the event is there. */
      struct pollfd p = {.fd = ch->fd, .events = POLLIN};
      CHECK(poll(&p, 1, 10000) == 1, "poll on the channel fd");
    }
    pthread_t thread;
    struct delayed_send d = {.qp = qp, .wr = &swr, .rc = -1};
    const double start = now_ms();
    if (round == 1) {
      /* Blocking again: ibv_get_cq_event waits for a completion posted 300 ms later. */
      set_nonblock(ch->fd, 0);
      CHECK(pthread_create(&thread, NULL, post_later, &d) == 0, "pthread_create");
    }
    rc = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
    if (round == 1) {
      const double waited = now_ms() - start;
      CHECK(pthread_join(thread, NULL) == 0 && d.rc == 0, "delayed ibv_post_send");
      printf("blocking ibv_get_cq_event waited for the completion: %s\n",
             waited >= 250 ? "yes" : "no");
    }
    printf("round %d ibv_get_cq_event: %d cq %s context %p\n", round, rc,
           ev_cq == cq ? "ok" : "wrong", ev_ctx);
    ibv_ack_cq_events(cq, 1);
    struct ibv_wc wc[2];
    int got = 0;
    for (int tries = 0; got < 2 && tries < 1000000; ++tries) {
      int k = ibv_poll_cq(cq, 2 - got, wc + got);
      CHECK(k >= 0, "ibv_poll_cq");
      got += k;
    }
    CHECK(got == 2, "two completions");
    for (int i = 0; i < 2; ++i) {
      if (wc[i].opcode != IBV_WC_RECV) continue;
      printf("recv wr_id %llu status %d byte_len %u wc_flags 0x%x sl %u src_qp %s\n",
             (unsigned long long)wc[i].wr_id, wc[i].status, wc[i].byte_len, wc[i].wc_flags,
             wc[i].sl, wc[i].src_qp == qp->qp_num ? "self" : "other");
    }
    printf("grh");
    for (int i = 0; i < kGrh; ++i) printf(" %02x", rx[i]);
    printf("\npayload %s\n", memcmp(rx + kGrh, buf, kPayload) == 0 ? "equal" : "differs");
    CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
  }

  /* The channel fd stays non-blocking for the application once set: nothing left -> EAGAIN. */
  set_nonblock(ch->fd, 1);
  errno = 0;
  rc = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
  printf("drained ibv_get_cq_event: %d %s\n", rc, errno == EAGAIN ? "EAGAIN" : strerror(errno));

  /* A signal sent to the process ends a blocking ibv_get_cq_event in another thread with
   * EINTR, as it ends a read of the kernel's channel fd: the library's own threads never take
   * it. The main thread blocks it, so the waiting thread is the only one of the program's that
   * may; one signal, sent once. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* no SA_RESTART */
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
  CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
  set_nonblock(ch->fd, 0);
  struct blocked_get g = {.ch = ch, .rc = 0, .err = 0};
  pthread_t getter;
  CHECK(pthread_create(&getter, NULL, get_blocking, &g) == 0, "pthread_create");
  sigset_t usr1; /* blocked here after the getter started: it must not inherit the block */
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  CHECK(pthread_sigmask(SIG_BLOCK, &usr1, NULL) == 0, "pthread_sigmask");
  usleep(200 * 1000); /* blocked by now; a signal before the wait would be kept pending */
  CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  if (pthread_timedjoin_np(getter, NULL, &until) != 0) {
    printf("signal ends a blocking ibv_get_cq_event: no, still blocked after 10 s\n");
    fflush(stdout);
    _exit(1);
  }
  printf("signal ends a blocking ibv_get_cq_event: %d %s\n", g.rc,
         g.err == EINTR ? "EINTR" : strerror(g.err));
  set_nonblock(ch->fd, 1);

  CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
  CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
  CHECK(ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
  CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
  CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
  CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
  CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
  ibv_free_device_list(list);
  printf("done\n");
  return 0;
}
