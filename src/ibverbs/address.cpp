// Address handles from a received UD completion (ibv_init_ah_from_wc,
// ibv_create_ah_from_wc): the reply goes back to where the packet came from.
//
// On RoCE v2 the 40-byte GRH area in front of a UD payload holds the received IP header,
// laid out as rxe writes it (docs/rxe-facts.md §2g): an IPv6 header as is, or 20 zero
// bytes then the IPv4 header. Which one is told as rdma-core's get_grh_header_version does.
#include <endian.h>

#include <cstring>

#include "ibverbs/objects.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

namespace {

bool ipv4_checksum_ok(const uint8_t* h) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
  while ((sum >> 16) != 0) sum = (sum & 0xFFFF) + (sum >> 16);
  return sum == 0xFFFF;
}

bool grh_is_ipv4(const uint8_t* grh) {
  const uint8_t* ip4 = grh + 20;
  if ((grh[0] >> 4) != 6) return (ip4[0] >> 4) == 4;
  return ip4[0] == 0x45 && ipv4_checksum_ok(ip4);
}

void v4_mapped(const uint8_t* addr4, uint8_t* gid) {
  std::memset(gid, 0, 16);
  gid[10] = 0xFF;
  gid[11] = 0xFF;
  std::memcpy(gid + 12, addr4, 4);
}

}  // namespace

extern "C" {

int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  if (context == nullptr || wc == nullptr || ah_attr == nullptr) return fail_minus1(EINVAL);
  // Without the GRH there is no IP source to answer to.
  if ((wc->wc_flags & IBV_WC_GRH) == 0 || grh == nullptr) return fail_minus1(EINVAL);
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  uint8_t remote[16];
  uint8_t local[16];
  uint8_t tclass = 0;
  uint32_t flow_label = 0;
  if (grh_is_ipv4(raw)) {
    const uint8_t* ip4 = raw + 20;
    tclass = ip4[1];
    v4_mapped(ip4 + 12, remote);
    v4_mapped(ip4 + 16, local);
  } else {
    const uint32_t vtf = be32toh(grh->version_tclass_flow);
    tclass = static_cast<uint8_t>((vtf >> 20) & 0xFF);
    flow_label = vtf & 0xFFFFF;
    std::memcpy(remote, grh->sgid.raw, 16);
    std::memcpy(local, grh->dgid.raw, 16);
  }
  // The source GID index is the entry holding the address the packet was sent to.
  int sgid_index = -1;
  for (const device::PortInfo& p : dev_of(context).ports()) {
    if (p.port_num != port_num) continue;
    for (size_t i = 0; i < p.gids.size(); ++i) {
      if (std::memcmp(p.gids[i].gid.data(), local, 16) == 0) {
        sgid_index = static_cast<int>(i);
        break;
      }
    }
  }
  if (sgid_index < 0) return fail_minus1(ENOENT);
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->is_global = 1;
  ah_attr->port_num = port_num;
  ah_attr->sl = wc->sl;
  std::memcpy(ah_attr->grh.dgid.raw, remote, 16);
  ah_attr->grh.sgid_index = static_cast<uint8_t>(sgid_index);
  ah_attr->grh.flow_label = flow_label;
  ah_attr->grh.hop_limit = 0xFF;
  ah_attr->grh.traffic_class = tclass;
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (pd == nullptr) return fail_null<ibv_ah>(EINVAL);
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}

}  // extern "C"
