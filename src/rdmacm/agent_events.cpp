// The agent's events as rdma_cm events, with the fields and private-data lengths the kernel's
// rdma_cm reports (cma.c: cma_set_req_event_data, cma_set_rep_event_data, cma_ib_handler,
// cma_sidr_rep_handler).
#include <cerrno>
#include <cstring>

#include "rdmacm/address.hpp"
#include "rdmacm/state.hpp"

namespace uroce::rdmacm {
namespace {

template <size_t N>
void set_private(Event& e, const std::array<uint8_t, N>& data, size_t offset, bool ud) {
  const size_t len = N - offset;
  std::memcpy(e.private_data.data(), data.data() + offset, len);
  if (ud) {
    e.ev.param.ud.private_data = e.private_data.data();
    e.ev.param.ud.private_data_len = static_cast<uint8_t>(len);
  } else {
    e.ev.param.conn.private_data = e.private_data.data();
    e.ev.param.conn.private_data_len = static_cast<uint8_t>(len);
  }
}

}  // namespace

// A REQ or SIDR_REQ for one of our listeners: a new id, reported to the listener's channel as
// CONNECT_REQUEST. What rdma_cm would refuse gets REJ 28 (SIDR: status 2), as the kernel's
// cm_destroy_id answers a request rdma_cm's handler failed.
void Runtime::on_request(CmDevice& dev, const cm::CmEvent& e) {
  auto* listener = reinterpret_cast<IdPriv*>(e.listener);
  const bool ud = e.type == cm::CmEventType::kSidrReqReceived;
  const auto refuse = [&] {
    if (ud) {
      cm::SidrRep rep;
      rep.status = static_cast<uint8_t>(cm::SidrStatus::kReject);
      (void)dev.agent->sidr_reply(e.id, rep);
    } else {
      (void)dev.agent->reject(now(), e.id, {});
    }
  };
  const std::span<const uint8_t> pdata =
      ud ? std::span<const uint8_t>(std::get<cm::SidrReq>(e.message).private_data)
         : std::span<const uint8_t>(std::get<cm::Req>(e.message).private_data);
  const auto hdr = cm::decode_cma_header(pdata);
  const bool ud_listener = listener->id.qp_type == IBV_QPT_UD;
  if (!hdr || ud != ud_listener) return refuse();
  if (listener->queued_requests >= listener->backlog) {
    dev.agent->forget_request(e.id);  // the kernel's -ENOMEM: nothing sent, the peer resends
    return;
  }
  sockaddr_storage local{};
  sockaddr_storage remote{};
  const uint64_t service_id =
      ud ? std::get<cm::SidrReq>(e.message).service_id : std::get<cm::Req>(e.message).service_id;
  sockaddr_of_cma(hdr->ip_version, hdr->dst_addr, cm::service_port(service_id), local);
  sockaddr_of_cma(hdr->ip_version, hdr->src_addr, hdr->src_port, remote);
  const sockaddr* bound = &listener->id.route.addr.src_addr;
  // A listener bound to one address takes requests for that address only; a wildcard one
  // those of its family (an IPv6 wildcard takes both, as without AFONLY).
  if (!is_any(bound) ? gid_of(bound) != gid_of(reinterpret_cast<sockaddr*>(&local))
                     : (bound->sa_family == AF_INET && hdr->ip_version != 4)) {
    return refuse();
  }

  auto* child = new IdPriv;
  child->id.verbs = dev.ctx;
  child->id.context = listener->id.context;
  child->id.ps = listener->id.ps;
  child->id.qp_type = listener->id.qp_type;
  child->id.port_num = 1;
  child->id.pd = dev.pd;
  child->dev = &dev;
  child->listener = listener;
  child->state = IdState::kRequest;
  child->cm_id = e.id;
  child->has_cm = true;
  child->port = cm::service_port(service_id);
  child->service_id = service_id;
  std::memcpy(&child->id.route.addr.src_storage, &local, sizeof local);
  std::memcpy(&child->id.route.addr.dst_storage, &remote, sizeof remote);
  if (listener->sync) {
    // rdma-core gives a request of a synchronous listener its own synchronous channel.
    Channel* own = create_channel();
    if (own == nullptr) {
      delete child;
      return refuse();
    }
    child->id.channel = &own->ch;
    child->sync = true;
  } else {
    child->id.channel = listener->id.channel;
  }

  Event* ev = new_event(*listener, RDMA_CM_EVENT_CONNECT_REQUEST);
  ev->ev.id = &child->id;
  ev->ev.listen_id = &listener->id;
  if (ud) {
    const auto& req = std::get<cm::SidrReq>(e.message);
    const Gid sgid = dev.gids[static_cast<size_t>(source_index(dev, e.peer))];
    set_route(*child, sgid, e.peer, dev.active_mtu);
    set_private(*ev, req.private_data, cm::kCmaHeaderSize, /*ud=*/true);
    ah_attr_for(dev, e.peer, ev->ev.param.ud.ah_attr);
  } else {
    const auto& req = std::get<cm::Req>(e.message);
    // The REQ names our GID as its remote one; the kernel takes the local GID from there.
    set_route(*child, req.primary.remote_gid, req.primary.local_gid, req.path_mtu);
    child->sgid_index = -1;
    for (size_t g = 0; g < dev.gids.size(); ++g) {
      if (dev.gids[g] == req.primary.remote_gid) child->sgid_index = static_cast<int>(g);
    }
    if (child->sgid_index < 0) {
      // The REQ names an address this device does not have (the kernel's
      // cma_ib_acquire_dev finds no GID for it): refused like any request rdma_cm fails.
      dev.conns.erase(e.id);
      if (child->sync) destroy_channel(channel_of(child->id.channel));
      delete child;
      delete ev;
      return refuse();
    }
    ConnAttrs& c = child->conn;
    c.remote_qpn = req.local_qpn;
    c.sq_psn = req.starting_psn;
    c.rq_psn = random_psn();
    c.path_mtu = req.path_mtu;
    c.timeout = req.primary.local_ack_timeout;
    c.retry_count = req.retry_count;
    c.rnr_retry = req.rnr_retry_count;
    c.hop_limit = 0xFF;  // the kernel's passive side takes the AV from the WC: hop limit 255
    c.traffic_class = req.primary.traffic_class;
    c.flow_label = req.primary.flow_label;
    // The receiver's view: what the peer offers to read from us is what we may read.
    child->responder_resources = req.initiator_depth;
    child->initiator_depth = req.responder_resources;
    set_private(*ev, req.private_data, cm::kCmaHeaderSize, /*ud=*/false);
    rdma_conn_param& p = ev->ev.param.conn;
    p.responder_resources = req.initiator_depth;
    p.initiator_depth = req.responder_resources;
    p.flow_control = req.e2e_flow_control ? 1 : 0;
    p.retry_count = req.retry_count;
    p.rnr_retry_count = req.rnr_retry_count;
    p.srq = req.srq ? 1 : 0;
    p.qp_num = req.local_qpn;
  }
  dev.conns[e.id] = child;
  ++listener->queued_requests;
  push_event(*listener, ev);
}

void Runtime::on_event(CmDevice& dev, const cm::CmEvent& e) {
  using T = cm::CmEventType;
  if (e.type == T::kReqReceived || e.type == T::kSidrReqReceived) return on_request(dev, e);
  const auto it = dev.conns.find(e.id);
  if (it == dev.conns.end()) return;  // its id is gone
  IdPriv& id = *it->second;
  const auto forget = [&] {
    dev.conns.erase(e.id);
    id.has_cm = false;
  };
  Event* ev = nullptr;
  switch (e.type) {
    case T::kRepReceived: {
      const auto& rep = std::get<cm::Rep>(e.message);
      ConnAttrs& c = id.conn;
      c.remote_qpn = rep.local_qpn;
      c.sq_psn = rep.starting_psn;
      c.max_rd_atomic = rep.responder_resources;
      c.max_dest_rd_atomic = rep.initiator_depth;
      c.rnr_retry = rep.rnr_retry_count;
      c.timeout = id.ack_timeout != 0 ? id.ack_timeout
                                      : cm::cm_ack_timeout(rep.target_ack_delay, kPacketLifeTime);
      ev = new_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE);
      ev->conn_response = true;
      set_private(*ev, rep.private_data, 0, /*ud=*/false);
      rdma_conn_param& p = ev->ev.param.conn;
      p.responder_resources = rep.responder_resources;
      p.initiator_depth = rep.initiator_depth;
      p.flow_control = rep.e2e_flow_control ? 1 : 0;
      p.rnr_retry_count = rep.rnr_retry_count;
      p.srq = rep.srq ? 1 : 0;
      p.qp_num = rep.local_qpn;
      break;
    }
    case T::kEstablished:
      id.state = IdState::kConnected;
      ev = new_event(id, RDMA_CM_EVENT_ESTABLISHED);
      break;
    case T::kRejected: {
      forget();
      if (id.connect_error) return;
      move_qp_to_error(id);
      id.state = IdState::kDisconnected;
      ev = new_event(id, RDMA_CM_EVENT_REJECTED, e.reason);
      set_private(*ev, std::get<cm::Rej>(e.message).private_data, 0, /*ud=*/false);
      break;
    }
    case T::kUnreachable:
      forget();
      id.state = IdState::kDisconnected;
      ev = new_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      break;
    case T::kDisconnected:
      if (id.connect_error) return;
      id.state = IdState::kDisconnected;
      ev = new_event(id, RDMA_CM_EVENT_DISCONNECTED, e.status != 0 ? -e.status : 0);
      break;
    case T::kTimewaitExit:
      forget();
      ev = new_event(id, RDMA_CM_EVENT_TIMEWAIT_EXIT);
      break;
    case T::kSidrRepReceived: {
      forget();
      const auto& rep = std::get<cm::SidrRep>(e.message);
      if (rep.status != static_cast<uint8_t>(cm::SidrStatus::kSuccess)) {
        id.state = IdState::kDisconnected;
        ev = new_event(id, RDMA_CM_EVENT_UNREACHABLE, rep.status);
        break;
      }
      id.state = IdState::kConnected;
      ev = new_event(id, RDMA_CM_EVENT_ESTABLISHED);
      set_private(*ev, rep.private_data, 0, /*ud=*/true);
      ah_attr_for(dev, e.peer, ev->ev.param.ud.ah_attr);
      ev->ev.param.ud.qp_num = rep.qpn;
      ev->ev.param.ud.qkey = rep.qkey;
      break;
    }
    default:
      return;
  }
  push_event(id, ev);
}

}  // namespace uroce::rdmacm
