// What uroce's librdmacm calls beyond the ibverbs ABI (uroce_private.h): QP1 of a context,
// the context's QPN slot, the steering of QP1 datagrams to the process that owns a CM
// service, and sending what was posted before the process exits.
#include "ibverbs/uroce_private.h"

#include <algorithm>

#include "ibverbs/objects.hpp"
#include "net/reuseport_program.hpp"

using namespace uroce;
using namespace uroce::ibverbs;

extern "C" {

ibv_qp* uroce_create_gsi_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_qp>(EINVAL);
  {
    UContext* uctx = ctx_of(pd->context);
    std::lock_guard lock(uctx->mu);
    if (uctx->qps.contains(1)) return fail_null<ibv_qp>(EBUSY);
  }
  return make_qp(pd, init_attr_ex(pd, *attr), attr->cap, /*gsi=*/true);
}

int uroce_cm_steer(ibv_context* context, int what, uint64_t service_id, int on) {
  if (context == nullptr) return EINVAL;
  device::Device& dev = dev_of(context);
  switch (what) {
    case UROCE_CM_CAPABLE:
      return dev.cm_capable(on != 0);
    case UROCE_CM_LISTEN:
      return dev.cm_listen(service_id, on != 0);
    default:
      return EINVAL;
  }
}

int uroce_cm_slot(ibv_context* context) {
  if (context == nullptr) return 0;
  return static_cast<int>(net::slot_of_qpn(dev_of(context).config().engine.qpn_base));
}

void uroce_query_path(ibv_context* context, const uint8_t gid[16], struct uroce_path_report* out) {
  *out = {};
  if (context == nullptr || gid == nullptr) return;
  device::Gid g{};
  std::copy(gid, gid + 16, g.begin());
  const device::PathReport r = dev_of(context).path_report(g);
  out->port_unreachable = r.port_unreachable;
  out->unreachable = r.unreachable;
}

int uroce_flush(ibv_context* context) {
  if (context == nullptr) return EINVAL;
  return dev_of(context).flush_sends() ? 0 : EAGAIN;
}

}  // extern "C"
