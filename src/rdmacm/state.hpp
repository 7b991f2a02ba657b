// The objects behind uroce's librdmacm: event channels, rdma_cm_ids, their events, and the
// per-device CM service (QP1 and a cm::CmAgent) that one background thread drives.
//
// Where rdma-core's librdmacm writes commands to the kernel's rdma_cm (ucma), which runs the
// IB CM on QP1 and queues events on the channel's fd, this library runs the CM itself:
//   - each uroce device an id lands on gets a CmDevice: a context opened on it (the one the
//     application sees as id->verbs), QP1 (uroce_create_gsi_qp), receive buffers, and a
//     cm::CmAgent, the sans-IO state machine of src/cm;
//   - one thread per process waits on every CmDevice's completion channel and the agents'
//     next deadline, feeds received MADs and timer ticks to the agents, sends what they
//     produce, and turns their events into rdma_cm events on the ids' channels;
//   - the application's calls (rdma_connect, rdma_accept, ...) drive the agents directly
//     under the same lock, and what rdma-core does in the application's thread (the QP
//     transitions when a REP arrives, rdma_get_cm_event's processing) happens here in the
//     application's thread too.
// One mutex (Runtime::mu) guards the agents, the ids and the devices; each channel has its
// own for its queue. Lock order: Runtime::mu, then Channel::mu.
#pragma once

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cm/cm_agent.hpp"
#include "cm/ip_cm_service.hpp"

namespace uroce::rdmacm {

using cm::Gid;

// What the kernel's rdma_cm uses on RoCE: CMA_IBOE_PACKET_LIFETIME, and rxe's CA ACK delay
// (the REP's Target ACK Delay; with 16 the local ACK timeout is cm_ack_timeout(15, 16) = 17).
inline constexpr uint8_t kPacketLifeTime = 16;
inline constexpr uint8_t kCaAckDelay = 15;

// With Runtime::mu held (one generator for the process): comm ID seeds, ports, PSNs.
uint32_t random_u32();
inline uint32_t random_psn() {
  return random_u32() & 0xFFFFFF;
}

struct IdPriv;

// An event as the application gets it, with the room its private data points into and what
// rdma_get_cm_event still has to do with it.
struct Event {
  rdma_cm_event ev{};       // first: the application's pointer is ours
  IdPriv* owner = nullptr;  // whose events_completed the ack advances
  std::array<uint8_t, 256> private_data{};
  bool conn_response = false;  // a REP: QP to RTR/RTS and the RTU when fetched
};

struct Channel {
  rdma_event_channel ch{};  // first; ch.fd: an eventfd, readable while events wait
  std::mutex mu;
  std::deque<Event*> queue;
  // rdma_destroy_event_channel ran. The struct itself stays allocated (destroy_channel): a
  // thread may still be in, or entering, rdma_get_cm_event on it.
  bool destroyed = false;
};

// Attributes a connection's QP transitions need, from the route and the REQ/REP.
struct ConnAttrs {
  uint32_t remote_qpn = 0;
  uint32_t rq_psn = 0;  // ours: the PSN we expect first (our REQ's or REP's Starting PSN)
  uint32_t sq_psn = 0;  // the peer's Starting PSN: the PSN we send first
  uint8_t path_mtu = IBV_MTU_1024;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t timeout = 0;  // local ACK timeout
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 7;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
};

enum class IdState : uint8_t {
  kIdle,
  kBound,          // rdma_bind_addr
  kAddrResolved,   // rdma_resolve_addr
  kRouteResolved,  // rdma_resolve_route
  kListening,
  kConnecting,       // REQ / SIDR_REQ sent
  kConnectResponse,  // REP received, no QP: waiting for rdma_establish
  kRequest,          // passive: REQ / SIDR_REQ received, not yet accepted
  kAccepting,        // passive: REP sent, waiting for the RTU
  kConnected,
  kDisconnected,
};

struct CmDevice;

struct IdPriv {
  rdma_cm_id id{};  // first: the application's pointer is ours
  IdState state = IdState::kIdle;
  bool sync = false;  // created without a channel: calls wait for their own events
  CmDevice* dev = nullptr;
  uint16_t port = 0;                      // bound / source port (host order)
  bool listen_all = false;                // listening on every device (wildcard address)
  std::vector<CmDevice*> listen_devices;  // where listen() registered the service ID
  uint64_t service_id = 0;
  cm::CmId cm_id = 0;  // the agent's connection (or SIDR request)
  bool has_cm = false;
  IdPriv* listener = nullptr;  // passive: the id that listened
  int sgid_index = 0;
  ibv_sa_path_rec path{};
  ConnAttrs conn;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t tos = 0;
  bool tos_set = false;
  uint8_t ack_timeout = 0;  // RDMA_OPTION_ID_ACK_TIMEOUT (0: from the REP / REQ)
  bool connect_error = false;
  std::optional<ibv_qp_init_attr> ep_qp_init_attr;  // rdma_create_ep on a passive endpoint
  std::vector<uint8_t> ep_connect_data;             // rdma_addrinfo's ai_connect
  uint32_t ud_qkey = RDMA_UDP_QKEY;
  // Listeners: CONNECT_REQUESTs queued and not yet fetched, up to `backlog` (ucma's rule;
  // a request beyond it is dropped unanswered and the peer resends).
  int backlog = 0;
  std::atomic<int> queued_requests{0};
  // Events given to the application and acked: rdma_destroy_id waits for them to match.
  uint64_t events_reported = 0;
  uint64_t events_completed = 0;
  std::condition_variable acked;
};

// QP1 and the CM of one uroce device.
struct CmDevice {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;  // the default PD (id->pd of every id on the device)
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp1 = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> recv_buffers;  // kRecvSlots x (GRH 40 + MAD 256)
  std::unique_ptr<cm::CmAgent> agent;
  std::vector<Gid> gids;  // the port's GID table
  uint64_t node_guid = 0;
  uint8_t active_mtu = IBV_MTU_1024;
  uint8_t max_initiator_depth = 0;
  uint8_t max_responder_resources = 0;
  std::map<Gid, ibv_ah*> ahs;                   // peer GID -> address handle for MADs to its QP1
  std::map<Gid, int> source_for_peer;           // peer GID -> our GID index it talks to
  std::unordered_map<cm::CmId, IdPriv*> conns;  // the agent's connections -> their ids
  // Service IDs steered to this process (uroce_cm_steer), with when each stops being steered
  // here: kNever while listened on; for a while after its last listener is gone (below).
  std::map<uint64_t, TimePoint> steered;
  // REQs and SIDR_REQs for a service between two listeners (see Runtime::park): handed to
  // the agent when someone listens again, or at `until`, when the agent refuses them.
  struct ParkedMad {
    TimePoint until{0};
    uint64_t service_id = 0;
    Gid from{};
    std::array<uint8_t, cm::kMadSize> mad{};
  };
  std::vector<ParkedMad> parked;
  uint64_t resends_seen = 0;        // the agent's resend count at the last explain_silence()
  std::set<Gid> silence_explained;  // peers whose silence has been explained once
  uint64_t sends_in_flight = 0;
};

// Everything of the process: the devices, the ids, the thread.
class Runtime {
 public:
  static Runtime& get();

