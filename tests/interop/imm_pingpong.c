/* imm_pingpong: RC ping-pong with SEND with Immediate or RDMA WRITE with Immediate, both
 * directions, every message checked (opcode, IBV_WC_WITH_IMM, immediate value, byte_len and
 * every payload byte). perftest 4.5 (Debian 12) has no write-with-immediate test, so the
 * interop matrix builds this against libibverbs and runs it on both sides: in the guest over
 * rxe, on the host over uroce's libibverbs.so.1.
 *
 * --op mw instead exercises a memory window across the two stacks: the server binds a type 2
 * window over its buffer (whose MR has no remote rights of its own), the client RDMA WRITEs
 * through the window's R_Key, then invalidates it with a SEND with Invalidate; the server's
 * receive must say IBV_WC_WITH_INV with that key and its buffer must hold the last write; a
 * further WRITE through the key must fail with IBV_WC_REM_ACCESS_ERR.
 *
 *   imm_pingpong --dev D --op send|write|mw --port P [--iters N] [--size S] [--mtu M] [SERVER]
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct dest {
  uint32_t qpn, psn, rkey, pad;
  uint64_t addr;
  uint8_t gid[16];
};

static void die(const char *what) {
  fprintf(stderr, "imm_pingpong: %s\n", what);
  exit(1);
}

static uint8_t pattern(int iter, int from_client, size_t j) {
  return (uint8_t)(iter * 7 + (int)j * 13 + (from_client ? 0x5a : 0xa5));
}

static int tcp_exchange(const char *server, int port, const struct dest *mine, struct dest *theirs) {
  int fd;
  if (server) {
    struct addrinfo hints = {0}, *res;
    char service[16];
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(server, service, &hints, &res) != 0) die("getaddrinfo");
    fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) die("connect");
    freeaddrinfo(res);
  } else {
    int one = 1;
    struct sockaddr_in sa = {0};
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 1) != 0) die("listen");
    fd = accept(lfd, NULL, NULL);
    close(lfd);
    if (fd < 0) die("accept");
  }
  if (write(fd, mine, sizeof *mine) != (ssize_t)sizeof *mine) die("write dest");
  if (recv(fd, theirs, sizeof *theirs, MSG_WAITALL) != (ssize_t)sizeof *theirs) die("read dest");
  return fd;
}

static struct ibv_wc wait_wc(struct ibv_cq *cq) {
  struct ibv_wc wc;
  int n;
  while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
  }
  if (n < 0) die("poll_cq");
  return wc;
}

static void tcp_byte(int fd, char c) {
  if (write(fd, &c, 1) != 1 || recv(fd, &c, 1, MSG_WAITALL) != 1) die("tcp sync");
}

/* --op mw, after both QPs reached RTS (see the header comment). */
static int run_mw(int is_client, int rxe, int fd, struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_cq *cq,
                  struct ibv_mr *rmr, uint8_t *rbuf, struct ibv_mr *smr, uint8_t *sbuf, size_t size,
                  int iters) {
  struct dest window = {0};
  if (!is_client) {
    struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    if (!mw) die("ibv_alloc_mw");
    struct ibv_send_wr bind = {.wr_id = 3, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
    bind.bind_mw.mw = mw;
    bind.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    bind.bind_mw.bind_info.mr = rmr;
    bind.bind_mw.bind_info.addr = (uintptr_t)rbuf;
    bind.bind_mw.bind_info.length = size;
    bind.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (ibv_post_send(qp, &bind, &bad)) die("post BIND_MW");
    struct ibv_wc wc = wait_wc(cq);
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW) {
      fprintf(stderr, "imm_pingpong: bind: status %s opcode %d\n", ibv_wc_status_str(wc.status), (int)wc.opcode);
      return 1;
    }
    window.rkey = bind.bind_mw.rkey;
    window.addr = (uintptr_t)rbuf;
    if (write(fd, &window, sizeof window) != (ssize_t)sizeof window) die("send window");
    wc = wait_wc(cq); /* the client's SEND with Invalidate */
    /* rxe (Linux 6.1) copies the kernel's IB_WC_WITH_INVALIDATE (1 << 2) into the user CQE,
     * where 1 << 2 means IBV_WC_IP_CSUM_OK; libibverbs' IBV_WC_WITH_INV is 1 << 3. Accept
     * rxe's bit on rxe only. */
    const unsigned inv_flag = IBV_WC_WITH_INV | (rxe ? IBV_WC_IP_CSUM_OK : 0);
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || !(wc.wc_flags & inv_flag) ||
        wc.invalidated_rkey != window.rkey) {
      fprintf(stderr, "imm_pingpong: receive: status %s opcode %d flags 0x%x invalidated 0x%x (want 0x%x)\n",
              ibv_wc_status_str(wc.status), (int)wc.opcode, (unsigned)wc.wc_flags, wc.invalidated_rkey, window.rkey);
      return 1;
    }
    for (size_t j = 0; j < size; ++j)
      if (rbuf[j] != pattern(iters - 1, 1, j)) {
        fprintf(stderr, "imm_pingpong: window byte %zu is 0x%02x, want 0x%02x\n", j, rbuf[j], pattern(iters - 1, 1, j));
        return 1;
      }
    tcp_byte(fd, 'i'); /* invalidated: the client tries once more */
    tcp_byte(fd, 'd');
    printf("imm_pingpong: ok %d RDMA WRITEs of %zu bytes through a type 2 window, invalidated by SEND with "
           "Invalidate (rkey 0x%x)\n", iters, size, window.rkey);
    return 0;
  }
  if (recv(fd, &window, sizeof window, MSG_WAITALL) != (ssize_t)sizeof window) die("read window");
  struct ibv_sge sge = {.addr = (uintptr_t)sbuf, .length = (uint32_t)size, .lkey = smr->lkey};
  struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED}, *bad;
  wr.wr.rdma.remote_addr = window.addr;
  wr.wr.rdma.rkey = window.rkey;
  for (int it = 0; it < iters; ++it) {
    for (size_t j = 0; j < size; ++j) sbuf[j] = pattern(it, 1, j);
    if (ibv_post_send(qp, &wr, &bad)) die("post WRITE");
    struct ibv_wc wc = wait_wc(cq);
    if (wc.status != IBV_WC_SUCCESS) {
      fprintf(stderr, "imm_pingpong: write %d through the window: %s\n", it, ibv_wc_status_str(wc.status));
      return 1;
    }
  }
  struct ibv_send_wr inv = {.wr_id = 4, .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
                            .invalidate_rkey = window.rkey};
  if (ibv_post_send(qp, &inv, &bad)) die("post SEND_WITH_INV");
  struct ibv_wc wc = wait_wc(cq);
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "imm_pingpong: SEND with Invalidate: %s\n", ibv_wc_status_str(wc.status));
    return 1;
  }
  tcp_byte(fd, 'w');
  if (ibv_post_send(qp, &wr, &bad)) die("post WRITE after invalidation");
  wc = wait_wc(cq);
  if (wc.status != IBV_WC_REM_ACCESS_ERR) {
    fprintf(stderr, "imm_pingpong: write after invalidation: %s, want remote access error\n",
            ibv_wc_status_str(wc.status));
    return 1;
  }
  tcp_byte(fd, 'd');
  printf("imm_pingpong: ok %d RDMA WRITEs of %zu bytes through a type 2 window, invalidated by SEND with "
         "Invalidate; the next WRITE: %s\n", iters, size, ibv_wc_status_str(wc.status));
  return 0;
}

