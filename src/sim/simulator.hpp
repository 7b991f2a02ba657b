// The fabric simulator: hosts running the unmodified transport engine (one
// transport::Engine per host, one RC QP pair per flow), links with a line rate, propagation
// delay and the impairment model of src/fault, and switches with the shared-buffer queue
// model of src/fabric (switch_node.hpp), all on one virtual clock (event_queue.hpp).
//
//   Simulator sim(scenario, "file.toml");   // builds topology, engines, QPs, flows
//   sim.run();                              // until every flow completed or duration_ns
//   write_outputs(sim, dir);                // output.hpp
//
// Hosts: the NIC pulls poll_tx only while its link is free and the packet's priority is not
// paused by PFC from the switch; each packet is serialised at the line rate (wire_bytes()
// in packet_pool.hpp) and arrives whole at the peer after the propagation delay. Engine
// timers run at next_deadline(). Nothing reads a wall clock; randomness is seeded.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fault/impair_model.hpp"
#include "sim/event_queue.hpp"
#include "sim/packet_pool.hpp"
#include "sim/scenario.hpp"
#include "sim/switch_node.hpp"
#include "sim/topology.hpp"
#include "sim/workload.hpp"
#include "transport/engine.hpp"

namespace uroce::sim {

// One direction of a link: what the conservation checks add up.
struct ChannelStats {
  uint64_t sent = 0;       // packets whose transmission started
  uint64_t delivered = 0;  // arrived at the far end
  uint64_t lost = 0;       // dropped on the link (impairment)
  uint64_t corrupted = 0;  // delivered with a flipped bit
};

struct HostStats {
  uint64_t tx_packets = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_bytes = 0;  // wire bytes
  uint64_t rx_bytes = 0;
  uint64_t pause_frames_received = 0;  // PFC PAUSE frames (pause time > 0), refreshes included
  uint64_t paused_ns = 0;
  uint8_t paused_mask = 0;  // priorities paused now
  uint32_t held = 0;        // packets the NIC holds now for paused priorities
};

struct FlowState {
  FlowSpec spec;
  uint32_t req_host = 0;  // the requester (src: WRITE, SEND and READ)
  uint32_t resp_host = 0;
  uint32_t req_qpn = 0;
  uint32_t resp_qpn = 0;
  uint64_t posted = 0;  // bytes posted
  uint64_t done = 0;    // bytes completed
  uint32_t outstanding = 0;
  uint64_t messages = 0;
  TimePoint start{};
  TimePoint end{};
  bool started = false;
  bool completed = false;
  bool failed = false;
  uint64_t ideal_ns = 0;
  uint64_t goodput_mark = 0;  // data-receiving QP's bytes at the last sample
  // Packets the data receiver has acknowledged in order (WRITE, SEND: the ACKs' PSNs at the
  // requester; READ: in-order responses), for the goodput of a flow still running at the end.
  uint32_t next_psn = 0;  // the first PSN not yet acknowledged (24 bits)
  uint64_t acked_packets = 0;
};

// 802.1Qbb PFC frames one (node, port) sent, per class: every PAUSE (pause time > 0, the
// first and each refresh) and every XON (pause time 0), and how often the port decided to
// pause (a queue crossing XOFF, a storm starting).
struct PfcTxStats {
  uint64_t pause_frames = 0;
  uint64_t xon_frames = 0;
  uint64_t pause_events = 0;
};

// Periodic samples (every sample_ns).
struct QueueSample {
  uint64_t time_ns;
  uint32_t sw;  // switch index (0-based among switches)
  uint32_t port;
  uint8_t priority;
  uint64_t depth;
};
struct FlowSample {
  uint64_t time_ns;
  uint32_t flow;
  double gbps;
};

class Simulator {
 public:
  Simulator(const Scenario& sc, const std::string& file);
  ~Simulator();

  // Progress hook, called every 2^16 events with the simulated time and the event count
  // (the CLI's progress bar; the model never looks at wall time itself).
  using ProgressFn = void (*)(void* ctx, TimePoint now, uint64_t events);
  void set_progress(ProgressFn fn, void* ctx) {
    progress_ = fn;
    progress_ctx_ = ctx;
  }
  void run();

