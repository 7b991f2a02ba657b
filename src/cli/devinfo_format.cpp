// ibv_devinfo layout: see devinfo_format.hpp.
#include "cli/devinfo_format.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "transport/cc/cc_config.hpp"

namespace uroce::cli {
namespace {

std::string_view mtu_str(transport::Mtu m) {
  switch (m) {
    case transport::Mtu::k256:
      return "256";
    case transport::Mtu::k512:
      return "512";
    case transport::Mtu::k1024:
      return "1024";
    case transport::Mtu::k2048:
      return "2048";
    case transport::Mtu::k4096:
      return "4096";
  }
  return "invalid MTU";
}

std::string_view atomic_cap_str(device::AtomicCap a) {
  switch (a) {
    case device::AtomicCap::kNone:
      return "ATOMIC_NONE";
    case device::AtomicCap::kHca:
      return "ATOMIC_HCA";
    case device::AtomicCap::kGlob:
      return "ATOMIC_GLOB";
  }
  return "invalid atomic capability";
}

std::string_view width_str(uint8_t w) {
  switch (w) {
    case 1:
      return "1";
    case 2:
      return "4";
    case 4:
      return "8";
    case 8:
      return "12";
    case 16:
      return "2";
    default:
      return "invalid width";
  }
}

std::string_view speed_str(uint8_t s) {
  switch (s) {
    case 1:
      return "2.5 Gbps";
    case 2:
      return "5.0 Gbps";
    case 4:
    case 8:
      return "10.0 Gbps";
    case 16:
      return "14.0 Gbps";
    case 32:
      return "25.0 Gbps";
    case 64:
      return "50.0 Gbps";
    case 128:
      return "100.0 Gbps";
    default:
      return "invalid speed";
  }
}

std::string guid_str(uint64_t guid) {
  return fmt::format("{:04x}:{:04x}:{:04x}:{:04x}", (guid >> 48) & 0xffff, (guid >> 32) & 0xffff,
                     (guid >> 16) & 0xffff, guid & 0xffff);
}

void cap_flags(std::string& out, uint32_t flags) {
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {1u << 0, "RESIZE_MAX_WR"},       {1u << 1, "BAD_PKEY_CNTR"},
      {1u << 2, "BAD_QKEY_CNTR"},       {1u << 3, "RAW_MULTI"},
      {1u << 4, "AUTO_PATH_MIG"},       {1u << 5, "CHANGE_PHY_PORT"},
      {1u << 6, "UD_AV_PORT_ENFORCE"},  {1u << 7, "CURR_QP_STATE_MOD"},
      {1u << 8, "SHUTDOWN_PORT"},       {1u << 9, "INIT_TYPE"},
      {1u << 10, "PORT_ACTIVE_EVENT"},  {1u << 11, "SYS_IMAGE_GUID"},
      {1u << 12, "RC_RNR_NAK_GEN"},     {1u << 13, "SRQ_RESIZE"},
      {1u << 14, "N_NOTIFY_CQ"},        {1u << 17, "MEM_WINDOW"},
      {1u << 23, "MEM_WINDOW_TYPE_2A"}, {1u << 24, "MEM_WINDOW_TYPE_2B"},
  };
  uint32_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (flags & bit) fmt::format_to(std::back_inserter(out), "\t\t\t\t\t{}\n", name);
  }
  if (flags & ~known) {
    fmt::format_to(std::back_inserter(out), "\t\t\t\t\tUnknown flags: 0x{:X}\n", flags & ~known);
  }
}

template <typename... T>
void put(std::string& out, fmt::format_string<T...> format, T&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<T>(args)...);
}

// The congestion-control lines of -v (see devinfo_format.hpp).
void put_cc(std::string& out, const transport::CcConfig& cc, std::span<const DevinfoPort> ports) {
  put(out, "\tcongestion_control:\t\t{}\n", transport::cc_algorithm_name(cc.algorithm));
  const device::PortAttr* port = ports.empty() ? nullptr : &ports.front().attr;
  const std::string netdev = port != nullptr ? port->netdev : std::string("the netdev");
  if (port != nullptr && port->speed_mbps > 0 && cc.line_rate_mbps == port->speed_mbps) {
    put(out, "\tcc_line_rate_mbps:\t\t{} (speed of {})\n", cc.line_rate_mbps, netdev);
  } else if (port != nullptr && port->speed_mbps <= 0) {
    put(out, "\tcc_line_rate_mbps:\t\t{} (default: the speed of {} is unknown)\n",
        cc.line_rate_mbps, netdev);
  } else {
    put(out, "\tcc_line_rate_mbps:\t\t{}\n", cc.line_rate_mbps);
  }
  put(out, "\tcc_params:\t\t\t(DCQCN, mlx5 names; set with UROCE_DCQCN or --dcqcn)\n");
  for (const transport::DcqcnParamInfo& p : transport::dcqcn_param_table()) {
    const uint32_t v = cc.dcqcn.*(p.member);
    if (p.name == "rpg_max_rate" && v == 0) {
      put(out, "\t\t{} = 0 (the line rate, {} Mb/s)\n", p.name, cc.line_rate_mbps);
    } else {
      put(out, "\t\t{} = {}\n", p.name, v);
    }
  }
}

}  // namespace

