// The real-time loop of `uroce switch`: a learning Ethernet switch between AF_PACKET ports
// (src/net/af_packet_port.hpp) whose egress ports are the switch queue model
// (src/fabric/switch_queue.hpp) driven with CLOCK_MONOTONIC.
//
// Forwarding: by MAC learning, as an 802.1D bridge. The source MAC of every frame is learnt
// on its ingress port; a frame to a known unicast MAC goes to that port through the model
// (rate, buffer, RED/ECN, tail drop or pause); a frame to a group address or an unknown MAC
// is flooded to every other port at once, outside the model (ARP and neighbour discovery,
// a few frames); a frame to its own ingress port is filtered. MAC learning needs no
// configuration and no ARP proxying, which forwarding by IP would.
//
// ECN: a packet the model marks gets ECN = CE written into its IPv4 TOS (header checksum
// recomputed) or IPv6 traffic class (ecn_frame.hpp); only ECT packets are marked.
//
// Priorities: a frame's priority is dscp_map[its DSCP] (non-IP: 0); each egress port has
// --priorities queues served by strict priority and DWRR (switch_queue.hpp has the rules).
//
// UDP GSO super-frames are cut into their datagrams first (fabric/udp_gso.hpp), each one a
// frame of its own in the model; TCP GSO super-frames bypass it (counted as oversized).
//
// Lossless priorities (every one in --mode lossless, or those named by --pfc PRIO), emulated
// honestly: a veth has no pause frames, so a sender cannot be stopped. While the model has
// paused (ingress i, priority c) (i's bytes of c queued anywhere above XOFF), the forwarder
// keeps reading i's socket but parks i's frames of priority c, in order, in the hold queue
// of (i, c) instead of offering them to the egress queues; i's other priorities keep
// flowing. When the model resumes (i, c) (XON), the held frames enter the queues first. The hold
// queues play the part of the upstream device's transmit queue that a PAUSE frame would stop (a
// RoCE requester's go-back-N resend replaces what is still held of its QP, as a paused NIC
// would not have sent it: switch_hold_queue.hpp), so nothing is dropped while frame slots last;
// when they run out the forwarder stops reading, the kernel queues in the socket buffer and finally
// drops (reported as kernel_rx_drops). What it does not emulate: the sender's own rate does not
// drop (a real pause stops the sender's NIC; here the sender keeps transmitting into the hold
// queue), there is no pause propagation further upstream, no pause frame on the wire, and a pause
// takes effect with zero reaction time (so the model's headroom is never needed). No downstream
// pause either: the model's egress queues are never held by a next hop.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/switch_options.hpp"
#include "fabric/switch_queue.hpp"

namespace uroce::cli {

enum class SwitchMode : uint8_t { kLossy, kEcn, kLossless };

struct SwitchRunOptions {
  std::vector<std::string> ports;
  SwitchMode mode = SwitchMode::kLossy;
  bool unlimited = false;           // --rate unlimited: no shaping, for measuring the forwarder
  fabric::SwitchQueueConfig queue;  // ports counts are filled in from `ports`
  // A frame's priority: dscp_map[DSCP of its IP header] (the model caps it at priorities - 1);
  // non-IP frames are priority 0. Default DSCP >> 3.
  DscpMap dscp_map = default_dscp_map();
  // Frame buffers shared by all queues and hold queues; 0: as many as kFramePoolBytes holds
  // (at most kMaxDefaultFrameSlots).
  uint32_t frame_slots = 0;
  // Per frame buffer, vnet header included; 0: the largest port's MTU with its Ethernet and
  // VLAN headers (frame_slot_bytes), so a jumbo RoCE frame goes through the model like any.
  uint32_t slot_bytes = 0;
  double duration_s = 0;     // 0: until SIGINT/SIGTERM
  double stats_every_s = 0;  // 0: no periodic lines on stderr
  std::string trace_path;    // CSV of queue samples; empty: none
  double trace_interval_us = 1000;
  bool json = false;
  // The UDP ports RoCE runs on: the hold queues recognise RC requests on them (a go-back-N
  // resend supersedes what is still held of its QP, switch_hold_queue.hpp).
  UdpPortSet roce_ports = UdpPortSet().set(4791);
  std::string roce_ports_text = "4791";  // as given, for the counters' JSON
};

[[nodiscard]] const char* switch_mode_name(SwitchMode m);

// Runs until a signal or the duration; prints the counters (JSON with o.json) on stdout.
// Returns the process exit status.
inline constexpr uint64_t kFramePoolBytes = 64ull << 20;
inline constexpr uint32_t kMaxDefaultFrameSlots = 32768;
inline constexpr uint32_t kMinFrameSlotBytes = 2048;

// The frame buffer for ports of MTU `mtu`: vnet header, Ethernet header, one VLAN tag and
// the MTU, in whole 64-byte lines, and never below kMinFrameSlotBytes.
uint32_t frame_slot_bytes(uint32_t mtu);
// The default --frame-slots for buffers of `slot_bytes`.
uint32_t default_frame_slots(uint32_t slot_bytes);

int run_switch(const SwitchRunOptions& o);

}  // namespace uroce::cli
