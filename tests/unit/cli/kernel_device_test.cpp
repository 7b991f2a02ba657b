// The kernel-device readers and formats (src/kdev, cli/kernel_device_format.hpp,
// cli/doctor_kernel.hpp) on the recorded sysfs trees of tests/data/sysfs (README there):
// exact show_gids rows, ibv_devinfo lines, `uroce stat` text and JSON, and doctor's findings
// with their fixes for problems planted in a copy of a tree.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/doctor_kernel.hpp"
#include "cli/kernel_device_format.hpp"
#include "cli/stat_format.hpp"
#include "kdev/kernel_counters.hpp"
#include "kdev/kernel_device.hpp"

namespace uroce::cli {
namespace {

namespace fs = std::filesystem;

std::string tree(const std::string& name) {
  return std::string(UROCE_SOURCE_DIR) + "/tests/data/sysfs/" + name + "/sys";
}

kdev::KernelDevice device(const std::string& root, const std::string& name) {
  auto d = kdev::read_kernel_device(root, name, false);
  EXPECT_TRUE(d.has_value()) << root << " " << name;
  return d ? *d : kdev::KernelDevice{};
}

// A copy of a recorded tree to plant a problem in.
class PlantedTree {
 public:
  explicit PlantedTree(const std::string& name) {
    dir_ = fs::temp_directory_path() / ("uroce-kdev-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::copy(fs::path(tree(name)).parent_path(), dir_,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  ~PlantedTree() { fs::remove_all(dir_); }
  [[nodiscard]] std::string root() const { return (dir_ / "sys").string(); }
  void write(const std::string& rel, const std::string& text) const {
    std::ofstream(dir_ / "sys" / rel) << text << "\n";
  }
  void remove(const std::string& rel) const { fs::remove_all(dir_ / "sys" / rel); }

 private:
  fs::path dir_;
};

const CheckResult* find(const std::vector<CheckResult>& rs, const std::string& name) {
  for (const CheckResult& r : rs) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

KernelDoctorEnv env_for(const std::string& root, std::optional<std::string> pfc = std::nullopt,
                        const std::string& netdev = "eth0") {
  KernelDoctorEnv env;
  env.root = root;
  env.dcb_pfc[netdev] = std::move(pfc);
  return env;
}

TEST(KernelDevice, ReadsTheRxeTree) {
  const auto all = kdev::read_kernel_devices(tree("rxe"), false);
  ASSERT_EQ(all.size(), 1u);
  const kdev::KernelDevice& d = all[0];
  EXPECT_EQ(d.name, "rxe0");
  EXPECT_EQ(d.driver, "rxe");
  ASSERT_EQ(d.ports.size(), 1u);
  const kdev::KernelPort& p = d.ports[0];
  EXPECT_EQ(p.state, 4);
  EXPECT_EQ(p.state_name, "ACTIVE");
  EXPECT_EQ(p.phys_state, 5);
  EXPECT_EQ(p.active_mtu, 4096u);
  EXPECT_EQ(p.netdev, "eth0");
  ASSERT_EQ(p.gids.size(), 2u);  // the zero entries 2..7 are not GIDs
  EXPECT_EQ(p.gids[1].ipv4, "10.77.0.2");
  EXPECT_EQ(p.hw_counters.size(), 15u);  // lifespan is not a counter
  EXPECT_EQ(kdev::read_netdev(tree("rxe"), "eth0").mtu, 9000u);
  EXPECT_FALSE(kdev::read_kernel_device(tree("rxe"), "rxe1", false).has_value());
  EXPECT_FALSE(kdev::read_kernel_device(tree("rxe"), "../net", false).has_value());
  EXPECT_TRUE(kdev::read_kernel_devices("/nonexistent-uroce-root", false).empty());
}

TEST(KernelDevice, GidRowsOfBothTreesAreShowGidsLines) {
  const auto rxe = kdev::read_kernel_devices(tree("rxe"), false);
  EXPECT_EQ(format_kernel_gid_rows(rxe),
            "rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe77:0002\t               \tv2\teth0\n"
            "rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a4d:0002\t10.77.0.2      \tv2\teth0\n");
  EXPECT_EQ(format_kernel_gid_advice(rxe),
            "rxe0 port 1 (eth0): RoCE v2 over IPv4 is GID index 1 (10.77.0.2): ib_write_bw -d "
            "rxe0 -i 1 -x 1, ibv_rc_pingpong -d rxe0 -i 1 -g 1\n");
  const auto mlx5 = kdev::read_kernel_devices(tree("mlx5"), false);
  EXPECT_EQ(kernel_gid_count(mlx5), 4u);
  EXPECT_EQ(
      format_kernel_gid_rows(mlx5),
      "mlx5_0\t1\t0\tfe80:0000:0000:0000:ba59:9fff:fed4:2c1e\t               \tv1\tens1f0np0\n"
      "mlx5_0\t1\t1\tfe80:0000:0000:0000:ba59:9fff:fed4:2c1e\t               \tv2\tens1f0np0\n"
      "mlx5_0\t1\t2\t0000:0000:0000:0000:0000:ffff:c0a8:0a0b\t192.168.10.11  \tv1\tens1f0np0\n"
      "mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:c0a8:0a0b\t192.168.10.11  \tv2\tens1f0np0\n");
  // Index 3, not 2: 2 is the RoCE v1 entry of the same address.
  EXPECT_EQ(format_kernel_gid_advice(mlx5),
            "mlx5_0 port 1 (ens1f0np0): RoCE v2 over IPv4 is GID index 3 (192.168.10.11): "
            "ib_write_bw -d mlx5_0 -i 1 -x 3, ibv_rc_pingpong -d mlx5_0 -i 1 -g 3\n");
}

TEST(KernelDevice, DevinfoOfTheRxeTree) {
  EXPECT_EQ(format_kernel_devinfo(device(tree("rxe"), "rxe0"), 0, true),
            "hca_id:\trxe0\n"
            "\ttransport:\t\t\tInfiniBand (0)\n"
            "\tnode_guid:\t\t\t5054:00ff:fe77:0002\n"
            "\tsys_image_guid:\t\t\t5054:00ff:fe77:0002\n"
            "\tkernel_driver:\t\t\trxe\n"
            "\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
            "\t\t\tmax_mtu:\t\t4096 (5)\n"
            "\t\t\tactive_mtu:\t\t4096 (5)\n"
            "\t\t\tlink_layer:\t\tEthernet\n"
            "\t\t\tphys_state:\t\tLINK_UP (5)\n"
            "\t\t\trate:\t\t\t2.5 Gb/sec (1X SDR)\n"
            "\t\t\tnetdev:\t\t\teth0\n"
            "\t\t\tGID[  0]:\t\tfe80::5054:ff:fe77:2, RoCE v2\n"
            "\t\t\tGID[  1]:\t\t::ffff:10.77.0.2, RoCE v2\n"
            "\n");
  const std::string mlx5 = format_kernel_devinfo(device(tree("mlx5"), "mlx5_0"), 1, false);
  EXPECT_NE(mlx5.find("\tfw_ver:\t\t\t\t22.36.1010\n\tnode_guid:\t\t\tb859:9f03:00d4:2c1e\n"),
            std::string::npos);
  EXPECT_NE(mlx5.find("\tkernel_driver:\t\t\tmlx5_core\n"), std::string::npos);
  EXPECT_NE(mlx5.find("\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:c0a8:0a0b, RoCE v1\n"
                      "\t\t\tGID[  3]:\t\t::ffff:192.168.10.11, RoCE v2\n"),
            std::string::npos);
  EXPECT_EQ(mlx5.find("phys_state"), std::string::npos);  // -v only
}

TEST(KernelDevice, StatTextAndJsonOfTheRxeTree) {
  const kdev::KernelDevice d = device(tree("rxe"), "rxe0");
  const telemetry::DeviceSnapshot s = kernel_snapshot(d, d.ports[0], 1'000'000'000);
  StatView view;
  EXPECT_EQ(format_stat_text(s, view),
            "link rxe0/1 kernel (rxe)\n"
            "    sent_pkts 1200 rcvd_pkts 1190 rdma_sends 400 rdma_recvs 398\n"
            "    duplicate_request 3 out_of_seq_request 2 ack_deferred 7 rcvd_seq_err 1\n"
            "    completer_retry_err 4\n");
  const nlohmann::json j = stat_json(s, view);
  EXPECT_EQ(j["device"], "rxe0");
  EXPECT_EQ(j["port"], 1);
  EXPECT_EQ(j["pid"], 0);
  EXPECT_EQ(j["kernel_driver"], "rxe");
  EXPECT_EQ(j["counters"].size(), 15u);
  EXPECT_EQ(j["counters"]["sent_pkts"], 1200);
  EXPECT_EQ(j["counters"]["link_downed"], 0);
  EXPECT_EQ(j["counters"]["ack_deferred"], 7);
  EXPECT_TRUE(j["qps"].empty());

  // --watch: rates from the previous read, 0.5 s before.
  telemetry::DeviceSnapshot before = s;
  before.published_unix_ns = 500'000'000;
  before.values[0] = 1100;  // sent_pkts
  view.previous = &before;
  view.interval_s = 0.5;
  EXPECT_NE(format_stat_text(s, view).find(
                "    sent_pkts 1200 (+200/s) rcvd_pkts 1190 rdma_sends 400 rdma_recvs 398\n"),
            std::string::npos);
  EXPECT_EQ(stat_json(s, view)["rates"]["sent_pkts"], 200.0);
  EXPECT_EQ(stat_json(s, view)["rates"]["rcvd_pkts"], 0.0);
}

TEST(KernelDevice, Mlx5CountersMapToUroceNames) {
  const kdev::KernelDevice d = device(tree("mlx5"), "mlx5_0");
  const telemetry::DeviceSnapshot s = kernel_snapshot(d, d.ports[0], 1);
  EXPECT_EQ(s.value("bytes_sent"), 10'000'000u);  // port_xmit_data 2500000 words of 4 bytes
  EXPECT_EQ(s.value("bytes_rcvd"), 9'600'000u);
  EXPECT_EQ(s.value("sent_pkts"), 10'000u);  // port_xmit_packets: mlx5 has no sent_pkts
  EXPECT_EQ(s.value("rcvd_pkts"), 9'800u);
  EXPECT_EQ(s.value("out_of_sequence"), 9u);
  EXPECT_EQ(s.value("np_cnp_sent"), 120u);
  EXPECT_EQ(s.value("rp_cnp_handled"), 118u);
  EXPECT_EQ(s.value("port_xmit_wait"), 15u);         // no uroce meaning: its own name
  EXPECT_EQ(s.value("roce_slow_restart_cnps"), 0u);  // mlx5-only, kept
  EXPECT_EQ(std::count(s.names.begin(), s.names.end(), "port_xmit_data"), 0);
  // uroce's order first: sent_pkts is uroce's first counter.
  EXPECT_EQ(s.names.front(), "sent_pkts");
  EXPECT_EQ(s.names.back(), "symbol_error");
}

TEST(KernelDoctor, HealthyTreesPass) {
  for (const auto& [name, dev, netdev] :
       {std::tuple{"rxe", "rxe0", "eth0"}, std::tuple{"mlx5", "mlx5_0", "ens1f0np0"}}) {
    const std::string pfc = std::string(name) == "mlx5"
                                ? "pfc-cap 8 macsec-bypass off delay 0 \nprio-pfc 0:off 1:off "
                                  "2:off 3:on 4:off 5:off 6:off 7:off\n"
                                : "";
    const auto rs = check_kernel_device(
        device(tree(name), dev),
        env_for(tree(name), pfc.empty() ? std::nullopt : std::optional(pfc), netdev));
    ASSERT_EQ(rs.size(), 6u) << name;
    for (const CheckResult& r : rs) EXPECT_EQ(r.level, CheckLevel::kPass) << format_check(r);
  }
  const auto rxe = check_kernel_device(device(tree("rxe"), "rxe0"), env_for(tree("rxe")));
  EXPECT_EQ(find(rxe, "rxe0/1 gid")->detail,
            "RoCE v2 over IPv4 on eth0 is GID index 1 (10.77.0.2): ib_write_bw -d rxe0 -i 1 -x 1, "
            "ibv_rc_pingpong -d rxe0 -i 1 -g 1");
  EXPECT_NE(find(rxe, "rxe0/1 ecn")->detail.find("rxe has no ECN reaction"), std::string::npos);
  EXPECT_NE(find(rxe, "rxe0/1 pfc")->detail.find("eth0 shows no DCB"), std::string::npos);
}

TEST(KernelDoctor, PortDownFailsWithTheCommandThatBringsItUp) {
  PlantedTree t("rxe");
  t.write("class/infiniband/rxe0/ports/1/state", "1: DOWN");
  t.write("class/infiniband/rxe0/ports/1/phys_state", "3: Disabled");
  t.write("class/net/eth0/operstate", "down");
  const auto rs = check_kernel_device(device(t.root(), "rxe0"), env_for(t.root()));
  const CheckResult* r = find(rs, "rxe0/1 state");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->level, CheckLevel::kFail);
  EXPECT_EQ(r->detail,
            "DOWN (1), phys_state Disabled (3); netdev eth0 down: rxe's port follows its netdev");
  EXPECT_EQ(r->fix, "ip link set dev eth0 up");
}

TEST(KernelDoctor, ActiveMtuBelowTheNetdevMtuWarns) {
  PlantedTree t("mlx5");
  t.write("class/infiniband/mlx5_0/ports/1/active_mtu", "1024");
  const auto rs =
      check_kernel_device(device(t.root(), "mlx5_0"), env_for(t.root(), std::nullopt, "ens1f0np0"));
  const CheckResult* r = find(rs, "mlx5_0/1 mtu");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->level, CheckLevel::kWarn);
  EXPECT_EQ(r->detail,
            "active_mtu 1024 (max_mtu 4096); ens1f0np0 MTU 9000 carries RoCE payloads of 4096: "
            "RoCE uses 1024-byte packets where the link takes 4096 (perftest and ibv_rc_pingpong "
            "use active_mtu)");
  EXPECT_EQ(r->fix,
            "ip link set dev ens1f0np0 mtu 9000 (the driver sets the port MTU from the netdev's; "
            "on ConnectX check the port MTU with mlxlink -d mlx5_0 --show_mtu)");
}

TEST(KernelDoctor, ActiveMtuAboveTheNetdevMtuFails) {
  PlantedTree t("rxe");
  t.write("class/net/eth0/mtu", "1500");
  const CheckResult* r = nullptr;
  const auto rs = check_kernel_device(device(t.root(), "rxe0"), env_for(t.root()));
  r = find(rs, "rxe0/1 mtu");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->level, CheckLevel::kFail);
  EXPECT_EQ(r->fix, "ip link set dev eth0 mtu 4176 (and every switch port on the path)");
}

TEST(KernelDoctor, NoRoceV2GidOnTheNetdevFails) {
  PlantedTree t("mlx5");
  t.write("class/infiniband/mlx5_0/ports/1/gid_attrs/types/1", "IB/RoCE v1");
  t.write("class/infiniband/mlx5_0/ports/1/gid_attrs/types/3", "IB/RoCE v1");
  const kdev::KernelDevice d = device(t.root(), "mlx5_0");
  const auto rs = check_kernel_device(d, env_for(t.root(), std::nullopt, "ens1f0np0"));
  const CheckResult* r = find(rs, "mlx5_0/1 gid");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->level, CheckLevel::kFail);
  EXPECT_EQ(r->detail,
            "ens1f0np0's IPv4 address 192.168.10.11 has only a IB/RoCE v1 GID (index 2): RoCE v2 "
            "peers (rxe, uroce, most fabrics) do not answer RoCE v1");
  EXPECT_NE(r->fix.find("mlxconfig -d mlx5_0 query"), std::string::npos);
  EXPECT_EQ(format_kernel_gid_advice(std::vector{d}),
            "mlx5_0 port 1 (ens1f0np0): no RoCE v2 GID with an IPv4 address: ip addr add "
            "ADDR/PREFIX dev ens1f0np0 (the kernel adds a RoCE v2 GID for every address of the "
            "netdev)\n");

  PlantedTree no_ipv4("rxe");
  no_ipv4.remove("class/infiniband/rxe0/ports/1/gids/1");
  const auto rs2 = check_kernel_device(device(no_ipv4.root(), "rxe0"), env_for(no_ipv4.root()));
  EXPECT_EQ(find(rs2, "rxe0/1 gid")->fix,
            "ip addr add ADDR/PREFIX dev eth0 (the kernel adds a RoCE v2 GID for every address of "
            "the netdev)");
}

TEST(KernelDoctor, RdmaCmRoceV1AndTosOutsideThePfcPriorityWarn) {
  PlantedTree t("mlx5");
  t.write("kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode", "IB/RoCE v1");
  t.write("kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos", "0");
  t.write("class/net/ens1f0np0/ecn/roce_np/enable/3", "0");
  const auto rs = check_kernel_device(
      device(t.root(), "mlx5_0"),
      env_for(t.root(), "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off", "ens1f0np0"));
  const CheckResult* cm = find(rs, "mlx5_0/1 rdma_cm");
  EXPECT_EQ(cm->level, CheckLevel::kWarn);
  EXPECT_EQ(cm->fix,
            "echo \"RoCE v2\" > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode");
  const CheckResult* pfc = find(rs, "mlx5_0/1 pfc");
  EXPECT_EQ(pfc->level, CheckLevel::kWarn);
  EXPECT_EQ(pfc->detail,
            "dcb pfc show dev ens1f0np0: PFC on priorities 3; the RoCE TOS 0 is priority 0: RoCE "
            "traffic is not in a PFC priority (3)");
  EXPECT_EQ(pfc->fix,
            "echo 98 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos (DSCP 24 -> "
            "priority 3), and -T 98 in perftest");
  const CheckResult* ecn = find(rs, "mlx5_0/1 ecn");
  EXPECT_EQ(ecn->level, CheckLevel::kWarn);
  EXPECT_EQ(ecn->fix,
            "echo 1 > /sys/class/net/ens1f0np0/ecn/roce_np/enable/0; echo 1 > "
            "/sys/class/net/ens1f0np0/ecn/roce_rp/enable/0");
}

TEST(KernelDoctor, DcbParsingAndMemlock) {
  EXPECT_EQ(parse_dcb_pfc("pfc-cap 8 macsec-bypass off delay 0 \nprio-pfc 0:off 1:on 2:off 3:on"),
            (std::vector<int>{1, 3}));
  EXPECT_EQ(parse_dcb_pfc("prio-pfc 0:off 1:off"), std::vector<int>{});
  EXPECT_FALSE(parse_dcb_pfc("Error: Operation not supported").has_value());
  const CheckResult low = check_kernel_memlock(8192 * 1024, false);
  EXPECT_EQ(low.level, CheckLevel::kWarn);
  EXPECT_EQ(low.detail,
            "ulimit -l 8192 KiB: a kernel RDMA device pins every MR (ibv_reg_mr), so a process "
            "can register at most 8192 KiB before ibv_reg_mr fails with ENOMEM (Cannot allocate "
            "memory)");
  EXPECT_EQ(check_kernel_memlock(RLIM_INFINITY, false).level, CheckLevel::kPass);
  EXPECT_EQ(check_kernel_memlock(8192 * 1024, true).level, CheckLevel::kPass);
}

TEST(KernelDoctor, PeerMtuMismatchWarns) {
  kdev::KernelDevice d = device(tree("rxe"), "rxe0");
  d.ports[0].active_mtu = 1024;
  const CheckResult r = check_kernel_peer_mtu(d, d.ports[0], "10.77.0.1", 9000, 4096);
  EXPECT_EQ(r.level, CheckLevel::kWarn);
  EXPECT_EQ(r.detail,
            "active_mtu 1024 here (rxe0 on eth0), 4096 at 10.77.0.1 (MTU 9000); both sides must "
            "use path_mtu 1024 (ibv_rc_pingpong -m 1024, perftest -m 1024): each defaults to its "
            "own active_mtu, and the larger side's packets are dropped");
  EXPECT_EQ(r.fix, "ip link set dev eth0 mtu 9000 (here) or the peer's MTU to 1104");
  EXPECT_EQ(check_kernel_peer_mtu(d, d.ports[0], "p", 1500, 1024).level, CheckLevel::kPass);
}

}  // namespace
}  // namespace uroce::cli