  std::mutex mu;

  // With mu held. The CmDevice of the uroce device that owns `addr` (opened on first use);
  // nullptr and errno when no device has it. For a wildcard address: nullptr, errno 0.
  CmDevice* device_for(const sockaddr* addr);
  // With mu held: every uroce device, opened (listening on a wildcard address).
  std::vector<CmDevice*> all_devices();
  // With mu held: sends what the agent of `dev` produced and turns its events into rdma_cm
  // events; wakes the thread so it re-reads the deadline.
  void drain(CmDevice& dev);
  [[nodiscard]] static TimePoint now();

  // With mu held. Steers REQs for `service_id` to this process (0 or an errno value), and
  // stops after a grace period once nobody listens: programs that listen again on the port
  // they just closed (perftest -R does, and its client connects within a millisecond) then
  // find the steering still in place, and the agent answers REJ 8 in between, as a kernel's.
  static int steer_listen(CmDevice& dev, uint64_t service_id);
  static void steer_unlisten(CmDevice& dev, uint64_t service_id);
  static constexpr Nanos kSteerLinger = std::chrono::seconds(5);

  // Ports of the rdma_cm port spaces in use by this process (bind, listen, connect).
  std::map<std::pair<uint16_t, uint16_t>, IdPriv*> ports;  // (ps, port) -> binder
  // With mu held: a free ephemeral port of `ps`.
  uint16_t ephemeral_port(uint16_t ps);
  // With mu held: the index of our GID that talks to `peer` (the one its MADs arrived at, else
  // the first of its family).
  static int source_index(CmDevice& dev, const Gid& peer);
  // The address vector of `peer` from the GID index that talks to it (port 1, hop limit 64).
  static void ah_attr_for(CmDevice& dev, const Gid& peer, ibv_ah_attr& ah);