// ibv_devinfo's names (libibverbs/examples/devinfo.c port_state_str / port_phy_state_str),
// for uroce's ports and the kernel's alike.
std::string_view ibv_port_state_str(int s) {
  switch (s) {
    case 1:
      return "PORT_DOWN";
    case 2:
      return "PORT_INIT";
    case 3:
      return "PORT_ARMED";
    case 4:
      return "PORT_ACTIVE";
    case 5:
      return "PORT_ACTIVE_DEFER";
    default:
      return "invalid state";
  }
}

std::string_view ibv_phys_state_str(int s) {
  switch (s) {
    case 1:
      return "SLEEP";
    case 2:
      return "POLLING";
    case 3:
      return "DISABLED";
    case 4:
      return "PORT_CONFIGURATION TRAINNING";
    case 5:
      return "LINK_UP";
    case 6:
      return "LINK_ERROR_RECOVERY";
    case 7:
      return "PHY TEST";
    default:
      return "invalid physical state";
  }
}

// rdma-core's devinfo.c prints a RoCE v2 GID with inet_ntop (what Debian's ibv_devinfo shows
// for rxe0 in the interop guest, and for uroce's devices over the drop-in: "::1").
std::string devinfo_gid_text(const device::Gid& g) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.data(), text, sizeof text);
  return text;
}