  [[nodiscard]] const Scenario& scenario() const { return sc_; }
  [[nodiscard]] const Topology& topology() const { return topo_; }
  [[nodiscard]] TimePoint now() const { return now_; }
  [[nodiscard]] uint64_t events() const { return events_; }
  [[nodiscard]] uint64_t packet_hops() const { return hops_; }
  [[nodiscard]] const std::vector<FlowState>& flows() const { return flows_; }
  [[nodiscard]] uint32_t failed_flows() const { return failed_flows_; }
  [[nodiscard]] const std::vector<ChannelStats>& channels() const { return channels_; }
  [[nodiscard]] const HostStats& host_stats(uint32_t h) const { return hosts_[h].stats; }
  [[nodiscard]] const transport::Counters& host_counters(uint32_t h) const;
  [[nodiscard]] const transport::Counters* qp_counters(uint32_t host, uint32_t qpn) const;
  [[nodiscard]] const SwitchNode& switch_node(uint32_t s) const { return *switches_[s].model; }
  [[nodiscard]] uint32_t switch_count() const { return static_cast<uint32_t>(switches_.size()); }
  [[nodiscard]] const std::vector<QueueSample>& queue_samples() const { return queue_samples_; }
  [[nodiscard]] const std::vector<FlowSample>& rate_samples() const { return rate_samples_; }
  [[nodiscard]] const std::vector<FlowSample>& goodput_samples() const { return goodput_samples_; }
  // Packets now in the fabric: on links, in switch queues, held by NICs.
  [[nodiscard]] uint64_t packets_in_flight() const { return pool_.in_use(); }
  [[nodiscard]] uint64_t link_in_flight() const { return on_links_; }
  // PFC frames sent from `port` of `node` for class `cls`.
  [[nodiscard]] const PfcTxStats& pfc_tx_stats(uint32_t node, uint32_t port, uint8_t cls) const {
    return pfc_tx_[pfc_index(node, port, cls)].stats;
  }
  // Completed bytes of the flow plus those the receiver acknowledged of its open WRs: the
  // payload delivered in order by now (flows.csv's goodput of a flow still running).
  [[nodiscard]] uint64_t delivered_bytes(const FlowState& f) const;

 private:
  enum Kind : uint32_t {
    kArrive,      // a = node, b = packet id | in_port << 32
    kHostTxDone,  // a = host
    kHostTimer,   // a = host
    kSwitchTx,    // a = switch, b = egress port
    kPfc,         // a PFC frame arrives: a = node, b = port | class << 32 | quanta << 40
    kSample,
    kFlowStart,   // a = flow
    kStorm,       // a = storm, b = 1 start, 0 end
    kPfcRefresh,  // a = sending node, b = port | class << 32: a PAUSE due again
    kPfcExpire,   // a = receiving node, b = port | class << 32: its pause time runs out
  };

  // One (node, port, class) as a PFC sender: pausing while its queue is above XON (or a
  // storm lasts), with the next refresh due at refresh_at.
  struct PfcTx {
    bool pausing = false;
    TimePoint refresh_at = kNever;
    PfcTxStats stats;
  };
  // One (node, port, class) as a PFC receiver: held until `expires` (kNever: not paused).
  struct PfcRx {
    TimePoint expires = kNever;
  };

  // Packets a NIC holds for paused priorities. The engine has one transmit path for all its
  // QPs, so a NIC whose host sends on several priorities keeps polling past packets of a
  // paused one (holding them) to reach the others, as a real NIC's per-priority send queues
  // would; a bound keeps memory finite.
  static constexpr uint32_t kMaxHeld = 512;

  // A FIFO of pool indices, allocated once at setup (kMaxHeld slots: the NIC never holds
  // more in all its priorities together), so holding and releasing a packet allocate
  // nothing and cost O(1).
  class HeldRing {
   public:
    void init() { slots_.assign(kMaxHeld, 0); }
    [[nodiscard]] bool empty() const { return size_ == 0; }
    void push(uint32_t pkt) { slots_[(head_ + size_++) % kMaxHeld] = pkt; }
    uint32_t pop() {
      const uint32_t pkt = slots_[head_];
      head_ = (head_ + 1) % kMaxHeld;
      --size_;
      return pkt;
    }

   private:
    std::vector<uint32_t> slots_;
    uint32_t head_ = 0;
    uint32_t size_ = 0;
  };

  struct Host {
    std::unique_ptr<transport::Engine> engine;
    transport::PdId pd{};
    transport::CqId scq{};
    transport::CqId rcq{};
    std::vector<uint8_t> buf;
    transport::MrInfo mr;
    bool tx_busy = false;
    uint8_t paused_mask = 0;
    uint8_t tx_prio_mask = 0;  // priorities this host's packets can carry (its flows, CNPs)
    std::array<TimePoint, kPriorities> paused_since{};
    std::array<HeldRing, kPriorities> held;  // packets of a paused priority, oldest first
    uint32_t held_count = 0;
    TimePoint timer_at = kNever;
    TimePoint link_free{};
    uint64_t residual = 0;
    std::vector<uint32_t> flow_of_qp;  // qpn - qpn_base -> flow id
    HostStats stats;
  };
  struct Switch {
    uint32_t node = 0;  // topology node index
    std::unique_ptr<SwitchNode> model;
    std::vector<uint8_t> tx_scheduled;  // per egress: a kSwitchTx event is pending
  };