  std::vector<std::unique_ptr<CmDevice>> devices;

 private:
  Runtime();
  ~Runtime();
  CmDevice* open_device(ibv_device* d);
  // The CmDevice of uroce device `name`, opened on first use; nullptr (errno) when it cannot be.
  CmDevice* device_named(const std::string& name);
  void expire_steering(CmDevice& dev);
  // After a resend: says once per peer why a REQ may go unanswered when the network told the
  // device (ICMP port unreachable: nothing runs RoCE v2 there; host unreachable/prohibited).
  void explain_silence(CmDevice& dev);
  // A request for a service this process listened on a moment ago, and may listen on again
  // (perftest -R closes its first listener and listens again on the same port while its
  // client is already connecting), waits up to kParkHold for the new listener instead of
  // being refused at once; then it gets the REJ 8 it would have got. True when parked.
  bool park(CmDevice& dev, const Gid& from, std::span<const uint8_t> mad);
  static void replay_parked(CmDevice& dev, uint64_t service_id, bool all);
  static constexpr Nanos kParkHold = std::chrono::milliseconds(500);
  // The uroce devices' names, listed again by the thread every kDeviceListAge: listing asks
  // the kernel for every netdev and address, too slow for an rdma_listen that a client may
  // already be connecting to (perftest -R re-listens right before its client connects).
  std::vector<std::string> device_names();
  std::vector<std::string> names_;
  TimePoint names_at_{0};
  static constexpr Nanos kDeviceListAge = std::chrono::seconds(1);
  void run();
  void poll_device(CmDevice& dev);
  void on_event(CmDevice& dev, const cm::CmEvent& e);
  void on_request(CmDevice& dev, const cm::CmEvent& e);
  void send_mad(CmDevice& dev, const cm::OutMad& out);
  // At exit: what was posted on the device (QP1's MADs) goes out before the process ends.
  void flush_at_exit(CmDevice& dev);

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  bool stop_ = false;
  std::thread thread_;
};

inline IdPriv* priv_of(rdma_cm_id* id) {
  return reinterpret_cast<IdPriv*>(id);
}
inline Channel* channel_of(rdma_event_channel* c) {
  return reinterpret_cast<Channel*>(c);
}

// Queues `e` on the channel of its id (takes the channel lock); counts it as reported.
void push_event(IdPriv& to, Event* e);
// A new event for `id` of `type` and `status` (not queued).
Event* new_event(IdPriv& id, rdma_cm_event_type type, int status = 0);
// Removes the queued events of `id` that the application has not fetched (rdma_destroy_id).
// Returns the new ids of the CONNECT_REQUESTs among them, which nobody will ever see.
std::vector<IdPriv*> drop_queued_events(IdPriv& id);
// Waits until the application has acked every event `id` was given.
void wait_events_acked(IdPriv& id);
// Sync ids: waits for the id's next event; 0, or -1 with errno from its status.
int complete_sync(IdPriv& id);

// Sets the id's route: GIDs, P_Key and the path record RoCE builds locally (no subnet
// administrator; the kernel's cma_resolve_iboe_route).
void set_route(IdPriv& id, const Gid& sgid, const Gid& dgid, uint8_t mtu);

// Channels (event_channel.cpp).
Channel* create_channel();
void destroy_channel(Channel* ch);

// QP attributes of a connection in `state` (cm_qp.cpp: rdma_init_qp_attr's answer).
int qp_attr_for(IdPriv& id, ibv_qp_state state, ibv_qp_attr& attr, int& mask);
// Moves the id's QP to RTR then RTS (before the REP is sent, or when the REP arrives).
int move_qp_to_rts(IdPriv& id);
// Moves the id's QP to ERR (REJECTED, rdma_disconnect); no QP is fine.
void move_qp_to_error(IdPriv& id);

// Sets errno and returns -1, as librdmacm's calls do.
inline int fail(int err) {
  errno = err;
  return -1;
}

// Prints "uroce rdmacm: <message>" on stderr unless UROCE_QUIET=1.
void report(const std::string& message);

}  // namespace uroce::rdmacm
