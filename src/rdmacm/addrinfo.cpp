// rdma_getaddrinfo / rdma_freeaddrinfo and the endpoint helpers rdma_create_ep /
// rdma_destroy_ep, as librdmacm's addrinfo.c and cma.c define them for IP addresses (no
// AF_IB, no subnet administrator: RAI_SA is refused).
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdmacm/address.hpp"
#include "rdmacm/state.hpp"

using namespace uroce;
using namespace uroce::rdmacm;

namespace {

int copy_addr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t len) {
  *dst = static_cast<sockaddr*>(std::malloc(len));
  if (*dst == nullptr) return fail(ENOMEM);
  std::memcpy(*dst, src, len);
  *dst_len = len;
  return 0;
}

}  // namespace

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
  if (res == nullptr || (node == nullptr && service == nullptr && hints == nullptr)) {
    return fail(EINVAL);
  }
  static constexpr int kRaiSa = 0x00000010;  // RAI_SA of newer headers: needs an SA
  if (hints != nullptr && (hints->ai_flags & kRaiSa) != 0) return fail(EOPNOTSUPP);
  rdma_addrinfo none{};
  if (hints == nullptr) hints = &none;
  auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (rai == nullptr) return fail(ENOMEM);
  int rc = 0;
  if (node != nullptr || service != nullptr) {
    addrinfo ai_hints{};
    if ((hints->ai_flags & RAI_PASSIVE) != 0) ai_hints.ai_flags |= AI_PASSIVE;
    if ((hints->ai_flags & RAI_NUMERICHOST) != 0) ai_hints.ai_flags |= AI_NUMERICHOST;
    if ((hints->ai_flags & RAI_FAMILY) != 0 && hints->ai_family != AF_IB) {
      ai_hints.ai_family = hints->ai_family;
    }
    ai_hints.ai_socktype = hints->ai_qp_type == IBV_QPT_UD ? SOCK_DGRAM : SOCK_STREAM;
    if (hints->ai_port_space == RDMA_PS_UDP) ai_hints.ai_socktype = SOCK_DGRAM;
    addrinfo* ai = nullptr;
    if (getaddrinfo(node, service, &ai_hints, &ai) != 0 || ai == nullptr) {
      std::free(rai);
      return fail(EADDRNOTAVAIL);  // rdma-core returns getaddrinfo's code; callers test != 0
    }
    rai->ai_qp_type = hints->ai_qp_type != 0          ? hints->ai_qp_type
                      : ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD
                                                      : IBV_QPT_RC;
    rai->ai_port_space = hints->ai_port_space != 0       ? hints->ai_port_space
                         : ai->ai_socktype == SOCK_DGRAM ? RDMA_PS_UDP
                                                         : RDMA_PS_TCP;
    rai->ai_family = ai->ai_family;
    if ((ai->ai_flags & AI_PASSIVE) != 0 || (hints->ai_flags & RAI_PASSIVE) != 0) {
      rai->ai_flags = RAI_PASSIVE;
      rc = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr, ai->ai_addrlen);
    } else {
      rc = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
    }
    freeaddrinfo(ai);
  } else {
    rai->ai_flags = hints->ai_flags;
    rai->ai_family = hints->ai_family;
    rai->ai_qp_type = hints->ai_qp_type;
    rai->ai_port_space = hints->ai_port_space;
    if (hints->ai_dst_len != 0) {
      rc = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
    }
  }
  if (rc == 0 && rai->ai_src_len == 0 && hints->ai_src_len != 0) {
    rc = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
  }
  if (rc != 0) {
    rdma_freeaddrinfo(rai);
    return -1;
  }
  *res = rai;
  return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_connect);
    std::free(res->ai_route);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res);
    res = next;
  }
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || res == nullptr) return fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) !=
      0) {
    return -1;
  }
  cm_id->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  IdPriv& p = *priv_of(cm_id);
  const auto fail_ep = [&] {
    const int err = errno;
    rdma_destroy_ep(cm_id);
    return fail(err);
  };
  if ((res->ai_flags & RAI_PASSIVE) != 0) {
    if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) return fail_ep();
    if (pd != nullptr) cm_id->pd = pd;
    if (qp_init_attr != nullptr) {
      p.ep_qp_init_attr = *qp_init_attr;
      p.ep_qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    }
    *id = cm_id;
    return 0;
  }
  if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) != 0 ||
      rdma_resolve_route(cm_id, 2000) != 0) {
    return fail_ep();
  }
  if (qp_init_attr != nullptr) {
    qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    if (rdma_create_qp(cm_id, pd, qp_init_attr) != 0) return fail_ep();
  }
  if (res->ai_connect_len != 0) {
    const auto* data = static_cast<const uint8_t*>(res->ai_connect);
    p.ep_connect_data.assign(data, data + res->ai_connect_len);
  }
  *id = cm_id;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp != nullptr) rdma_destroy_qp(id);
  if (id->srq != nullptr) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

}  // extern "C"
