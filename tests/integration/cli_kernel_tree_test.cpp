// The real `uroce` binary against the recorded sysfs trees of tests/data/sysfs
// (UROCE_SYSFS_ROOT): gids, devinfo, stat (text, --json, --metrics) and doctor on a kernel
// rxe / mlx5 device, and the one-line errors for a device or port that does not exist.
// UROCE_STAT_DIR is an empty directory of the test's own, so no uroce process' counters mix
// in and none of other tests' segments are touched.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>

#include "cli_process.hpp"

namespace uroce::test {
namespace {

namespace fs = std::filesystem;

std::string tree(const std::string& name) {
  return std::string(UROCE_SOURCE_DIR) + "/tests/data/sysfs/" + name + "/sys";
}

class KernelDeviceCli : public ::testing::Test {
 protected:
  void SetUp() override {
    stat_dir_ = fs::temp_directory_path() / ("uroce-kdev-cli-" + std::to_string(getpid()));
    fs::create_directories(stat_dir_);
    setenv("UROCE_STAT_DIR", stat_dir_.c_str(), 1);
    setenv("UROCE_QUIET", "1", 1);
    use("rxe");
  }
  void TearDown() override {
    unsetenv("UROCE_SYSFS_ROOT");
    unsetenv("UROCE_STAT_DIR");
    fs::remove_all(stat_dir_);
  }
  static void use(const std::string& name) { setenv("UROCE_SYSFS_ROOT", tree(name).c_str(), 1); }
  struct Result {
    int rc;
    std::string out, err;
  };
  static Result uroce(const std::vector<std::string>& args) {
    Process p(args, next_port());
    const int rc = p.wait(std::chrono::seconds(60));
    return {rc, p.out(), p.err()};
  }
  fs::path stat_dir_;
};

TEST_F(KernelDeviceCli, GidsOfAKernelDevice) {
  const Result r = uroce({"gids", "-d", "rxe0"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4\t\tVER\tDEV\n"
            "---\t----\t-----\t---\t\t\t\t\t------------\t---\t---\n"
            "rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe77:0002\t               \tv2\teth0\n"
            "rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a4d:0002\t10.77.0.2      \tv2\teth0\n"
            "n_gids_found=2\n"
            "rxe0 port 1 (eth0): RoCE v2 over IPv4 is GID index 1 (10.77.0.2): ib_write_bw -d "
            "rxe0 -i 1 -x 1, ibv_rc_pingpong -d rxe0 -i 1 -g 1\n");
  // Without -d: uroce's devices first, then the kernel's, one table.
  const Result all = uroce({"gids"});
  EXPECT_EQ(all.rc, 0) << all.err;
  EXPECT_NE(all.out.find("\nrxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a4d:0002"),
            std::string::npos);
  EXPECT_NE(all.out.find("uroce_"), std::string::npos);
}

TEST_F(KernelDeviceCli, UnknownDeviceOrPortIsOneLine) {
  const Result g = uroce({"gids", "-d", "rxe9"});
  EXPECT_EQ(g.rc, 2);
  EXPECT_TRUE(std::regex_match(
      g.err, std::regex("uroce gids: IB device rxe9 not found; uroce provides [^\n]*; kernel "
                        "RDMA devices: rxe0\n")))
      << g.err;
  const Result d = uroce({"devinfo", "-d", "rxe0", "-i", "3"});
  EXPECT_EQ(d.rc, 2);
  EXPECT_EQ(d.err, "uroce devinfo: rxe0 has 1 port(s); -i 3 does not exist (use -i 1)\n");
  const Result s = uroce({"stat", "-d", "rxe9"});
  EXPECT_EQ(s.rc, 1);
  EXPECT_EQ(s.err,
            "uroce stat: no running uroce process of this network namespace publishes "
            "counters in " +
                stat_dir_.string() +
                ", and no kernel RDMA device is called rxe9 (kernel devices: rxe0)\n");
  const Result doc = uroce({"doctor", "-d", "rxe9"});
  EXPECT_EQ(doc.rc, 2);
  EXPECT_EQ(doc.err, "uroce doctor: no kernel RDMA device rxe9 in " + tree("rxe") +
                         "/class/infiniband (kernel devices: rxe0); leave out -d to check "
                         "uroce's devices only\n");
}

TEST_F(KernelDeviceCli, DevinfoOfTheMlx5Tree) {
  use("mlx5");
  const Result r = uroce({"devinfo", "-d", "mlx5_0"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "hca_id:\tmlx5_0\n"
            "\ttransport:\t\t\tInfiniBand (0)\n"
            "\tfw_ver:\t\t\t\t22.36.1010\n"
            "\tnode_guid:\t\t\tb859:9f03:00d4:2c1e\n"
            "\tsys_image_guid:\t\t\tb859:9f03:00d4:2c1e\n"
            "\thca_type:\t\t\tMT4125\n"
            "\tboard_id:\t\t\tMT_0000000359\n"
            "\tkernel_driver:\t\t\tmlx5_core\n"
            "\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
            "\t\t\tmax_mtu:\t\t4096 (5)\n"
            "\t\t\tactive_mtu:\t\t4096 (5)\n"
            "\t\t\tlink_layer:\t\tEthernet\n"
            "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:ba59:9fff:fed4:2c1e, RoCE v1\n"
            "\t\t\tGID[  1]:\t\tfe80::ba59:9fff:fed4:2c1e, RoCE v2\n"
            "\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:c0a8:0a0b, RoCE v1\n"
            "\t\t\tGID[  3]:\t\t::ffff:192.168.10.11, RoCE v2\n"
            "\n");
  const Result l = uroce({"devinfo", "-l", "-d", "mlx5_0"});
  EXPECT_EQ(l.out, "1 HCA found:\n\tmlx5_0\n\n");
}

TEST_F(KernelDeviceCli, StatTextJsonAndWatch) {
  const Result t = uroce({"stat", "-d", "rxe0"});
  EXPECT_EQ(t.rc, 0) << t.err;
  EXPECT_EQ(t.out,
            "link rxe0/1 kernel (rxe)\n"
            "    sent_pkts 1200 rcvd_pkts 1190 rdma_sends 400 rdma_recvs 398\n"
            "    duplicate_request 3 out_of_seq_request 2 ack_deferred 7 rcvd_seq_err 1\n"
            "    completer_retry_err 4\n");
  const Result j = uroce({"stat", "--json"});
  EXPECT_EQ(j.rc, 0) << j.err;
  const nlohmann::json a = nlohmann::json::parse(j.out);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["device"], "rxe0");
  EXPECT_EQ(a[0]["kernel_driver"], "rxe");
  EXPECT_EQ(a[0]["counters"]["rcvd_pkts"], 1190);
  EXPECT_EQ(a[0]["counters"]["retry_exceeded_err"], 0);
  // Two refreshes of unchanged files: rates 0.
  const Result w = uroce({"stat", "--json", "--watch", "0.1", "--iterations", "2"});
  EXPECT_EQ(w.rc, 0) << w.err;
  const auto rows = nlohmann::json::parse(w.out.substr(w.out.find('\n') + 1));
  EXPECT_EQ(rows[0]["rates"]["sent_pkts"], 0.0);
  // --pid and --qp are about uroce processes: a kernel device has neither.
  EXPECT_EQ(uroce({"stat", "--pid", "1"}).rc, 1);
}

TEST_F(KernelDeviceCli, StatMetricsServesTheKernelCounters) {
  use("mlx5");
  Process server({"stat", "--metrics", "127.0.0.1:0"}, next_port());
  std::smatch m;
  std::string out;
  static const std::regex kPort(R"(serving mlx5_0/1 on port (\d+) )");
  for (int i = 0; i < 200 && !std::regex_search(out, m, kPort); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    out = server.out();
  }
  ASSERT_TRUE(std::regex_search(out, m, kPort)) << out << server.err();
  httplib::Client c("127.0.0.1", std::stoi(m[1]));
  const auto res = c.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("\nuroce_sent_bytes_total{device=\"mlx5_0\"} 10000000\n"),
            std::string::npos)
      << res->body.substr(0, 600);
  EXPECT_NE(res->body.find("\nuroce_np_cnp_sent_total{device=\"mlx5_0\"} 120\n"),
            std::string::npos);
  EXPECT_NE(res->body.find("\nuroce_port_xmit_wait_total{device=\"mlx5_0\"} 15\n"),
            std::string::npos);
  EXPECT_EQ(res->body.find("uroce_qp_port_xmit_wait_total"), std::string::npos);
  kill(server.pid(), SIGTERM);
  EXPECT_EQ(server.wait(std::chrono::seconds(10)), 0);
}

TEST_F(KernelDeviceCli, DoctorChecksTheKernelDevice) {
  const Result r = uroce({"doctor", "-d", "rxe0", "--json"});
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> level;
  for (const auto& c : j) level[c["check"]] = c["level"];
  EXPECT_EQ(level["rxe0/1 state"], "PASS");
  EXPECT_EQ(level["rxe0/1 mtu"], "PASS");
  EXPECT_EQ(level["rxe0/1 gid"], "PASS");
  EXPECT_EQ(level["rxe0/1 rdma_cm"], "PASS");
  EXPECT_EQ(level["rxe0/1 pfc"], "PASS");
  EXPECT_EQ(level["rxe0/1 ecn"], "PASS");
  EXPECT_TRUE(level.contains("kernel_memlock"));
  EXPECT_TRUE(level.contains("firewall"));  // uroce's own checks still run
}

}  // namespace
}  // namespace uroce::test