int main(int argc, char **argv) {
  const char *dev_name = NULL, *server = NULL, *op = "send";
  int port = 18515, iters = 100, mtu = 1024;
  size_t size = 4096;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--dev") && i + 1 < argc) dev_name = argv[++i];
    else if (!strcmp(argv[i], "--op") && i + 1 < argc) op = argv[++i];
    else if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--mtu") && i + 1 < argc) mtu = atoi(argv[++i]);
    else if (argv[i][0] != '-') server = argv[i];
    else die("usage: imm_pingpong --dev D --op send|write|mw --port P [--iters N] [--size S] [--mtu M] [SERVER]");
  }
  const int write_op = !strcmp(op, "write");
  const int mw_op = !strcmp(op, "mw");
  const int is_client = server != NULL;

  int num = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  struct ibv_device *dev = NULL;
  for (int i = 0; i < num; ++i)
    if (!dev_name || !strcmp(ibv_get_device_name(list[i]), dev_name)) dev = list[i];
  if (!dev) die("device not found");
  struct ibv_context *ctx = ibv_open_device(dev);
  if (!ctx) die("ibv_open_device");
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  uint8_t *rbuf = calloc(1, size), *sbuf = calloc(1, size);
  /* --op mw: the receive buffer is reachable only through the window bound over it. */
  struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, size,
                                  IBV_ACCESS_LOCAL_WRITE | (mw_op ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_WRITE));
  struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, size, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  if (!pd || !rmr || !smr || !cq) die("pd/mr/cq");
  struct ibv_qp_init_attr qia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                 .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp *qp = ibv_create_qp(pd, &qia);
  if (!qp) die("ibv_create_qp");
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) die("INIT");

  struct ibv_sge rsge = {.addr = (uintptr_t)rbuf, .length = (uint32_t)size, .lkey = rmr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rsge, .num_sge = write_op ? 0 : 1}, *bad_rwr;
  for (int i = 0; i < 2; ++i)
    if (ibv_post_recv(qp, &rwr, &bad_rwr)) die("post_recv");

  struct dest mine = {.qpn = qp->qp_num, .psn = (uint32_t)(getpid() & 0xffffff), .rkey = rmr->rkey,
                      .addr = (uintptr_t)rbuf}, theirs;
  union ibv_gid gid;
  if (ibv_query_gid(ctx, 1, 1, &gid)) die("ibv_query_gid 1");
  memcpy(mine.gid, gid.raw, 16);
  int fd = tcp_exchange(server, port, &mine, &theirs);

  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu == 4096 ? IBV_MTU_4096 : mtu == 2048 ? IBV_MTU_2048 : IBV_MTU_1024;
  a.dest_qp_num = theirs.qpn;
  a.rq_psn = theirs.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  memcpy(a.ah_attr.grh.dgid.raw, theirs.gid, 16);
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("RTR");
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = mine.psn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS");
  /* Both sides are in RTS before the first message: a one-byte TCP barrier. */
  char sync = 's';
  if (write(fd, &sync, 1) != 1 || recv(fd, &sync, 1, MSG_WAITALL) != 1) die("sync");
  if (mw_op) {
    const int rxe = !strncmp(ibv_get_device_name(dev), "rxe", 3);
    return run_mw(is_client, rxe, fd, pd, qp, cq, rmr, rbuf, smr, sbuf, size, iters);
  }

  struct ibv_wc early_recv;
  int have_recv = 0;
  for (int it = 0; it < iters; ++it) {
    for (int turn = 0; turn < 2; ++turn) {
      const int sending = (turn == 0) == is_client;
      const int from_client = turn == 0;
      const uint32_t imm = (uint32_t)(0x10000 * (from_client ? 1 : 2) + it);
      if (sending) {
        for (size_t j = 0; j < size; ++j) sbuf[j] = pattern(it, from_client, j);
        struct ibv_sge sge = {.addr = (uintptr_t)sbuf, .length = (uint32_t)size, .lkey = smr->lkey};
        struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
                                 .opcode = write_op ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND_WITH_IMM,
                                 .imm_data = htonl(imm)},
                           *bad;
        wr.wr.rdma.remote_addr = theirs.addr;
        wr.wr.rdma.rkey = theirs.rkey;
        if (ibv_post_send(qp, &wr, &bad)) die("post_send");
      }
      /* The peer's answer can complete before our own send does (its ACK may come after the
       * answer): a receive completion seen while waiting for the send one is kept for the
       * next turn. */
      struct ibv_wc wc;
      for (;;) {
        if (!sending && have_recv) {
          wc = early_recv;
          have_recv = 0;
          break;
        }
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0) die("poll_cq");
        if (n == 0) continue;
        if (wc.status != IBV_WC_SUCCESS) {
          fprintf(stderr, "imm_pingpong: iter %d wr_id %d status %s\n", it, (int)wc.wr_id,
                  ibv_wc_status_str(wc.status));
          return 1;
        }
        if (sending && wc.wr_id == 2 && !have_recv) {
          early_recv = wc;
          have_recv = 1;
          continue;
        }
        if ((wc.wr_id == 1) != sending) die("unexpected completion");
        break;
      }
      if (sending) continue;
      const enum ibv_wc_opcode want = write_op ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
      if (wc.wr_id != 2 || wc.opcode != want || !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != imm ||
          wc.byte_len != size) {
        fprintf(stderr, "imm_pingpong: iter %d: opcode %d flags 0x%x imm 0x%x (want 0x%x) byte_len %u (want %zu)\n", it,
                (int)wc.opcode, (unsigned)wc.wc_flags, ntohl(wc.imm_data), imm, wc.byte_len, size);
        return 1;
      }
      for (size_t j = 0; j < size; ++j)
        if (rbuf[j] != pattern(it, from_client, j)) {
          fprintf(stderr, "imm_pingpong: iter %d: byte %zu is 0x%02x, want 0x%02x\n", it, j, rbuf[j],
                  pattern(it, from_client, j));
          return 1;
        }
      if (ibv_post_recv(qp, &rwr, &bad_rwr)) die("post_recv");
    }
  }
  /* Stay until the peer is done too: its last completion may depend on our ACK. */
  if (write(fd, &sync, 1) != 1 || recv(fd, &sync, 1, MSG_WAITALL) != 1) die("final sync");
  printf("imm_pingpong: ok %d iters, %zu bytes, %s with immediate, both directions\n", iters, size,
         write_op ? "RDMA WRITE" : "SEND");
  close(fd);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(rmr);
  ibv_dereg_mr(smr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
