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
            "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0000:0000:0000:0001, RoCE v2\n"
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

}  // namespace
}  // namespace uroce::cli
