// libefa.so.1 stand-in: perftest links libefa for its efadv_* extensions (SRD QPs). A uroce
// device is not an EFA device, so every call answers "not supported" (EOPNOTSUPP), as rdma-core's
// libefa does for a non-EFA context.
#include <infiniband/efadv.h>

#include <cerrno>

extern "C" {

ibv_qp* efadv_create_qp_ex(ibv_context*, ibv_qp_init_attr_ex*, efadv_qp_init_attr*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}

int efadv_query_device(ibv_context*, efadv_device_attr*, uint32_t) {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // extern "C"
