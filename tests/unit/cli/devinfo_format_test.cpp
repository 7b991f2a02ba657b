// `uroce devinfo`: the exact ibv_devinfo layout (tabs, field order, "(value)" suffixes).
#include <gtest/gtest.h>

#include "cli/devinfo_format.hpp"

namespace uroce::cli {
namespace {

device::Gid v4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  device::Gid g{};
  g[10] = 0xff;
  g[11] = 0xff;
  g[12] = a;
  g[13] = b;
  g[14] = c;
  g[15] = d;
  return g;
}

TEST(DevinfoFormat, MatchesIbvDevinfoLayout) {
  device::DeviceAttr d;
  d.fw_ver = "0.1.0";
  d.node_guid = 0x02fc00fffe000001ull;
  d.sys_image_guid = d.node_guid;
  d.phys_port_cnt = 1;
  DevinfoPort p;
  p.port_num = 1;
  p.attr.state = device::PortState::kActive;
  p.attr.max_mtu = transport::Mtu::k4096;
  p.attr.active_mtu = transport::Mtu::k1024;
  device::Gid fe80{};
  fe80[0] = 0xfe;
  fe80[1] = 0x80;
  fe80[15] = 1;
  p.gids = {{0, fe80}, {1, v4_gid(192, 0, 2, 2)}};
  const std::vector<DevinfoPort> ports = {p};
  EXPECT_EQ(format_devinfo("uroce_lo", d, ports, false),
            "hca_id:\turoce_lo\n"
            "\ttransport:\t\t\tInfiniBand (0)\n"
            "\tfw_ver:\t\t\t\t0.1.0\n"
            "\tnode_guid:\t\t\t02fc:00ff:fe00:0001\n"
            "\tsys_image_guid:\t\t\t02fc:00ff:fe00:0001\n"
            "\tvendor_id:\t\t\t0xffffff\n"
            "\tvendor_part_id:\t\t\t0\n"
            "\thw_ver:\t\t\t\t0x0\n"
            "\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
            "\t\t\tmax_mtu:\t\t4096 (5)\n"
            "\t\t\tactive_mtu:\t\t1024 (3)\n"
            "\t\t\tsm_lid:\t\t\t0\n"
            "\t\t\tport_lid:\t\t0\n"
            "\t\t\tport_lmc:\t\t0x00\n"
            "\t\t\tlink_layer:\t\tEthernet\n"
            "\t\t\tGID[  0]:\t\tfe80::1, RoCE v2\n"
            "\t\t\tGID[  1]:\t\t::ffff:192.0.2.2, RoCE v2\n"
            "\n");
}

TEST(DevinfoFormat, VerboseAddsTheLimits) {
  device::DeviceAttr d;
  d.max_qp = 1024;
  d.max_qp_wr = 16384;
  d.max_srq = 0;
  d.device_cap_flags = (1u << 1) | (1u << 12) | (1u << 20);
  d.max_mr_size = 1ull << 40;
  const std::string text = format_devinfo("uroce_lo", d, {}, true);
  EXPECT_NE(text.find("\tmax_mr_size:\t\t\t0x10000000000\n"), std::string::npos);
  EXPECT_NE(text.find("\tmax_qp:\t\t\t\t1024\n\tmax_qp_wr:\t\t\t16384\n"), std::string::npos);
  EXPECT_NE(text.find("\tdevice_cap_flags:\t\t0x00101002\n"
                      "\t\t\t\t\tBAD_PKEY_CNTR\n"
                      "\t\t\t\t\tRC_RNR_NAK_GEN\n"
                      "\t\t\t\t\tUnknown flags: 0x100000\n"),
            std::string::npos);
  EXPECT_NE(text.find("\tatomic_cap:\t\t\tATOMIC_HCA (1)\n"), std::string::npos);
  // max_srq 0: no max_srq_wr / max_srq_sge lines, as in ibv_devinfo.
  EXPECT_NE(text.find("\tmax_srq:\t\t\t0\n\tmax_pkeys:"), std::string::npos);
}

TEST(DevinfoFormat, NamesTheMemoryWindowCapabilitiesAndCount) {
  device::DeviceAttr d;
  d.device_cap_flags = (1u << 17) | (1u << 24);
  d.max_mw = 4096;
  const std::string text = format_devinfo("uroce_lo", d, {}, true);
  EXPECT_NE(text.find("\tdevice_cap_flags:\t\t0x01020000\n"
                      "\t\t\t\t\tMEM_WINDOW\n"
                      "\t\t\t\t\tMEM_WINDOW_TYPE_2B\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\tmax_mw:\t\t\t\t4096\n"), std::string::npos) << text;
}

// -v with the device's CcConfig: the algorithm, the line rate and where it comes from, and
// every DCQCN parameter in effect by its mlx5 name, in the table's order.
TEST(DevinfoFormat, VerboseShowsTheCongestionControlInEffect) {
  device::DeviceAttr d;
  DevinfoPort p;
  p.attr.netdev = "veth0";
  p.attr.speed_mbps = 25000;
  std::vector<DevinfoPort> ports = {p};
  transport::CcConfig cc;
  cc.algorithm = transport::CcAlgorithm::kDcqcn;
  cc.line_rate_mbps = 25000;
  cc.dcqcn.rpg_time_reset = 55;
  const std::string text = format_devinfo("uroce_veth0", d, ports, true, &cc);
  EXPECT_NE(text.find("\tlocal_ca_ack_delay:\t\t15\n"
                      "\tcongestion_control:\t\tdcqcn\n"
                      "\tcc_line_rate_mbps:\t\t25000 (speed of veth0)\n"
                      "\tcc_params:\t\t\t(DCQCN, mlx5 names; set with UROCE_DCQCN or --dcqcn)\n"
                      "\t\tinitial_alpha_value = 1023\n"
                      "\t\tdce_tcp_g = 1019\n"
                      "\t\tdce_tcp_rtt = 1\n"
                      "\t\trate_reduce_monitor_period = 4\n"
                      "\t\trpg_time_reset = 55\n"
                      "\t\trpg_byte_reset = 32767\n"
                      "\t\trpg_threshold = 1\n"
                      "\t\trpg_ai_rate = 5\n"
                      "\t\trpg_hai_rate = 50\n"
                      "\t\trpg_gd = 11\n"
                      "\t\trpg_min_dec_fac = 50\n"
                      "\t\trpg_min_rate = 1\n"
                      "\t\trpg_max_rate = 0 (the line rate, 25000 Mb/s)\n"
                      "\t\trate_to_set_on_first_cnp = 0\n"
                      "\t\tclamp_tgt_rate = 0\n"
                      "\t\tclamp_tgt_rate_after_time_inc = 1\n"
                      "\t\tpacer_burst_bytes = 131072\n"
                      "\t\tmin_time_between_cnps = 4\n"
                      "\t\tcnp_dscp = 48\n"
                      "\t\tport:\t1\n"),
            std::string::npos)
      << text;

  // Unknown speed (lo, most virtual NICs): the 10 Gb/s default, said as such; an explicit
  // rpg_max_rate is shown as given.
  ports[0].attr.netdev = "lo";
  ports[0].attr.speed_mbps = -1;
  cc.algorithm = transport::CcAlgorithm::kNone;
  cc.line_rate_mbps = 10000;
  cc.dcqcn.rpg_max_rate = 2000;
  const std::string lo = format_devinfo("uroce_lo", d, ports, true, &cc);
  EXPECT_NE(lo.find("\tcongestion_control:\t\tnone\n"
                    "\tcc_line_rate_mbps:\t\t10000 (default: the speed of lo is unknown)\n"),
            std::string::npos)
      << lo;
  EXPECT_NE(lo.find("\t\trpg_max_rate = 2000\n"), std::string::npos);
  // Without -v, nothing of it.
  EXPECT_EQ(format_devinfo("uroce_lo", d, ports, false, &cc).find("congestion_control"),
            std::string::npos);
}

}  // namespace
}  // namespace uroce::cli
