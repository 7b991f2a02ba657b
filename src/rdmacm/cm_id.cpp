// rdma_cm ids: create/destroy, bind, address and route resolution, listen, connect, accept,
// reject, disconnect and options. What the kernel's rdma_cm does for an IP address on a RoCE
// device happens here, on the uroce device that owns the address: the route is the routing
// table's, the path record is built locally (cma_resolve_iboe_route), and the REQ/REP carry
// what cma.c and cm.c put in them (docs/cm.md).
#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ibverbs/uroce_private.h"
#include "rdmacm/address.hpp"
#include "rdmacm/state.hpp"

namespace uroce::rdmacm {
namespace {

constexpr uint8_t kCmResponseTimeout = 20;                      // CMA_CM_RESPONSE_TIMEOUT
constexpr uint8_t kMaxCmRetries = 15;                           // CMA_MAX_CM_RETRIES
constexpr Nanos kSidrPeriod = std::chrono::milliseconds(4096);  // cma_resolve_ib_udp
constexpr int kSidrRetries = 15;

int gid_index(const CmDevice& dev, const Gid& gid) {
  for (size_t i = 0; i < dev.gids.size(); ++i) {
    if (dev.gids[i] == gid) return static_cast<int>(i);
  }
  return -1;
}

void attach(IdPriv& p, CmDevice& dev) {
  p.dev = &dev;
  p.id.verbs = dev.ctx;
  p.id.pd = dev.pd;
  p.id.port_num = 1;
}

// Takes (ps, port) for `p`; port 0 picks an ephemeral one. With Runtime::mu held.
int take_port(Runtime& rt, IdPriv& p, uint16_t port) {
  const uint16_t ps = static_cast<uint16_t>(p.id.ps);
  if (port == 0) port = rt.ephemeral_port(ps);
  if (port == 0) return fail(EADDRNOTAVAIL);
  if (auto it = rt.ports.find({ps, port}); it != rt.ports.end() && it->second != &p) {
    return fail(EADDRINUSE);
  }
  if (p.port != 0 && p.port != port) rt.ports.erase({ps, p.port});
  rt.ports[{ps, port}] = &p;
  p.port = port;
  set_port(&p.id.route.addr.src_addr, port);
  return 0;
}

// ucma_valid_param.
bool valid_param(const IdPriv& p, const rdma_conn_param* param) {
  if (p.id.ps != RDMA_PS_TCP) return true;
  if (p.id.qp == nullptr && param == nullptr) return false;
  if (param == nullptr || p.dev == nullptr) return true;
  if (param->responder_resources != RDMA_MAX_RESP_RES &&
      param->responder_resources > p.dev->max_responder_resources) {
    return false;
  }
  return param->initiator_depth == RDMA_MAX_INIT_DEPTH ||
         param->initiator_depth <= p.dev->max_initiator_depth;
}

// The application's private data after what rdma_create_ep's ai_connect put first.
bool user_private_data(const IdPriv& p, const rdma_conn_param* param, std::span<uint8_t> out) {
  const size_t extra =
      param != nullptr && param->private_data != nullptr ? param->private_data_len : 0;
  if (p.ep_connect_data.size() + extra > out.size()) return false;
  std::copy(p.ep_connect_data.begin(), p.ep_connect_data.end(), out.begin());
  if (extra != 0) {
    std::memcpy(out.data() + p.ep_connect_data.size(), param->private_data, extra);
  }
  return true;
}

cm::CmaHeader cma_header(const IdPriv& p) {
  cm::CmaHeader h;
  const sockaddr* src = &p.id.route.addr.src_addr;
  h.ip_version = src->sa_family == AF_INET ? 4 : 6;
  h.src_port = p.port;
  h.src_addr = cma_addr_of(src);
  h.dst_addr = cma_addr_of(&p.id.route.addr.dst_addr);
  return h;
}

int connect_ud(Runtime& rt, IdPriv& p, const rdma_conn_param* param) {
  cm::SidrReq req;
  req.service_id =
      cm::ip_service_id(static_cast<uint16_t>(p.id.ps), port_of(&p.id.route.addr.dst_addr));
  cm::encode_cma_header(cma_header(p), req.private_data);
  if (!user_private_data(p, param, std::span(req.private_data).subspan(cm::kCmaHeaderSize))) {
    return fail(EINVAL);
  }
  Gid dgid{};
  std::memcpy(dgid.data(), p.id.route.addr.addr.ibaddr.dgid.raw, 16);
  p.dev->source_for_peer[dgid] = p.sgid_index;
  p.cm_id = p.dev->agent->sidr_request(Runtime::now(), dgid, req, kSidrPeriod, kSidrRetries);
  p.has_cm = true;
  p.dev->conns[p.cm_id] = &p;
  p.state = IdState::kConnecting;
  rt.drain(*p.dev);
  return 0;
}

int connect_rc(Runtime& rt, IdPriv& p, const rdma_conn_param* param) {
  cm::Req req;
  if (!user_private_data(p, param, std::span(req.private_data).subspan(cm::kCmaHeaderSize))) {
    return fail(EINVAL);  // more than 56 bytes (cm_validate_req_param)
  }
  cm::encode_cma_header(cma_header(p), req.private_data);
  ConnAttrs& c = p.conn;
  c.rq_psn = random_psn();
  c.path_mtu = p.path.mtu;
  c.retry_count = param != nullptr ? param->retry_count & 7 : 7;
  c.hop_limit = p.path.hop_limit;
  c.traffic_class = p.tos;
  const uint8_t rnr_retry = param != nullptr ? param->rnr_retry_count & 7 : 7;
  req.service_id =
      cm::ip_service_id(static_cast<uint16_t>(p.id.ps), port_of(&p.id.route.addr.dst_addr));
  req.local_qpn = p.id.qp != nullptr ? p.id.qp->qp_num : (param != nullptr ? param->qp_num : 0);
  req.responder_resources = p.responder_resources;
  req.initiator_depth = p.initiator_depth;
  req.remote_cm_response_timeout = kCmResponseTimeout;
  req.local_cm_response_timeout = kCmResponseTimeout;
  req.transport = p.id.qp_type == IBV_QPT_UC ? cm::CmTransport::kUc : cm::CmTransport::kRc;
  req.e2e_flow_control = param != nullptr && param->flow_control != 0;
  req.starting_psn = c.rq_psn;
  req.retry_count = c.retry_count;
  req.pkey = 0xFFFF;
  req.path_mtu = c.path_mtu;
  req.rnr_retry_count = rnr_retry;
  req.max_cm_retries = kMaxCmRetries;
  req.srq = p.id.qp != nullptr ? p.id.qp->srq != nullptr : (param != nullptr && param->srq != 0);
  std::memcpy(req.primary.local_gid.data(), p.id.route.addr.addr.ibaddr.sgid.raw, 16);
  std::memcpy(req.primary.remote_gid.data(), p.id.route.addr.addr.ibaddr.dgid.raw, 16);
  req.primary.traffic_class = p.tos;
  req.primary.hop_limit = p.path.hop_limit;
  req.primary.subnet_local = true;
  req.primary.packet_rate = p.path.rate;
  req.primary.local_ack_timeout =
      p.ack_timeout != 0 ? p.ack_timeout : cm::cm_ack_timeout(kCaAckDelay, kPacketLifeTime);
  p.dev->source_for_peer[req.primary.remote_gid] = p.sgid_index;
  p.cm_id = p.dev->agent->connect(Runtime::now(), req.primary.remote_gid, req);
  p.has_cm = true;
  p.dev->conns[p.cm_id] = &p;
  p.state = IdState::kConnecting;
  rt.drain(*p.dev);
  return 0;
}

int listen_on(IdPriv& p, CmDevice& dev) {
  if (const auto st = dev.agent->listen(p.service_id, reinterpret_cast<uint64_t>(&p)); !st) {
    return fail(EADDRINUSE);
  }
  if (const int rc = Runtime::steer_listen(dev, p.service_id); rc != 0) {
    dev.agent->unlisten(p.service_id);
    if (rc == EADDRINUSE) {
      report("port " + std::to_string(p.port) + " is taken by another process on " +
             ibv_get_device_name(dev.ctx->device) + ": rdma_listen fails with EADDRINUSE");
    }
    return fail(rc);
  }
  p.listen_devices.push_back(&dev);
  return 0;
}

void stop_listening(IdPriv& p) {
  for (CmDevice* dev : p.listen_devices) {
    dev->agent->unlisten(p.service_id);
    Runtime::steer_unlisten(*dev, p.service_id);
  }
  p.listen_devices.clear();
}

}  // namespace

void set_route(IdPriv& p, const Gid& sgid, const Gid& dgid, uint8_t mtu) {
  rdma_ib_addr& ib = p.id.route.addr.addr.ibaddr;
  std::memcpy(ib.sgid.raw, sgid.data(), 16);
  std::memcpy(ib.dgid.raw, dgid.data(), 16);
  ib.pkey = htobe16(0xFFFF);
  ibv_sa_path_rec& r = p.path;
  std::memset(&r, 0, sizeof r);
  std::memcpy(r.sgid.raw, sgid.data(), 16);
  std::memcpy(r.dgid.raw, dgid.data(), 16);
  r.hop_limit = 64;
  r.traffic_class = p.tos;
  r.reversible = 1;
  r.numb_path = 1;
  r.pkey = htobe16(0xFFFF);
  r.mtu_selector = 2;  // exactly
  r.mtu = mtu;
  r.rate_selector = 2;
  r.rate = IBV_RATE_MAX;
  r.packet_life_time_selector = 2;
  r.packet_life_time = kPacketLifeTime;
  p.id.route.path_rec = &p.path;
  p.id.route.num_paths = 1;
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
  if (id == nullptr) return fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB) {
    return fail(EINVAL);
  }
  auto* p = new IdPriv;
  if (channel == nullptr) {
    Channel* own = create_channel();
    if (own == nullptr) {
      delete p;
      return -1;
    }
    channel = &own->ch;
    p->sync = true;
  }
  p->id.channel = channel;
  p->id.context = context;
  p->id.ps = ps;
  p->id.qp_type = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
  *id = &p->id;
  return 0;
}

