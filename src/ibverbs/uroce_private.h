/* What uroce's librdmacm.so.1 needs of uroce's libibverbs.so.1 beyond the ibverbs ABI,
 * exported under the version node UROCE_PRIVATE_1 (libibverbs.map). rdma-core's librdmacm
 * reaches QP1 and the CM through the kernel; uroce's reaches them through these. Not an
 * application interface: it may change with every release of the pair. */
#ifndef UROCE_IBVERBS_PRIVATE_H
#define UROCE_IBVERBS_PRIVATE_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* QP1 of the context's device (the GSI QP that sends and receives CM MADs): qp_type must be
 * IBV_QPT_UD; the QP gets QPN 1 and sends with the GSI Q_Key 0x80010000. One per context:
 * EBUSY while one exists. NULL and errno on failure. Destroy it with ibv_destroy_qp. */
struct ibv_qp* uroce_create_gsi_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* attr);

/* Steering of QP1 datagrams between the processes sharing the device's addresses (several
 * processes on one host share UDP port 4791):
 *   UROCE_CM_CAPABLE (service_id ignored): this process answers CM requests for services
 *     nobody listens on (REJ "invalid service ID"), on = 1, or stops, on = 0;
 *   UROCE_CM_LISTEN: REQs and SIDR_REQs for service_id come to this process (on = 1), or
 *     no longer (on = 0). EADDRINUSE when another process listens on it.
 * Returns 0 or an errno value. */
enum { UROCE_CM_CAPABLE = 1, UROCE_CM_LISTEN = 2 };
int uroce_cm_steer(struct ibv_context* context, int what, uint64_t service_id, int on);

/* The context's QPN slot (0..63): the top 6 bits of every QPN it hands out. The CM puts it
 * in the top bits of its communication IDs, so replies are steered like the QPs' data. */
int uroce_cm_slot(struct ibv_context* context);

/* What the network said about the packets this context sent to `gid` (an IP address as a
 * GID): ICMP port unreachable for UDP 4791 (nothing runs RoCE v2 there), host/net
 * unreachable or administratively prohibited. Counts since the context opened. */
struct uroce_path_report {
  uint64_t port_unreachable;
  uint64_t unreachable;
};
void uroce_query_path(struct ibv_context* context, const uint8_t gid[16],
                      struct uroce_path_report* out);

/* Sends now what the context's device has ready to send (posted WQEs, held ACKs); for a
 * process about to exit with a CM MAD just posted on QP1. 0, or EAGAIN when some are still
 * waiting (a full socket buffer, or an RC window). */
int uroce_flush(struct ibv_context* context);

#ifdef __cplusplus
}
#endif

#endif
