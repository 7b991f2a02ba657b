// The hold queue of a paused lossless (ingress, priority): switch_hold_queue.hpp has why a
// go-back-N resend supersedes what is still held of its QP.
#include "cli/switch_hold_queue.hpp"

#include "fabric/ecn_frame.hpp"
#include "uroce/vocab/psn.hpp"
#include "wire/frame.hpp"
#include "wire/opcode.hpp"

namespace uroce::cli {

std::optional<RcRequest> rc_request_of(std::span<const uint8_t> frame,
                                       const UdpPortSet& roce_ports) {
  // The UDP destination port first (decap_frame takes one RoCE port): after the IPv4 header
  // (IHL) or the fixed IPv6 one; decap_frame checks the rest (protocol, lengths, fragments).
  const fabric::IpHeaderAt ip = fabric::ip_header_at(frame);
  if (!ip.found) return std::nullopt;
  const size_t udp = ip.offset + (ip.v4 ? size_t{frame[ip.offset] & 0x0Fu} * 4 : 40);
  if (udp + 8 > frame.size()) return std::nullopt;
  const uint16_t dport = static_cast<uint16_t>(frame[udp + 2] << 8 | frame[udp + 3]);
  if (!roce_ports.test(dport)) return std::nullopt;
  wire::RoceFrame f;
  f.roce_port = dport;
  if (wire::decap_frame(wire::LinkType::kEthernet, frame, f) != wire::FrameError::kOk) {
    return std::nullopt;
  }
  // BTH: opcode (byte 0), destination QP (bytes 5-7), PSN (bytes 9-11).
  if (f.roce.size() < 12) return std::nullopt;
  const uint8_t op = f.roce[0];
  if (wire::transport_of(op) != wire::Transport::kRc) return std::nullopt;
  const wire::OpcodeInfo& info = wire::opcode_info(op);
  if (!info.valid || (info.flags & wire::kIsRequest) == 0) return std::nullopt;
  RcRequest r;
  r.src = f.ip.src;
  r.dst = f.ip.dst;
  r.dest_qp = uint32_t{f.roce[5]} << 16 | uint32_t{f.roce[6]} << 8 | f.roce[7];
  r.psn = uint32_t{f.roce[9]} << 16 | uint32_t{f.roce[10]} << 8 | f.roce[11];
  return r;
}

HoldQueue::HoldQueue(size_t capacity) : items_(capacity) {
  flows_.reserve(kMaxFlows);
}

uint8_t HoldQueue::flow_of(const RcRequest& r) {
  size_t idle = flows_.size();
  for (size_t i = 0; i < flows_.size(); ++i) {
    const Flow& f = flows_[i];
    if (f.dest_qp == r.dest_qp && f.dst == r.dst && f.src == r.src) return static_cast<uint8_t>(i);
    if (f.held == 0 && idle == flows_.size()) idle = i;
  }
  if (idle == flows_.size()) {
    if (flows_.size() == kMaxFlows) return kNoFlow;
    flows_.emplace_back();  // within the reserved capacity: no allocation
  }
  Flow& f = flows_[idle];
  f = Flow{.src = r.src, .dst = r.dst, .dest_qp = r.dest_qp, .last_psn = r.psn, .held = 0};
  return static_cast<uint8_t>(idle);
}

void HoldQueue::push(HeldFrame f, const std::optional<RcRequest>& req,
                     std::vector<uint32_t>& superseded) {
  uint8_t flow = kNoFlow;
  if (req) {
    flow = flow_of(*req);
    if (flow != kNoFlow) {
      Flow& fl = flows_[flow];
      if (fl.held > 0 && !Psn(req->psn).after(Psn(fl.last_psn))) {
        supersede(flow, req->psn, superseded);
      }
      fl.last_psn = req->psn;
      ++fl.held;
    }
  }
  // Cannot overflow: the ring has a place for every frame buffer.
  items_[(head_ + count_) % items_.size()] =
      Item{.slot = f.slot, .egress = f.egress, .psn = req ? req->psn : 0, .flow = flow};
  ++count_;
}

HeldFrame HoldQueue::pop() {
  const Item it = items_[head_];
  head_ = (head_ + 1) % items_.size();
  --count_;
  if (it.flow != kNoFlow) --flows_[it.flow].held;
  return {it.slot, it.egress};
}

void HoldQueue::supersede(uint8_t flow, uint32_t psn, std::vector<uint32_t>& superseded) {
  size_t kept = 0;
  for (size_t i = 0; i < count_; ++i) {
    const Item it = at(i);
    if (it.flow == flow && !Psn(it.psn).before(Psn(psn))) {
      superseded.push_back(it.slot);
      --flows_[flow].held;
    } else {
      at(kept++) = it;
    }
  }
  count_ = kept;
}

}  // namespace uroce::cli