int rdma_destroy_id(rdma_cm_id* id) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  {
    Runtime& rt = Runtime::get();
    std::lock_guard lock(rt.mu);
    if (p.has_cm) {
      p.dev->agent->destroy(Runtime::now(), p.cm_id);
      p.dev->conns.erase(p.cm_id);
      p.has_cm = false;
      rt.drain(*p.dev);
    }
    stop_listening(p);
    const std::pair<uint16_t, uint16_t> key{static_cast<uint16_t>(id->ps), p.port};
    if (auto it = rt.ports.find(key); it != rt.ports.end() && it->second == &p) rt.ports.erase(it);
  }
  // Requests that came for a listener and were never fetched: their peers get what the
  // kernel sends when it destroys such an id (REJ 28).
  const std::vector<IdPriv*> orphans = drop_queued_events(p);
  if (!orphans.empty()) {
    Runtime& rt = Runtime::get();
    std::lock_guard lock(rt.mu);
    for (IdPriv* child : orphans) {
      if (child->has_cm) {
        child->dev->agent->destroy(Runtime::now(), child->cm_id);
        child->dev->conns.erase(child->cm_id);
        rt.drain(*child->dev);
      }
      if (child->sync) destroy_channel(channel_of(child->id.channel));
      delete child;
    }
  }
  if (id->event != nullptr) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  wait_events_acked(p);
  if (p.sync) destroy_channel(channel_of(id->channel));
  delete &p;
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (id == nullptr || addr_len(addr) == 0) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.mu);
  if (p.state != IdState::kIdle) return fail(EINVAL);
  CmDevice* dev = nullptr;
  if (!is_any(addr)) {
    dev = rt.device_for(addr);
    if (dev == nullptr) {
      const int err = errno;
      if (err == EADDRNOTAVAIL || err == ENODEV) {
        report("no uroce device has " + to_string(addr) + " (is a netdev up with this address?)");
        return fail(EADDRNOTAVAIL);
      }
      return fail(err);  // the device is there but could not be opened (reported)
    }
  }
  std::memset(&id->route.addr.src_storage, 0, sizeof id->route.addr.src_storage);
  std::memcpy(&id->route.addr.src_storage, addr, addr_len(addr));
  if (take_port(rt, p, port_of(addr)) != 0) return -1;
  if (dev != nullptr) {
    attach(p, *dev);
    p.sgid_index = gid_index(*dev, gid_of(addr));
    std::memcpy(id->route.addr.addr.ibaddr.sgid.raw, gid_of(addr).data(), 16);
  }
  p.state = IdState::kBound;
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int /*timeout*/) {
  if (id == nullptr || addr_len(dst_addr) == 0) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  if (p.state == IdState::kIdle && src_addr != nullptr && addr_len(src_addr) != 0) {
    if (rdma_bind_addr(id, src_addr) != 0) return -1;
  }
  Runtime& rt = Runtime::get();
  {
    std::lock_guard lock(rt.mu);
    if (p.state != IdState::kIdle && p.state != IdState::kBound) return fail(EINVAL);
    Event* ev = nullptr;
    sockaddr_storage src{};
    int err = 0;
    if (p.state == IdState::kBound && !is_any(&id->route.addr.src_addr)) {
      std::memcpy(&src, &id->route.addr.src_storage, sizeof src);
    } else {
      err = route_source(dst_addr, src);
    }
    CmDevice* dev = nullptr;
    if (err == 0) {
      dev = rt.device_for(reinterpret_cast<sockaddr*>(&src));
      if (dev == nullptr) {
        report("no uroce device has " + to_string(reinterpret_cast<sockaddr*>(&src)) +
               ", the source address towards " + to_string(dst_addr));
        err = ENODEV;
      }
    } else {
      report("no route to " + to_string(dst_addr) + ": " + std::strerror(err));
    }
    int index = -1;
    if (dev != nullptr) {
      index = gid_index(*dev, gid_of(reinterpret_cast<sockaddr*>(&src)));
      if (index < 0) err = EADDRNOTAVAIL;
    }
    if (err == 0 && p.port == 0) {
      std::memcpy(&id->route.addr.src_storage, &src, sizeof src);
      if (take_port(rt, p, 0) != 0) err = errno;
    }
    if (err != 0) {
      ev = new_event(p, RDMA_CM_EVENT_ADDR_ERROR, -err);
    } else {
      const uint16_t port = p.port;
      std::memcpy(&id->route.addr.src_storage, &src, sizeof src);
      set_port(&id->route.addr.src_addr, port);
      std::memset(&id->route.addr.dst_storage, 0, sizeof id->route.addr.dst_storage);
      std::memcpy(&id->route.addr.dst_storage, dst_addr, addr_len(dst_addr));
      attach(p, *dev);
      p.sgid_index = index;
      rdma_ib_addr& ib = id->route.addr.addr.ibaddr;
      std::memcpy(ib.sgid.raw, gid_of(reinterpret_cast<sockaddr*>(&src)).data(), 16);
      std::memcpy(ib.dgid.raw, gid_of(dst_addr).data(), 16);
      ib.pkey = htobe16(0xFFFF);
      p.state = IdState::kAddrResolved;
      ev = new_event(p, RDMA_CM_EVENT_ADDR_RESOLVED);
    }
    push_event(p, ev);
  }
  return complete_sync(p);
}