std::string format_devinfo(std::string_view hca_id, const device::DeviceAttr& d,
                           std::span<const DevinfoPort> ports, bool verbose,
                           const transport::CcConfig* cc) {
  std::string out;
  put(out, "hca_id:\t{}\n", hca_id);
  put(out, "\ttransport:\t\t\t{} ({})\n", "InfiniBand", 0);
  if (!d.fw_ver.empty()) put(out, "\tfw_ver:\t\t\t\t{}\n", d.fw_ver);
  put(out, "\tnode_guid:\t\t\t{}\n", guid_str(d.node_guid));
  put(out, "\tsys_image_guid:\t\t\t{}\n", guid_str(d.sys_image_guid));
  put(out, "\tvendor_id:\t\t\t0x{:04x}\n", d.vendor_id);
  put(out, "\tvendor_part_id:\t\t\t{}\n", d.vendor_part_id);
  put(out, "\thw_ver:\t\t\t\t0x{:X}\n", d.hw_ver);
  put(out, "\tphys_port_cnt:\t\t\t{}\n", d.phys_port_cnt);
  if (verbose) {
    put(out, "\tmax_mr_size:\t\t\t0x{:x}\n", d.max_mr_size);
    put(out, "\tpage_size_cap:\t\t\t0x{:x}\n", d.page_size_cap);
    put(out, "\tmax_qp:\t\t\t\t{}\n", d.max_qp);
    put(out, "\tmax_qp_wr:\t\t\t{}\n", d.max_qp_wr);
    put(out, "\tdevice_cap_flags:\t\t0x{:08x}\n", d.device_cap_flags);
    cap_flags(out, d.device_cap_flags);
    put(out, "\tmax_sge:\t\t\t{}\n", d.max_sge);
    put(out, "\tmax_sge_rd:\t\t\t{}\n", d.max_sge_rd);
    put(out, "\tmax_cq:\t\t\t\t{}\n", d.max_cq);
    put(out, "\tmax_cqe:\t\t\t{}\n", d.max_cqe);
    put(out, "\tmax_mr:\t\t\t\t{}\n", d.max_mr);
    put(out, "\tmax_pd:\t\t\t\t{}\n", d.max_pd);
    put(out, "\tmax_qp_rd_atom:\t\t\t{}\n", d.max_qp_rd_atom);
    put(out, "\tmax_ee_rd_atom:\t\t\t{}\n", d.max_ee_rd_atom);
    put(out, "\tmax_res_rd_atom:\t\t{}\n", d.max_res_rd_atom);
    put(out, "\tmax_qp_init_rd_atom:\t\t{}\n", d.max_qp_init_rd_atom);
    put(out, "\tmax_ee_init_rd_atom:\t\t{}\n", d.max_ee_init_rd_atom);
    put(out, "\tatomic_cap:\t\t\t{} ({})\n", atomic_cap_str(d.atomic_cap),
        static_cast<int>(d.atomic_cap));
    put(out, "\tmax_ee:\t\t\t\t0\n");
    put(out, "\tmax_rdd:\t\t\t0\n");
    put(out, "\tmax_mw:\t\t\t\t{}\n", d.max_mw);
    put(out, "\tmax_raw_ipv6_qp:\t\t0\n");
    put(out, "\tmax_raw_ethy_qp:\t\t0\n");
    put(out, "\tmax_mcast_grp:\t\t\t0\n");
    put(out, "\tmax_mcast_qp_attach:\t\t0\n");
    put(out, "\tmax_total_mcast_qp_attach:\t0\n");
    put(out, "\tmax_ah:\t\t\t\t{}\n", d.max_qp);
    put(out, "\tmax_fmr:\t\t\t0\n");
    put(out, "\tmax_srq:\t\t\t{}\n", d.max_srq);
    if (d.max_srq != 0) {
      put(out, "\tmax_srq_wr:\t\t\t{}\n", d.max_srq_wr);
      put(out, "\tmax_srq_sge:\t\t\t{}\n", d.max_srq_sge);
    }
    put(out, "\tmax_pkeys:\t\t\t{}\n", d.max_pkeys);
    put(out, "\tlocal_ca_ack_delay:\t\t{}\n", d.local_ca_ack_delay);
    if (cc != nullptr) put_cc(out, *cc, ports);
  }
  for (const DevinfoPort& p : ports) {
    const device::PortAttr& a = p.attr;
    put(out, "\t\tport:\t{}\n", p.port_num);
    put(out, "\t\t\tstate:\t\t\t{} ({})\n", ibv_port_state_str(static_cast<int>(a.state)),
        static_cast<int>(a.state));
    put(out, "\t\t\tmax_mtu:\t\t{} ({})\n", mtu_str(a.max_mtu), static_cast<int>(a.max_mtu));
    put(out, "\t\t\tactive_mtu:\t\t{} ({})\n", mtu_str(a.active_mtu),
        static_cast<int>(a.active_mtu));
    put(out, "\t\t\tsm_lid:\t\t\t0\n");
    put(out, "\t\t\tport_lid:\t\t0\n");
    put(out, "\t\t\tport_lmc:\t\t0x00\n");
    put(out, "\t\t\tlink_layer:\t\t{}\n",
        a.link_layer == device::kLinkLayerEthernet ? "Ethernet" : "InfiniBand");
    if (verbose) {
      put(out, "\t\t\tmax_msg_sz:\t\t0x{:x}\n", a.max_msg_sz);
      put(out, "\t\t\tport_cap_flags:\t\t0x{:08x}\n", a.port_cap_flags);
      put(out, "\t\t\tport_cap_flags2:\t0x0000\n");
      put(out, "\t\t\tmax_vl_num:\t\t1 (1)\n");
      put(out, "\t\t\tbad_pkey_cntr:\t\t0x0\n");
      put(out, "\t\t\tqkey_viol_cntr:\t\t0x0\n");
      put(out, "\t\t\tsm_sl:\t\t\t0\n");
      put(out, "\t\t\tpkey_tbl_len:\t\t{}\n", a.pkey_tbl_len);
      put(out, "\t\t\tgid_tbl_len:\t\t{}\n", a.gid_tbl_len);
      put(out, "\t\t\tsubnet_timeout:\t\t0\n");
      put(out, "\t\t\tinit_type_reply:\t0\n");
      put(out, "\t\t\tactive_width:\t\t{}X ({})\n", width_str(a.active_width), a.active_width);
      put(out, "\t\t\tactive_speed:\t\t{} ({})\n", speed_str(a.active_speed), a.active_speed);
      put(out, "\t\t\tphys_state:\t\t{} ({})\n", ibv_phys_state_str(a.phys_state), a.phys_state);
    }
    for (const auto& [index, gid] : p.gids) {
      put(out, "\t\t\tGID[{:>3}]:\t\t{}, RoCE v2\n", index, devinfo_gid_text(gid));
    }
    put(out, "\n");
  }
  return out;
}

}  // namespace uroce::cli
