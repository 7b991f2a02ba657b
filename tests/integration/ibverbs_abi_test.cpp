// libibverbs.so.1 drop-in, called in-process: the library is dlopen()ed from build/lib (its
// internals are all local, so it cannot clash with this binary's static uroce libraries) and
// driven through verbs.h, the inline verbs included. Checks the context layout the inline
// verbs rely on, exact errno values for what uroce does not support, and that the pure
// helpers print exactly what Debian's rdma-core libibverbs prints (loaded side by side
// with dlmopen into its own namespace).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <string>

#include "ibverbs_test_util.hpp"

namespace uroce::ibtest {
namespace {

constexpr const char* kDebianLib = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

class IbverbsAbi : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("UROCE_PORT", std::to_string(test::reserve_port()).c_str(), 1);
    setenv("UROCE_NETDEVS", "lo", 1);
    setenv("UROCE_QUIET", "1", 1);
    lib_ = dlopen((lib_dir() + "/libibverbs.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    auto get_list = sym<decltype(&ibv_get_device_list)>(lib_, "ibv_get_device_list");
    free_list_ = sym<decltype(&ibv_free_device_list)>(lib_, "ibv_free_device_list");
    auto open = sym<decltype(&ibv_open_device)>(lib_, "ibv_open_device");
    close_ = sym<decltype(&ibv_close_device)>(lib_, "ibv_close_device");
    alloc_pd_ = sym<decltype(&ibv_alloc_pd)>(lib_, "ibv_alloc_pd");
    dealloc_pd_ = sym<decltype(&ibv_dealloc_pd)>(lib_, "ibv_dealloc_pd");
    create_cq_ = sym<decltype(&ibv_create_cq)>(lib_, "ibv_create_cq");
    destroy_cq_ = sym<decltype(&ibv_destroy_cq)>(lib_, "ibv_destroy_cq");
    int n = 0;
    list_ = get_list(&n);
    ASSERT_EQ(n, 1);
    ASSERT_STREQ(list_[0]->name, "uroce_lo");  // UROCE_NETDEVS=lo
    ctx_ = open(list_[0]);
    ASSERT_NE(ctx_, nullptr) << strerror(errno);
    pd_ = alloc_pd_(ctx_);
    ASSERT_NE(pd_, nullptr);
    cq_ = create_cq_(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
  }
  void TearDown() override {
    if (cq_ != nullptr) {
      EXPECT_EQ(destroy_cq_(cq_), 0);
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(dealloc_pd_(pd_), 0);
    }
    if (ctx_ != nullptr) {
      EXPECT_EQ(close_(ctx_), 0);
    }
    if (list_ != nullptr) free_list_(list_);
    if (lib_ != nullptr) dlclose(lib_);
  }

  void* lib_ = nullptr;
  ibv_device** list_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  decltype(&ibv_free_device_list) free_list_ = nullptr;
  decltype(&ibv_close_device) close_ = nullptr;
  decltype(&ibv_alloc_pd) alloc_pd_ = nullptr;
  decltype(&ibv_dealloc_pd) dealloc_pd_ = nullptr;
  decltype(&ibv_create_cq) create_cq_ = nullptr;
  decltype(&ibv_destroy_cq) destroy_cq_ = nullptr;
};

TEST_F(IbverbsAbi, ContextIsAnExtendedVerbsContext) {
  verbs_context* v = verbs_get_ctx(ctx_);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->sz, sizeof(verbs_context));
  EXPECT_NE(verbs_get_ctx_op(ctx_, query_port), nullptr);
  EXPECT_NE(verbs_get_ctx_op(ctx_, query_device_ex), nullptr);
  EXPECT_NE(verbs_get_ctx_op(ctx_, create_cq_ex), nullptr);
  EXPECT_EQ(verbs_get_ctx_op(ctx_, open_xrcd), nullptr);
  EXPECT_GE(ctx_->async_fd, 0);
  EXPECT_EQ(ctx_->num_comp_vectors, 1);

  ibv_port_attr port{};
  ASSERT_EQ(v->query_port(ctx_, 1, &port, sizeof port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(port.active_mtu, IBV_MTU_4096);  // lo: MTU 65536
  EXPECT_EQ(port.gid_tbl_len, 2);
  EXPECT_EQ(v->query_port(ctx_, 2, &port, sizeof port), EINVAL);  // UROCE_NETDEVS=lo

  ibv_device_attr_ex attr{};
  ASSERT_EQ(v->query_device_ex(ctx_, nullptr, &attr, sizeof attr), 0);
  EXPECT_EQ(attr.orig_attr.phys_port_cnt, 1);
  EXPECT_EQ(attr.orig_attr.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_EQ(attr.orig_attr.vendor_id, 0xFFFFFFu);
  EXPECT_EQ(attr.phys_port_cnt_ex, 1u);

  ibv_gid_entry e{};
  auto gid_ex = sym<decltype(&_ibv_query_gid_ex)>(lib_, "_ibv_query_gid_ex");
  ASSERT_EQ(gid_ex(ctx_, 1, 1, &e, 0, sizeof e), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(e.gid.raw[10], 0xFF);
  EXPECT_EQ(e.gid.raw[12], 127);
  EXPECT_EQ(e.gid.raw[15], 1);
  EXPECT_EQ(gid_ex(ctx_, 1, 7, &e, 0, sizeof e), EINVAL);
  ibv_gid_entry table[8];
  auto gid_table = sym<decltype(&_ibv_query_gid_table)>(lib_, "_ibv_query_gid_table");
  EXPECT_EQ(gid_table(ctx_, table, 8, 0, sizeof table[0]), 2);
  EXPECT_EQ(gid_table(ctx_, table, 1, 0, sizeof table[0]), -EINVAL);
}

// On-demand MRs (explicit: mapped memory), ibv_advise_mr on them, ibv_rereg_mr keeping the
// keys, ibv_resize_cq: what used to answer EOPNOTSUPP.
TEST_F(IbverbsAbi, OnDemandRegistrationAdviceReregAndResize) {
  ibv_device_attr_ex attr{};
  // Through the op (the inline ibv_query_device_ex would link against ibv_query_device).
  ASSERT_EQ(verbs_get_ctx(ctx_)->query_device_ex(ctx_, nullptr, &attr, sizeof attr), 0);
  EXPECT_EQ(attr.odp_caps.general_caps, static_cast<uint64_t>(IBV_ODP_SUPPORT));
  EXPECT_EQ(attr.odp_caps.per_transport_caps.rc_odp_caps,
            static_cast<uint32_t>(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                  IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                  IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV));
  auto reg_mr = sym<decltype(&(ibv_reg_mr))>(lib_, "ibv_reg_mr");
  auto dereg_mr = sym<decltype(&ibv_dereg_mr)>(lib_, "ibv_dereg_mr");
  static char buf[8192];
  ibv_mr* odp = reg_mr(pd_, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(odp, nullptr);
  ibv_sge in{reinterpret_cast<uintptr_t>(buf) + 100, 200, odp->lkey};
  EXPECT_EQ(
      ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &in, 1), 0);
  ibv_sge beyond{reinterpret_cast<uintptr_t>(buf) + 4000, 200, odp->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &beyond, 1), EINVAL);
  ibv_mr* pinned_like = reg_mr(pd_, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(pinned_like, nullptr);
  ibv_sge not_odp{reinterpret_cast<uintptr_t>(buf), 8, pinned_like->lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &not_odp, 1), EINVAL);

  // Rereg: new translation and access, the same keys.
  auto rereg = sym<decltype(&ibv_rereg_mr)>(lib_, "ibv_rereg_mr");
  const uint32_t lkey = odp->lkey, rkey = odp->rkey;
  EXPECT_EQ(rereg(odp, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, nullptr,
                  buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(odp->addr, buf + 4096);
  EXPECT_EQ(odp->length, 4096u);
  EXPECT_EQ(odp->lkey, lkey);
  EXPECT_EQ(odp->rkey, rkey);
  // The MR is no longer on demand: advice is refused. Bad flags change nothing.
  ibv_sge moved{reinterpret_cast<uintptr_t>(buf) + 4096, 8, lkey};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &moved, 1), EINVAL);
  errno = 0;
  EXPECT_EQ(rereg(odp, 0x80, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rereg(odp, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE),
            IBV_REREG_MR_ERR_CMD);  // remote write without local write
  EXPECT_EQ(odp->addr, buf + 4096);
  EXPECT_EQ(dereg_mr(odp), 0);
  EXPECT_EQ(dereg_mr(pinned_like), 0);

  auto resize = sym<decltype(&ibv_resize_cq)>(lib_, "ibv_resize_cq");
  EXPECT_EQ(resize(cq_, 64), 0);
  EXPECT_EQ(cq_->cqe, 64);
  EXPECT_EQ(resize(cq_, 0), EINVAL);
}

// Completion timestamps: a receive flushed by the move to ERR is stamped with the device
// clock (CLOCK_MONOTONIC ns, hca_core_clock 1 GHz) at that moment; the wall-clock reading is
// the same instant in CLOCK_REALTIME; ibv_query_rt_values_ex reads the same clock.
TEST_F(IbverbsAbi, CompletionTimestampsAreTheDeviceClockInNanoseconds) {
  const auto mono_ns = [] {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
  };
  ibv_device_attr_ex attr{};
  ASSERT_EQ(verbs_get_ctx(ctx_)->query_device_ex(ctx_, nullptr, &attr, sizeof attr), 0);
  EXPECT_EQ(attr.hca_core_clock, 1'000'000u);  // kHz
  EXPECT_EQ(attr.completion_timestamp_mask, ~uint64_t{0});

  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 8;
  cq_attr.wc_flags = static_cast<uint64_t>(IBV_WC_STANDARD_FLAGS) |
                     static_cast<uint64_t>(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) |
                     static_cast<uint64_t>(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx_, &cq_attr);
  ASSERT_NE(cqx, nullptr) << strerror(errno);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  auto create_qp = sym<decltype(&ibv_create_qp)>(lib_, "ibv_create_qp");
  auto modify = sym<decltype(&ibv_modify_qp)>(lib_, "ibv_modify_qp");
  ibv_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.cap = {4, 4, 1, 1, 0};
  qa.qp_type = IBV_QPT_RC;
  ibv_qp* qp = create_qp(pd_, &qa);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  ASSERT_EQ(modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(qp, &rwr, &bad), 0);
  const uint64_t before = mono_ns();
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(modify(qp, &a, IBV_QP_STATE), 0);
  const uint64_t after = mono_ns();

  ibv_poll_cq_attr pa{};
  ASSERT_EQ(ibv_start_poll(cqx, &pa), 0);
  EXPECT_EQ(cqx->wr_id, 77u);
  EXPECT_EQ(cqx->status, IBV_WC_WR_FLUSH_ERR);
  const uint64_t ts = ibv_wc_read_completion_ts(cqx);
  EXPECT_GE(ts, before);
  EXPECT_LE(ts, after);
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  const uint64_t real_now =
      static_cast<uint64_t>(real.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(real.tv_nsec);
  const uint64_t wall = ibv_wc_read_completion_wallclock_ns(cqx);
  EXPECT_LE(wall, real_now);
  EXPECT_LT(real_now - wall, 1'000'000'000u) << "the completion was made well within a second";
  ibv_end_poll(cqx);

  ibv_values_ex values{};
  values.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &values), 0);
  EXPECT_EQ(values.comp_mask, static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK));
  const uint64_t raw = static_cast<uint64_t>(values.raw_clock.tv_sec) * 1'000'000'000u +
                       static_cast<uint64_t>(values.raw_clock.tv_nsec);
  EXPECT_GE(raw, after);
  EXPECT_LE(raw, mono_ns());

  EXPECT_EQ(sym<decltype(&ibv_destroy_qp)>(lib_, "ibv_destroy_qp")(qp), 0);
  EXPECT_EQ(destroy_cq_(cq), 0);
}

TEST_F(IbverbsAbi, UnsupportedVerbsFailWithTheirErrno) {
  // Memory windows exist (ibverbs_wr_test binds and uses them); a type beyond 2 is refused.
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_mw* mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(mw->type, IBV_MW_TYPE_2);
  EXPECT_EQ(mw->pd, pd_);
  EXPECT_EQ(dealloc_pd_(pd_), EBUSY);  // the window holds its PD
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  // Inline verbs whose op is absent: rdma-core's own answer for any such provider.
  ibv_xrcd_init_attr xattr{};
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &xattr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  // Exported verbs.
  auto reg_mr = sym<decltype(&(ibv_reg_mr))>(lib_, "ibv_reg_mr");
  static char buf[4096];
  // Implicit on-demand paging (the whole address space) is not offered; explicit is (below).
  errno = 0;
  EXPECT_EQ(reg_mr(pd_, nullptr, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), nullptr);
  EXPECT_EQ(errno, EFAULT);
  auto reg_iova2 = sym<decltype(&ibv_reg_mr_iova2)>(lib_, "ibv_reg_mr_iova2");
  errno = 0;
  EXPECT_EQ(reg_iova2(pd_, buf, sizeof buf, 0x1000, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_mr* mr = reg_iova2(pd_, buf, sizeof buf, reinterpret_cast<uintptr_t>(buf),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  ASSERT_NE(mr, nullptr);  // relaxed ordering is an optional hint
  EXPECT_EQ(mr->addr, buf);
  EXPECT_EQ(sym<decltype(&ibv_dereg_mr)>(lib_, "ibv_dereg_mr")(mr), 0);

  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 8;
  cq_attr.wc_flags =
      static_cast<uint64_t>(IBV_WC_STANDARD_FLAGS) | static_cast<uint64_t>(IBV_WC_EX_WITH_CVLAN);
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &cq_attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  auto create_qp = sym<decltype(&ibv_create_qp)>(lib_, "ibv_create_qp");
  ibv_qp_init_attr qa{};
  qa.send_cq = cq_;
  qa.recv_cq = cq_;
  qa.cap = {4, 4, 1, 1, 0};
  qa.qp_type = IBV_QPT_RAW_PACKET;
  errno = 0;
  EXPECT_EQ(create_qp(pd_, &qa), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  qa.qp_type = IBV_QPT_RC;
  ibv_qp* qp = create_qp(pd_, &qa);
  ASSERT_NE(qp, nullptr);
  EXPECT_GE(qa.cap.max_send_wr, 4u);  // written back: what was granted
  auto attach = sym<decltype(&ibv_attach_mcast)>(lib_, "ibv_attach_mcast");
  ibv_gid g{};
  EXPECT_EQ(attach(qp, &g, 0), EOPNOTSUPP);
  EXPECT_EQ(sym<decltype(&ibv_qp_to_qp_ex)>(lib_, "ibv_qp_to_qp_ex")(qp), nullptr);

  // RoCE needs a GRH: an AV without one is refused as by the kernel (UROCE_PEER unset).
  auto modify = sym<decltype(&ibv_modify_qp)>(lib_, "ibv_modify_qp");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
  EXPECT_EQ(qp->state, IBV_QPS_INIT);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = 0x11;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 0;
  const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  EXPECT_EQ(modify(qp, &a, rtr_mask), EINVAL);
  EXPECT_EQ(qp->state, IBV_QPS_INIT);
  EXPECT_EQ(sym<decltype(&ibv_destroy_qp)>(lib_, "ibv_destroy_qp")(qp), 0);
}

TEST_F(IbverbsAbi, HelperStringsEqualRdmaCores) {
  if (access(kDebianLib, R_OK) != 0) GTEST_SKIP() << "Debian's libibverbs1 not installed";
  void* debian = dlmopen(LM_ID_NEWLM, kDebianLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(debian, nullptr) << dlerror();
  for (int s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE + 1; ++s) {
    const auto st = static_cast<ibv_wc_status>(s);
    EXPECT_STREQ(sym<decltype(&ibv_wc_status_str)>(lib_, "ibv_wc_status_str")(st),
                 sym<decltype(&ibv_wc_status_str)>(debian, "ibv_wc_status_str")(st))
        << s;
  }
  for (int e = IBV_EVENT_CQ_ERR; e <= IBV_EVENT_WQ_FATAL + 1; ++e) {
    const auto ev = static_cast<ibv_event_type>(e);
    EXPECT_STREQ(sym<decltype(&ibv_event_type_str)>(lib_, "ibv_event_type_str")(ev),
                 sym<decltype(&ibv_event_type_str)>(debian, "ibv_event_type_str")(ev))
        << e;
  }
  for (int p = IBV_PORT_NOP; p <= IBV_PORT_ACTIVE_DEFER + 1; ++p) {
    const auto ps = static_cast<ibv_port_state>(p);
    EXPECT_STREQ(sym<decltype(&ibv_port_state_str)>(lib_, "ibv_port_state_str")(ps),
                 sym<decltype(&ibv_port_state_str)>(debian, "ibv_port_state_str")(ps))
        << p;
  }
  for (int n = IBV_NODE_UNKNOWN; n <= IBV_NODE_UNSPECIFIED + 1; ++n) {
    const auto nt = static_cast<ibv_node_type>(n);
    EXPECT_STREQ(sym<decltype(&ibv_node_type_str)>(lib_, "ibv_node_type_str")(nt),
                 sym<decltype(&ibv_node_type_str)>(debian, "ibv_node_type_str")(nt))
        << n;
  }
  for (int r = IBV_RATE_MAX; r <= IBV_RATE_800_GBPS + 2; ++r) {
    const auto rate = static_cast<ibv_rate>(r);
    EXPECT_EQ(sym<decltype(&ibv_rate_to_mbps)>(lib_, "ibv_rate_to_mbps")(rate),
              sym<decltype(&ibv_rate_to_mbps)>(debian, "ibv_rate_to_mbps")(rate))
        << r;
    EXPECT_EQ(sym<decltype(&ibv_rate_to_mult)>(lib_, "ibv_rate_to_mult")(rate),
              sym<decltype(&ibv_rate_to_mult)>(debian, "ibv_rate_to_mult")(rate))
        << r;
  }
  for (int m :
       {0, 1, 2, 4, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 80, 120, 160, 240, 320, 480, 3}) {
    EXPECT_EQ(sym<decltype(&mult_to_ibv_rate)>(lib_, "mult_to_ibv_rate")(m),
              sym<decltype(&mult_to_ibv_rate)>(debian, "mult_to_ibv_rate")(m))
        << m;
  }
  for (int mbps : {2500, 5000, 10000, 14062, 25781, 28125, 53125, 103125, 1275000, 100}) {
    EXPECT_EQ(sym<decltype(&mbps_to_ibv_rate)>(lib_, "mbps_to_ibv_rate")(mbps),
              sym<decltype(&mbps_to_ibv_rate)>(debian, "mbps_to_ibv_rate")(mbps))
        << mbps;
  }
  dlclose(debian);
}

}  // namespace
}  // namespace uroce::ibtest