int rdma_resolve_route(rdma_cm_id* id, int /*timeout*/) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  {
    std::lock_guard lock(Runtime::get().mu);
    if (p.state != IdState::kAddrResolved && p.state != IdState::kRouteResolved) {
      return fail(EINVAL);
    }
    Gid sgid{};
    Gid dgid{};
    std::memcpy(sgid.data(), id->route.addr.addr.ibaddr.sgid.raw, 16);
    std::memcpy(dgid.data(), id->route.addr.addr.ibaddr.dgid.raw, 16);
    set_route(p, sgid, dgid, p.dev->active_mtu);
    p.state = IdState::kRouteResolved;
    push_event(p, new_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED));
  }
  return complete_sync(p);
}

int rdma_listen(rdma_cm_id* id, int backlog) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  if (p.state == IdState::kIdle) {
    // The kernel binds an unbound listener to the wildcard address and an ephemeral port.
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any)) != 0) return -1;
  }
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.mu);
  if (p.state != IdState::kBound) return fail(EINVAL);
  p.service_id = cm::ip_service_id(static_cast<uint16_t>(id->ps), p.port);
  // ucma's: a backlog of 0, negative or beyond net.rdma_ucm.max_backlog (1024) is 1024.
  constexpr int kMaxBacklog = 1024;
  p.backlog = backlog > 0 && backlog < kMaxBacklog ? backlog : kMaxBacklog;
  std::vector<CmDevice*> devices;
  if (p.dev != nullptr) {
    devices.push_back(p.dev);
  } else {
    devices = rt.all_devices();
    p.listen_all = true;
  }
  if (devices.empty()) {
    report("no uroce device to listen on (no netdev is up with an address)");
    return fail(ENODEV);
  }
  for (CmDevice* dev : devices) {
    if (listen_on(p, *dev) != 0) {
      const int err = errno;
      stop_listening(p);
      return fail(err);
    }
  }
  p.state = IdState::kListening;
  return 0;
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  Runtime& rt = Runtime::get();
  {
    std::lock_guard lock(rt.mu);
    if (p.state != IdState::kRouteResolved || !valid_param(p, conn_param)) return fail(EINVAL);
    p.initiator_depth = conn_param != nullptr && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH
                            ? conn_param->initiator_depth
                            : p.dev->max_initiator_depth;
    p.responder_resources =
        conn_param != nullptr && conn_param->responder_resources != RDMA_MAX_RESP_RES
            ? conn_param->responder_resources
            : p.dev->max_responder_resources;
    const int rc =
        id->qp_type == IBV_QPT_UD ? connect_ud(rt, p, conn_param) : connect_rc(rt, p, conn_param);
    if (rc != 0) return rc;
    p.ep_connect_data.clear();
  }
  return complete_sync(p);
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  Runtime& rt = Runtime::get();
  {
    std::lock_guard lock(rt.mu);
    if (p.state != IdState::kRequest || !p.has_cm || !valid_param(p, conn_param)) {
      return fail(EINVAL);
    }
    if (id->qp == nullptr && conn_param == nullptr) return fail(EINVAL);
    const uint32_t qpn = id->qp != nullptr ? id->qp->qp_num : conn_param->qp_num;
    const bool srq = id->qp != nullptr ? id->qp->srq != nullptr : conn_param->srq != 0;
    p.initiator_depth = conn_param == nullptr || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH
                            ? std::min(p.initiator_depth, p.dev->max_initiator_depth)
                            : conn_param->initiator_depth;
    p.responder_resources =
        conn_param == nullptr || conn_param->responder_resources == RDMA_MAX_RESP_RES
            ? std::min(p.responder_resources, p.dev->max_responder_resources)
            : conn_param->responder_resources;
    const size_t user_len = conn_param != nullptr && conn_param->private_data != nullptr
                                ? conn_param->private_data_len
                                : 0;
    if (id->qp_type == IBV_QPT_UD) {
      cm::SidrRep rep;
      if (user_len > rep.private_data.size()) return fail(EINVAL);
      rep.status = static_cast<uint8_t>(cm::SidrStatus::kSuccess);
      rep.qpn = qpn;
      rep.qkey = p.ud_qkey;
      rep.service_id = p.service_id;
      if (user_len != 0) std::memcpy(rep.private_data.data(), conn_param->private_data, user_len);
      (void)p.dev->agent->sidr_reply(p.cm_id, rep);
      p.dev->conns.erase(p.cm_id);
      p.has_cm = false;
      p.state = IdState::kConnected;
      rt.drain(*p.dev);
      if (p.sync && id->event != nullptr) {
        rdma_ack_cm_event(id->event);
        id->event = nullptr;
      }
      return 0;
    }
    cm::Rep rep;
    if (user_len > rep.private_data.size()) return fail(EINVAL);
    p.conn.max_dest_rd_atomic = p.responder_resources;
    p.conn.max_rd_atomic = p.initiator_depth;
    // librdmacm moves the QP to RTR and RTS before the REP goes out.
    if (move_qp_to_rts(p) != 0) {
      const int err = errno;
      move_qp_to_error(p);
      return fail(err);
    }
    rep.local_qpn = qpn;
    rep.starting_psn = p.conn.rq_psn;
    rep.responder_resources = p.responder_resources;
    rep.initiator_depth = p.initiator_depth;
    rep.target_ack_delay = kCaAckDelay;
    rep.e2e_flow_control = conn_param != nullptr && conn_param->flow_control != 0;
    rep.rnr_retry_count = conn_param != nullptr ? conn_param->rnr_retry_count & 7 : 7;
    rep.srq = srq;
    if (user_len != 0) std::memcpy(rep.private_data.data(), conn_param->private_data, user_len);
    if (const auto st = p.dev->agent->accept(Runtime::now(), p.cm_id, rep); !st) {
      move_qp_to_error(p);
      return fail(st.code());
    }
    p.state = IdState::kAccepting;
    rt.drain(*p.dev);
  }
  return complete_sync(p);
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.mu);
  if (p.state != IdState::kRequest || !p.has_cm) return fail(EINVAL);
  const size_t len = private_data != nullptr ? private_data_len : 0;
  if (id->qp_type == IBV_QPT_UD) {
    cm::SidrRep rep;
    if (len > rep.private_data.size()) return fail(EINVAL);
    rep.status = static_cast<uint8_t>(cm::SidrStatus::kReject);
    if (len != 0) std::memcpy(rep.private_data.data(), private_data, len);
    (void)p.dev->agent->sidr_reply(p.cm_id, rep);
  } else {
    if (len > cm::kRejPrivateData) return fail(EINVAL);
    const auto st = p.dev->agent->reject(
        Runtime::now(), p.cm_id,
        std::span<const uint8_t>(static_cast<const uint8_t*>(private_data), len));
    if (!st) return fail(st.code());
  }
  p.dev->conns.erase(p.cm_id);
  p.has_cm = false;
  p.state = IdState::kDisconnected;
  rt.drain(*p.dev);
  return 0;
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return rdma_reject(id, private_data, private_data_len);
}

