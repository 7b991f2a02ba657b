// Device, port, GID and P_Key queries. Every GID of a uroce device is a RoCE v2 GID (an IP
// address, IPv4 as ::ffff:a.b.c.d); the one P_Key is the default 0xFFFF, as on rxe.
#include <endian.h>
#include <net/if.h>

#include <algorithm>
#include <cstring>

#include "ibverbs/gid_hint.hpp"
#include "ibverbs/objects.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

// rxe's limits for what the device has no own notion of.
constexpr int kMaxAh = 0x3FFF;
// The clock completions are stamped with (Device::now, CLOCK_MONOTONIC) counts nanoseconds.
constexpr uint64_t kHcaCoreClockKhz = 1'000'000;
constexpr uint32_t kDefaultPkey = 0xFFFF;

// rdma-core's private enum ibv_gid_type_sysfs (driver.h).
constexpr int kGidTypeSysfsRoceV2 = 1;

void fill_device_attr(const device::DeviceAttr& a, ibv_device_attr& out) {
  std::memset(&out, 0, sizeof out);
  std::strncpy(out.fw_ver, a.fw_ver.c_str(), sizeof out.fw_ver - 1);
  out.node_guid = htobe64(a.node_guid);
  out.sys_image_guid = htobe64(a.sys_image_guid);
  out.max_mr_size = a.max_mr_size;
  out.page_size_cap = a.page_size_cap;
  out.vendor_id = a.vendor_id;
  out.vendor_part_id = a.vendor_part_id;
  out.hw_ver = a.hw_ver;
  out.max_qp = a.max_qp;
  out.max_qp_wr = a.max_qp_wr;
  out.device_cap_flags = a.device_cap_flags;
  out.max_sge = a.max_sge;
  out.max_sge_rd = a.max_sge_rd;
  out.max_cq = a.max_cq;
  out.max_cqe = a.max_cqe;
  out.max_mr = a.max_mr;
  out.max_mw = a.max_mw;
  out.max_pd = a.max_pd;
  out.max_qp_rd_atom = a.max_qp_rd_atom;
  out.max_ee_rd_atom = a.max_ee_rd_atom;
  out.max_res_rd_atom = a.max_res_rd_atom;
  out.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
  out.max_ee_init_rd_atom = a.max_ee_init_rd_atom;
  out.atomic_cap = static_cast<ibv_atomic_cap>(a.atomic_cap);
  out.max_ah = kMaxAh;
  out.max_srq = a.max_srq;
  out.max_srq_wr = a.max_srq_wr;
  out.max_srq_sge = a.max_srq_sge;
  out.max_pkeys = a.max_pkeys;
  out.local_ca_ack_delay = a.local_ca_ack_delay;
  out.phys_port_cnt = a.phys_port_cnt;
}

void fill_port_attr(const device::PortAttr& p, ibv_port_attr& out) {
  std::memset(&out, 0, sizeof out);
  out.state = static_cast<ibv_port_state>(p.state);
  out.max_mtu = static_cast<ibv_mtu>(p.max_mtu);
  out.active_mtu = static_cast<ibv_mtu>(p.active_mtu);
  out.gid_tbl_len = p.gid_tbl_len;
  // What a RoCE port of rxe reports: CM supported, GIDs are IP based.
  out.port_cap_flags = p.port_cap_flags | IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  out.max_msg_sz = p.max_msg_sz;
  out.pkey_tbl_len = p.pkey_tbl_len;
  out.max_vl_num = 1;
  out.active_width = p.active_width;
  out.active_speed = p.active_speed;
  out.phys_state = p.phys_state;
  out.link_layer = p.link_layer;
}

// A GID query's status, explained on stderr when the index is past the port's table.
transport::Status query_gid_explained(const device::Device& dev, uint8_t port_num, uint32_t index,
                                      device::Gid& gid) {
  transport::Status st = dev.query_gid(port_num, index, gid);
  if (!st && st.code() == EINVAL) explain_missing_gid(dev, port_num, index);  // "" if no port
  return st;
}

int fill_gid_entry(device::Device& dev, uint8_t port_num, uint32_t index, ibv_gid_entry& e) {
  device::Gid gid{};
  transport::Status st = query_gid_explained(dev, port_num, index, gid);
  if (!st) return st.code();
  std::memset(&e, 0, sizeof e);
  std::memcpy(e.gid.raw, gid.data(), gid.size());
  e.gid_index = index;
  e.port_num = port_num;
  e.gid_type = IBV_GID_TYPE_ROCE_V2;
  for (const device::PortInfo& p : dev.ports()) {
    if (p.port_num != port_num || index >= p.gids.size()) continue;
    e.ndev_ifindex = if_nametoindex(p.gids[index].netdev.c_str());
  }
  return 0;
}

}  // namespace

