// Event channels and events: rdma_create_event_channel, rdma_get_cm_event, rdma_ack_cm_event,
// rdma_migrate_id, rdma_event_str.
//
// A channel's fd is an eventfd that is readable exactly while events wait in its queue, so
// programs can poll it, or make it non-blocking, as they do the kernel's rdma_cm fd.
// rdma_destroy_id waits until every event it was given is acked, as rdma-core's does.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "rdmacm/state.hpp"

namespace uroce::rdmacm {
namespace {

// Guards every id's events_reported / events_completed. Taken after a channel's lock.
std::mutex g_count_mu;

// With the channel's lock held (every write happens under it too): the fd stops being
// readable. Never blocks, whatever the application made of the fd's flags.
void drain_fd(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return;
  eventfd_t v = 0;
  eventfd_read(fd, &v);
}

// What rdma-core's rdma_get_cm_event does before handing out a REP: with a QP, move it to
// RTR and RTS and send the RTU (ESTABLISHED; CONNECT_ERROR when the QP refuses), without
// one report CONNECT_RESPONSE and wait for rdma_establish.
void process_conn_response(Event& e) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.mu);
  IdPriv& id = *e.owner;
  if (id.id.qp == nullptr) {
    id.state = IdState::kConnectResponse;
    return;
  }
  if (move_qp_to_rts(id) != 0) {
    e.ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
    e.ev.status = -errno;
    id.connect_error = true;
    move_qp_to_error(id);
    if (id.has_cm) id.dev->agent->destroy(Runtime::now(), id.cm_id);
    rt.drain(*id.dev);
    return;
  }
  e.ev.event = RDMA_CM_EVENT_ESTABLISHED;
  id.state = IdState::kConnected;
  if (id.has_cm) (void)id.dev->agent->establish(Runtime::now(), id.cm_id);
  rt.drain(*id.dev);
}

// rdma_get_cm_event on a destroyed channel (destroy_channel): blocks as rdma-core's read() of
// the closed fd does for a thread already in it. A signal handler ends it with EINTR.
int block_on_destroyed() {
  for (;;) {
    if (poll(nullptr, 0, -1) < 0 && errno == EINTR) return fail(EINTR);
  }
}

}  // namespace

Channel* create_channel() {
  auto* ch = new Channel;
  ch->ch.fd = eventfd(0, EFD_CLOEXEC);
  if (ch->ch.fd < 0) {
    const int err = errno;
    delete ch;
    errno = err;
    return nullptr;
  }
  return ch;
}

// Programs destroy a channel while another thread of theirs still waits on it: rping's main
// thread destroys its channel after rdma_destroy_id, whose wait for the last event's ack
// returns while the CM thread, having acked, goes back into rdma_get_cm_event. With rdma-core
// that thread sits in read() on the fd, which a close() from another thread does not wake:
// it stays blocked until the program exits from main (rping's CM thread, woken with an error,
// would exit(255) instead). Ours must not touch freed memory either. So the Channel is kept
// (about 100 bytes, reachable, per channel destroyed) and marked destroyed, and a thread
// waiting on it, or coming to wait on it, stays blocked (block_on_destroyed).
void destroy_channel(Channel* ch) {
  static std::mutex graveyard_mu;
  static std::vector<Channel*> graveyard;
  {
    std::lock_guard lock(ch->mu);
    for (Event* e : ch->queue) delete e;
    ch->queue.clear();
    ch->destroyed = true;
  }
  close(ch->ch.fd);
  std::lock_guard lock(graveyard_mu);
  graveyard.push_back(ch);
}

Event* new_event(IdPriv& id, rdma_cm_event_type type, int status) {
  auto* e = new Event;
  e->owner = &id;
  e->ev.id = &id.id;
  e->ev.event = type;
  e->ev.status = status;
  return e;
}

void push_event(IdPriv& to, Event* e) {
  Channel* ch = channel_of(to.id.channel);
  std::lock_guard lock(ch->mu);
  ch->queue.push_back(e);
  eventfd_write(ch->ch.fd, 1);
}