int rdma_establish(rdma_cm_id* id) {
  if (id == nullptr || id->qp != nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.mu);
  if (p.state != IdState::kConnectResponse || !p.has_cm) return fail(EINVAL);
  if (const auto st = p.dev->agent->establish(Runtime::now(), p.cm_id); !st) {
    return fail(st.code());
  }
  p.state = IdState::kConnected;
  rt.drain(*p.dev);
  return 0;
}

int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.mu);
  if (event == IBV_EVENT_COMM_EST && p.has_cm) {
    (void)p.dev->agent->notify_established(p.cm_id);
    rt.drain(*p.dev);
  }
  return 0;
}

int rdma_disconnect(rdma_cm_id* id) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  Runtime& rt = Runtime::get();
  {
    std::lock_guard lock(rt.mu);
    move_qp_to_error(p);
    if (!p.has_cm) return fail(EINVAL);
    if (const auto st = p.dev->agent->disconnect(Runtime::now(), p.cm_id); !st) {
      return fail(st.code());
    }
    rt.drain(*p.dev);
  }
  return complete_sync(p);
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (listen == nullptr || id == nullptr) return fail(EINVAL);
  IdPriv& l = *priv_of(listen);
  if (!l.sync) return fail(EINVAL);
  if (listen->event != nullptr) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(listen->channel, &event) != 0) return -1;
  int err = 0;
  if (event->event == RDMA_CM_EVENT_REJECTED) {
    err = ECONNREFUSED;
  } else if (event->status != 0) {
    err = -event->status;
  } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    err = EINVAL;
  } else if (l.ep_qp_init_attr) {
    ibv_qp_init_attr attr = *l.ep_qp_init_attr;
    if (rdma_create_qp(event->id, listen->pd, &attr) != 0) err = errno;
  }
  if (err != 0) {
    listen->event = event;
    return fail(err);
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  if (id == nullptr || optval == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  std::lock_guard lock(Runtime::get().mu);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        p.tos = *static_cast<uint8_t*>(optval);
        p.tos_set = true;
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY:
        return optlen == sizeof(int) ? 0 : fail(EINVAL);
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        p.ack_timeout = *static_cast<uint8_t*>(optval) & 0x1F;
        return 0;
      default:
        return fail(ENOSYS);
    }
  }
  return fail(ENOSYS);  // RDMA_OPTION_IB_PATH: RoCE builds its path locally
}

__be16 rdma_get_src_port(rdma_cm_id* id) {
  return id == nullptr ? 0 : htobe16(port_of(&id->route.addr.src_addr));
}

__be16 rdma_get_dst_port(rdma_cm_id* id) {
  return id == nullptr ? 0 : htobe16(port_of(&id->route.addr.dst_addr));
}

ibv_context** rdma_get_devices(int* num_devices) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.mu);
  const std::vector<CmDevice*> devices = rt.all_devices();
  auto** list = static_cast<ibv_context**>(std::calloc(devices.size() + 1, sizeof(ibv_context*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < devices.size(); ++i) list[i] = devices[i]->ctx;
  if (num_devices != nullptr) *num_devices = static_cast<int>(devices.size());
  return list;
}

void rdma_free_devices(ibv_context** list) {
  std::free(list);
}

int rdma_set_local_ece(rdma_cm_id* /*id*/, ibv_ece* /*ece*/) {
  return fail(EOPNOTSUPP);  // uroce devices have no enhanced connection establishment
}

int rdma_get_remote_ece(rdma_cm_id* /*id*/, ibv_ece* /*ece*/) {
  return fail(EOPNOTSUPP);
}

}  // extern "C"