namespace uroce::ibverbs {

int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  if (context == nullptr || attr == nullptr) return fail_int(EINVAL);
  device::PortAttr p;
  transport::Status st = dev_of(context).query_port(port_num, p);
  if (!st) return fail_int(st.code());
  ibv_port_attr full;
  fill_port_attr(p, full);
  std::memcpy(attr, &full, std::min(len, sizeof full));
  return 0;
}

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) {
  if (context == nullptr || attr == nullptr) return fail_int(EINVAL);
  if (input != nullptr && input->comp_mask != 0) return fail_int(EINVAL);
  if (attr_size < sizeof(ibv_device_attr)) return fail_int(EINVAL);
  const device::DeviceAttr a = dev_of(context).query_device();
  ibv_device_attr_ex full;
  std::memset(&full, 0, sizeof full);
  fill_device_attr(a, full.orig_attr);
  full.phys_port_cnt_ex = a.phys_port_cnt;
  // Completion timestamps: the device clock (CLOCK_MONOTONIC) in ns, 64 bits wide.
  full.completion_timestamp_mask = ~uint64_t{0};
  full.hca_core_clock = kHcaCoreClockKhz;
  // On-demand paging: uroce pins no MR (resources.cpp), so every operation of every QP type
  // may use an on-demand one. Not implicit ODP (a whole address space MR).
  constexpr uint32_t kAllOps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                               IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                               IBV_ODP_SUPPORT_SRQ_RECV;
  full.odp_caps.general_caps = IBV_ODP_SUPPORT;
  full.odp_caps.per_transport_caps.rc_odp_caps = kAllOps;
  full.odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                 IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
  full.odp_caps.per_transport_caps.ud_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
  full.xrc_odp_caps = 0;
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &full, std::min(attr_size, sizeof full));
  return 0;
}

}  // namespace uroce::ibverbs

extern "C" {

int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
  if (context == nullptr || device_attr == nullptr) return fail_int(EINVAL);
  fill_device_attr(dev_of(context).query_device(), *device_attr);
  return 0;
}

// The exported symbol takes rdma-core's _compat_ibv_port_attr: ibv_port_attr up to `flags`.
// New programs call the verbs_context op through the inline ibv_query_port instead.
int(ibv_query_port)(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  return query_port_ex(context, port_num, reinterpret_cast<ibv_port_attr*>(port_attr),
                       offsetof(ibv_port_attr, port_cap_flags2));
}

// As rdma-core, which reads sysfs: an empty entry inside the table reads as all zeros.
int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (context == nullptr || gid == nullptr || index < 0) return fail_minus1(EINVAL);
  device::Gid g{};
  transport::Status st =
      query_gid_explained(dev_of(context), port_num, static_cast<uint32_t>(index), g);
  if (!st && st.code() != ENODATA) {
    errno = st.code();
    return -1;
  }
  std::memcpy(gid->raw, g.data(), g.size());
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (context == nullptr || entry == nullptr || flags != 0 || port_num > 255 ||
      entry_size < sizeof(ibv_gid_entry)) {
    return fail_int(EINVAL);
  }
  const int rc = fill_gid_entry(dev_of(context), static_cast<uint8_t>(port_num), gid_index, *entry);
  return rc == 0 ? 0 : fail_int(rc);
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  if (context == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) {
    errno = EINVAL;
    return -EINVAL;
  }
  device::Device& dev = dev_of(context);
  size_t n = 0;
  for (const device::PortInfo& p : dev.ports()) {
    for (uint32_t i = 0; i < p.gids.size(); ++i) {
      if (p.gids[i].empty()) continue;
      if (n == max_entries) {
        errno = EINVAL;  // rdma-core: the array is too small for the table
        return -EINVAL;
      }
      auto* e =
          reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<uint8_t*>(entries) + n * entry_size);
      if (fill_gid_entry(dev, p.port_num, i, *e) == 0) ++n;
    }
  }
  return static_cast<ssize_t>(n);
}

// IBVERBS_PRIVATE_34; perftest and pyverbs call it to tell RoCE v1 from v2.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  if (context == nullptr || type == nullptr) return fail_minus1(EINVAL);
  device::Gid g{};
  transport::Status st = query_gid_explained(dev_of(context), port_num, index, g);
  if (!st && st.code() != ENODATA) {
    errno = st.code();
    return -1;
  }
  *type = kGidTypeSysfsRoceV2;
  return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (context == nullptr || pkey == nullptr) return fail_minus1(EINVAL);
  device::PortAttr p;
  if (!dev_of(context).query_port(port_num, p) || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(kDefaultPkey);
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (context == nullptr) return fail_minus1(EINVAL);
  device::PortAttr p;
  if (!dev_of(context).query_port(port_num, p)) {
    errno = EINVAL;
    return -1;
  }
  // The full-membership bit does not take part in the match (IBA 10.9.3).
  if ((be16toh(pkey) & 0x7FFF) != (kDefaultPkey & 0x7FFF)) {
    errno = ENOENT;
    return -1;
  }
  return 0;
}

}  // extern "C"

namespace uroce::ibverbs {

// ibv_query_rt_values_ex: the device clock now (the raw clock completions are stamped with).
int query_rt_values(ibv_context* context, ibv_values_ex* values) {
  if (context == nullptr || values == nullptr) return EINVAL;
  values->comp_mask &= IBV_VALUES_MASK_RAW_CLOCK;
  if ((values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) != 0) {
    clock_gettime(CLOCK_MONOTONIC, &values->raw_clock);
  }
  return 0;
}

}  // namespace uroce::ibverbs