std::vector<IdPriv*> drop_queued_events(IdPriv& id) {
  std::vector<IdPriv*> orphans;
  Channel* ch = channel_of(id.id.channel);
  if (ch == nullptr) return orphans;
  std::lock_guard lock(ch->mu);
  std::erase_if(ch->queue, [&](Event* e) {
    if (e->owner != &id && e->ev.id != &id.id) return false;
    if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->ev.id != &id.id) {
      orphans.push_back(priv_of(e->ev.id));
    }
    delete e;
    return true;
  });
  if (ch->queue.empty()) drain_fd(ch->ch.fd);
  return orphans;
}

void wait_events_acked(IdPriv& id) {
  std::unique_lock lock(g_count_mu);
  id.acked.wait(lock, [&] { return id.events_completed >= id.events_reported; });
}

int complete_sync(IdPriv& id) {
  if (!id.sync) return 0;
  if (id.id.event != nullptr) {
    rdma_ack_cm_event(id.id.event);
    id.id.event = nullptr;
  }
  if (rdma_get_cm_event(id.id.channel, &id.id.event) != 0) return -1;
  const rdma_cm_event& ev = *id.id.event;
  if (ev.status == 0) return 0;
  if (ev.event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
  return fail(ev.status < 0 ? -ev.status : ev.status);
}

}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

extern "C" {

rdma_event_channel* rdma_create_event_channel() {
  Channel* ch = create_channel();
  return ch == nullptr ? nullptr : &ch->ch;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel != nullptr) destroy_channel(channel_of(channel));
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr || event == nullptr) return fail(EINVAL);
  Channel* ch = channel_of(channel);
  for (;;) {
    Event* e = nullptr;
    bool destroyed = false;
    {
      std::lock_guard lock(ch->mu);
      destroyed = ch->destroyed;
      if (!destroyed && !ch->queue.empty()) {
        e = ch->queue.front();
        ch->queue.pop_front();
        if (ch->queue.empty()) drain_fd(ch->ch.fd);
        if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) --e->owner->queued_requests;
        std::lock_guard count(g_count_mu);
        ++e->owner->events_reported;
      }
    }
    if (destroyed) return block_on_destroyed();  // not holding the lock: nothing waits on it
    if (e != nullptr) {
      if (e->conn_response) process_conn_response(*e);
      *event = &e->ev;
      return 0;
    }
    if ((fcntl(ch->ch.fd, F_GETFL) & O_NONBLOCK) != 0) return fail(EAGAIN);
    pollfd p{ch->ch.fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno == EINTR) return fail(EINTR);
  }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return fail(EINVAL);
  auto* e = reinterpret_cast<Event*>(event);
  {
    std::lock_guard lock(g_count_mu);
    ++e->owner->events_completed;
    e->owner->acked.notify_all();
  }
  delete e;
  return 0;
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (id == nullptr) return fail(EINVAL);
  IdPriv& p = *priv_of(id);
  if (p.sync && channel == nullptr) return fail(EINVAL);
  Channel* to = channel == nullptr ? create_channel() : channel_of(channel);
  if (to == nullptr) return -1;
  Channel* from = channel_of(id->channel);
  // Events not yet fetched follow the id, as the kernel moves them.
  {
    std::scoped_lock lock(from->mu, to->mu);
    for (auto it = from->queue.begin(); it != from->queue.end();) {
      if ((*it)->owner == &p) {
        to->queue.push_back(*it);
        eventfd_write(to->ch.fd, 1);
        it = from->queue.erase(it);
      } else {
        ++it;
      }
    }
    if (from->queue.empty()) drain_fd(from->ch.fd);
  }
  if (p.sync) {
    if (id->event != nullptr) {
      rdma_ack_cm_event(id->event);
      id->event = nullptr;
    }
    destroy_channel(from);
  }
  p.sync = channel == nullptr;
  id->channel = &to->ch;
  wait_events_acked(p);
  return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

}  // extern "C"