  // setup (simulator_setup.cpp)
  void build_hosts();
  void build_switches();
  void build_flows();
  void connect_qp(uint32_t host, uint32_t qpn, uint32_t peer_host, uint32_t peer_qpn, uint8_t tc,
                  uint32_t rq_psn, uint32_t sq_psn);

  // hosts (host_driver.cpp)
  void host_arrive(uint32_t h, uint32_t pkt);
  void count_delivery(uint32_t h, const SimPacket& p);
  void host_serviced(uint32_t h);  // after any engine call: completions, TX, timer
  void host_try_tx(uint32_t h);
  void host_send(uint32_t h, uint32_t pkt);
  void host_timer(uint32_t h, TimePoint at);
  void host_pfc(uint32_t h, uint8_t priority, bool pause);
  void poll_completions(uint32_t h);
  void post_more(FlowState& f);
  void flow_failed(FlowState& f);
  void flow_start(uint32_t flow);

  // switches (switch_driver.cpp)
  void switch_arrive(uint32_t s, uint32_t in_port, uint32_t pkt);
  void switch_kick(uint32_t s, uint32_t port);
  void switch_tx(uint32_t s, uint32_t port);
  // PFC (switch_driver.cpp): start or stop pausing (node, port, class); each sends a frame.
  void pfc_pause(uint32_t node, uint32_t port, uint8_t cls, bool refresh = true);
  void pfc_resume(uint32_t node, uint32_t port, uint8_t cls);
  void send_pfc_frame(uint32_t node, uint32_t port, uint8_t cls, uint32_t quanta);
  void pfc_refresh(uint32_t node, uint32_t port, uint8_t cls, TimePoint at);
  void pfc_frame_arrived(uint32_t node, uint32_t port, uint8_t cls, uint32_t quanta);
  void pfc_expired(uint32_t node, uint32_t port, uint8_t cls, TimePoint at);
  void set_paused(uint32_t node, uint32_t port, uint8_t cls, bool pause);
  // (node, port, class) -> index into pfc_tx_ / pfc_rx_: the port's outgoing channel names it.
  [[nodiscard]] uint32_t pfc_index(uint32_t node, uint32_t port, uint8_t cls) const {
    return topo_.node(node).ports[port].channel * kPriorities + cls;
  }
  // `quanta` of 512 bit times at the rate of (node, port)'s link, in nanoseconds.
  [[nodiscard]] Nanos quanta_time(uint32_t node, uint32_t port, uint32_t quanta) const;
  [[nodiscard]] uint32_t ecmp(uint32_t s, const SimPacket& p) const;

  // links and the loop (simulator.cpp)
  void link_send(uint32_t node, uint32_t port, uint32_t pkt, TimePoint tx_end);
  void dispatch(const Event& e);
  void sample();
  void storm(uint32_t i, bool start);
  [[nodiscard]] bool finished() const;

  Scenario sc_;
  std::string file_;
  Topology topo_;
  EventQueue q_;
  PacketPool pool_;
  std::vector<Host> hosts_;
  std::vector<Switch> switches_;
  std::vector<int32_t> switch_of_node_;
  std::vector<ChannelStats> channels_;
  std::vector<std::unique_ptr<fault::ImpairModel>> impair_;  // per channel, empty = none
  std::vector<PfcTx> pfc_tx_;                                // per channel x class (pfc_index)
  std::vector<PfcRx> pfc_rx_;

  std::vector<FlowState> flows_;
  std::vector<QueueSample> queue_samples_;
  std::vector<FlowSample> rate_samples_;
  std::vector<FlowSample> goodput_samples_;
  uint32_t finite_flows_ = 0;
  uint32_t finished_flows_ = 0;
  uint32_t failed_flows_ = 0;
  TimePoint now_{0};
  uint64_t events_ = 0;
  uint64_t hops_ = 0;
  uint64_t on_links_ = 0;
  bool stop_ = false;
  ProgressFn progress_ = nullptr;
  void* progress_ctx_ = nullptr;
};

}  // namespace uroce::sim
