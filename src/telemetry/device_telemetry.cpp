#include "telemetry/device_telemetry.hpp"

#include <time.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "telemetry/explain.hpp"

namespace uroce::telemetry {

namespace {

using transport::Counter;

uint64_t unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// Appends the aliases and tracker values to the engine's counters, in the order of
// published_counter_names().
std::vector<uint64_t> published_values(const transport::Counters& c, const device::IoCounters& io,
                                       uint64_t acks) {
  std::vector<uint64_t> v(c.values.begin(), c.values.end());
  v.push_back(c[Counter::kOutOfSeqRequest]);      // mlx5 out_of_sequence
  v.push_back(c[Counter::kRetryRnrExceededErr]);  // mlx5 rnr_nak_retry_err
  v.push_back(io.tx_drop_too_big);
  v.push_back(io.tx_drop_error);
  v.push_back(io.icmp_port_unreachable);
  v.push_back(io.icmp_unreachable);
  v.push_back(io.icmp_too_big);
  v.push_back(acks);
  return v;
}

// rcvd_rnr_err's position in published values (the engine's counters come first, in order).
constexpr size_t kRnrIndex = static_cast<size_t>(Counter::kRcvdRnrErr);

bool is_v4_mapped(const std::array<uint8_t, 16>& g) {
  for (size_t i = 0; i < 10; ++i) {
    if (g[i] != 0) return false;
  }
  return g[10] == 0xff && g[11] == 0xff;
}

// Devices of one process with the same name (tests open two "uroce0") get distinct labels,
// "uroce0", "uroce0.1", ..., so their segments and Prometheus series never collide.
std::mutex& labels_mu() {
  static std::mutex mu;
  return mu;
}

std::set<std::string>& labels_in_use() {
  static std::set<std::string> labels;
  return labels;
}

std::string claim_label(const std::string& name) {
  std::lock_guard lock(labels_mu());
  std::string label = name;
  for (int n = 1; labels_in_use().contains(label); ++n) label = name + "." + std::to_string(n);
  labels_in_use().insert(label);
  return label;
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%x", v);
  return b;
}

void release_label(const std::string& label) {
  std::lock_guard lock(labels_mu());
  labels_in_use().erase(label);
}

}  // namespace

const std::vector<std::string>& published_counter_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n(transport::kCounterNames.begin(), transport::kCounterNames.end());
    n.emplace_back("out_of_sequence");
    n.emplace_back("rnr_nak_retry_err");
    for (const char* io : {"tx_drop_too_big", "tx_drop_error", "icmp_port_unreachable",
                           "icmp_unreachable", "icmp_too_big"}) {
      n.emplace_back(io);
    }
    n.emplace_back("acks_rcvd");
    return n;
  }();
  return names;
}

DeviceTelemetry::DeviceTelemetry(TelemetryOptions options) : options_(std::move(options)) {
  options_.device = claim_label(options_.device);
  latest_.device = options_.device;
  latest_.pid = getpid();
  latest_.names = published_counter_names();
  latest_.values.assign(latest_.names.size(), 0);
}

std::shared_ptr<DeviceTelemetry> DeviceTelemetry::create(TelemetryOptions options,
                                                         std::string* error) {
  auto t = std::shared_ptr<DeviceTelemetry>(new DeviceTelemetry(std::move(options)));
  if (t->options_.shm) {
    // Without /dev/shm the device still works; `uroce stat` just cannot see it.
    std::string why;
    t->shm_ = ShmPublisher::create(t->options_.device, published_counter_names(), &why);
    if (t->shm_) {
      t->shm_->publish(t->latest_);
    } else {
      std::fprintf(stderr, "uroce: %s; `uroce stat` will not see %s\n", why.c_str(),
                   t->options_.device.c_str());
    }
  }
  if (!t->options_.capture.empty()) {
    t->capture_ = CaptureSink::open(t->options_.capture, error, t->options_.udp_port);
    if (!t->capture_) return nullptr;
  }
  if (!t->options_.metrics.empty()) {
    t->metrics_ = MetricsServer::get(t->options_.metrics, error);
    if (!t->metrics_) return nullptr;
    t->metrics_->add(t.get());
  }
  return t;
}

DeviceTelemetry::~DeviceTelemetry() {
  if (metrics_) metrics_->remove(this);
  if (capture_) capture_->flush();
  release_label(options_.device);
}

void DeviceTelemetry::on_tx(TimePoint now, std::span<const transport::TxSlot> sent) {
  // Packets built by an application thread's flush change counters outside a pass.
  tx_outside_pass_.store(true, std::memory_order_relaxed);
  if (capture_) capture_->write_sent(sent);
  if (!options_.measure_rtt) return;
  std::lock_guard lock(qp_mu_);
  for (const transport::TxSlot& s : sent) {
    rtt_.on_sent(now, s.meta, std::span<const uint8_t>(s.buf.data(), s.len));
  }
}

void DeviceTelemetry::on_rx(TimePoint now, std::span<const device::RxPacket> received) {
  if (capture_) capture_->write_received(received);
  if (!options_.measure_rtt) return;
  std::lock_guard lock(qp_mu_);
  for (const device::RxPacket& p : received) {
    rtt_.on_received(now, p.meta, std::span<const uint8_t>(p.buf.data(), p.len));
  }
}

void DeviceTelemetry::on_pass(TimePoint now, const device::Device& dev) {
  std::unique_lock lock(publish_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  ++passes_since_publish_;
  if (now - last_publish_ < kPublishInterval) return;
  last_publish_ = now;
  passes_since_publish_ = 0;
  lock.unlock();
  publish(dev);
}

void DeviceTelemetry::on_idle(TimePoint now, const device::Device& dev) {
  {
    std::lock_guard lock(publish_mu_);
    const bool sent = tx_outside_pass_.exchange(false, std::memory_order_relaxed);
    if (passes_since_publish_ == 0 && !sent) return;
    last_publish_ = now;
    passes_since_publish_ = 0;
  }
  publish(dev);
  if (capture_) capture_->flush();
}

void DeviceTelemetry::on_qp_created(uint32_t qpn) {
  std::lock_guard lock(qp_mu_);
  qps_[qpn];
}

void DeviceTelemetry::on_qp_modified(uint32_t qpn, const transport::QpAttr& attr, uint32_t mask) {
  if ((mask & transport::kQpAv) == 0 && (mask & transport::kQpDestQpn) == 0) return;
  std::lock_guard lock(qp_mu_);
  // RTR carries both the AV and the destination QPN (IBTA 11.2.4.2, the RESET->INIT->RTR
  // attribute table).
  rtt_.set_peer(qpn, attr.ah_attr.dgid, attr.dest_qp_num);
}

void DeviceTelemetry::on_qp_destroyed(uint32_t qpn) {
  std::lock_guard lock(qp_mu_);
  qps_.erase(qpn);
  rtt_.forget(qpn);
}

void DeviceTelemetry::on_completion_error(const device::Device& dev, const transport::Wc& wc) {
  const auto status = static_cast<uint8_t>(wc.status);
  bool first = false;
  {
    std::lock_guard lock(qp_mu_);
    QpInfo& info = qps_[wc.qp_num];
    if (wc.status == transport::WcStatus::kWrFlushErr) return;
    info.last_error_status = status;
    ++info.error_completions;
    first = info.explained.insert(status).second;
  }
  publish(dev);
  if (!first) return;
  const DeviceSnapshot snap = latest_snapshot();
  const QpSnapshot* qp = snap.qp(wc.qp_num);
  if (qp == nullptr) return;
  // Retry exceeded: the stall's cause, from the same evidence as the watchdog's warning.
  const std::string why =
      wc.status == transport::WcStatus::kRetryExcErr
          ? "retry_exceeded_err=" + std::to_string(snap.qp_value(*qp, "retry_exceeded_err")) +
                ": " + explain_stall(snap, *qp, evidence(dev, *qp))
          : explain_completion(status, snap, *qp) + mtu_hint(wc.status, evidence(dev, *qp));
  log_line("uroce: " + snap.device + " QP " + std::to_string(wc.qp_num) + ": " +
           std::string(wc_status_name(status)) + " (" + std::to_string(status) + "): " + why);
}

// A responder rejects a FIRST or MIDDLE packet whose payload is not its own path MTU
// (IBTA 9.7.5.1.1 / C9-91; rxe's check_length does the same), so two sides with different
// -m fail every multi-packet message with an invalid request.
std::string DeviceTelemetry::mtu_hint(transport::WcStatus status, const StallEvidence& ev) {
  if (status != transport::WcStatus::kRemInvReqErr) return {};
  return "; or the two sides use different path MTUs (ours is " + std::to_string(ev.path_mtu) +
         "): a QP rejects the packets of a multi-packet message that are not its own path MTU "
         "long — use the same -m on both sides, at most the smaller active MTU";
}

void DeviceTelemetry::log_line(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

StallEvidence DeviceTelemetry::evidence(const device::Device& dev, const QpSnapshot& qp) const {
  StallEvidence ev;
  transport::QpAttr attr;
  transport::QpInitAttr init;
  if (dev.query_qp(qp.qpn, attr, init)) {
    ev.local_gid = attr.ah_attr.sgid;
    ev.local_gid_index = attr.ah_attr.sgid_index;
    ev.path_mtu = transport::mtu_bytes(attr.path_mtu);
    const bool peer_v4 = is_v4_mapped(qp.remote_gid);
    for (const device::PortInfo& p : dev.ports()) {
      if (p.port_num != attr.ah_attr.port_num) continue;
      ev.netdev_mtu = p.netdev_mtu;
      for (size_t i = 0; i < p.gids.size() && !ev.peer_family_gid_index; ++i) {
        if (!p.gids[i].empty() && is_v4_mapped(p.gids[i].gid) == peer_v4) {
          ev.peer_family_gid_index = static_cast<uint32_t>(i);
        }
      }
    }
  }
  {
    std::lock_guard lock(qp_mu_);
    ev.sizes = rtt_.sizes(qp.qpn);
  }
  ev.path = dev.path_report(qp.remote_gid);
  ev.rnr_naks = rnr_naks_since_answer(qp);
  return ev;
}

void DeviceTelemetry::check_stalls(TimePoint now, const device::Device& dev,
                                   const DeviceSnapshot& snap) {
  if (options_.watchdog_s <= 0) return;
  const auto limit =
      std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(options_.watchdog_s));
  std::vector<uint32_t> stalled;
  {
    std::lock_guard lock(qp_mu_);
    for (const QpSnapshot& q : snap.qps) {
      if (q.qp_type != static_cast<uint8_t>(transport::QpType::kRc) ||
          q.state != static_cast<uint8_t>(transport::QpState::kRts)) {
        continue;
      }
      auto it = qps_.find(q.qpn);
      if (it == qps_.end()) continue;
      QpInfo& info = it->second;
      // Progress is an ACK (or READ response / atomic ACK) for our requests, as the
      // round-trip tracker counts them; without the tracker, any packet from the peer.
      // Unanswered work shows as ACK timeouts, RNR NAKs or sequence NAKs since then.
      const uint64_t answers =
          options_.measure_rtt ? snap.qp_value(q, "acks_rcvd") : snap.qp_value(q, "rcvd_pkts");
      const uint64_t rnr = snap.qp_value(q, "rcvd_rnr_err");
      const uint64_t pending =
          snap.qp_value(q, "local_ack_timeout_err") + rnr + snap.qp_value(q, "rcvd_seq_err");
      if (answers != info.seen_answers || pending < info.seen_pending) {
        // An answer: a new stall (if any) starts from here and may warn again.
        info.seen_answers = answers;
        info.seen_pending = pending;
        info.seen_rnr = rnr;
        info.stall_since.reset();
        info.warned = false;
        continue;
      }
      if (pending == info.seen_pending) continue;  // nothing outstanding went unanswered
      if (!info.stall_since) info.stall_since = now;
      if (!info.warned && now - *info.stall_since >= limit) {
        info.warned = true;
        stalled.push_back(q.qpn);
      }
    }
  }
  for (uint32_t qpn : stalled) {
    const QpSnapshot* q = snap.qp(qpn);
    if (q == nullptr) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", options_.watchdog_s);
    log_line("uroce: QP 0x" + hex(qpn) + " to " + gid_address(q->remote_gid) +
             ": no response for " + seconds + " s — " + explain_stall(snap, *q, evidence(dev, *q)));
  }
}

std::string DeviceTelemetry::diagnose(const device::Device& dev, uint32_t qpn) const {
  const DeviceSnapshot snap = latest_snapshot();
  const QpSnapshot* q = snap.qp(qpn);
  if (q == nullptr) return {};
  return explain_stall(snap, *q, evidence(dev, *q));
}

uint64_t DeviceTelemetry::rnr_naks_since_answer(const QpSnapshot& q) const {
  const uint64_t rnr = q.values.size() > kRnrIndex ? q.values[kRnrIndex] : 0;
  std::lock_guard lock(qp_mu_);
  auto it = qps_.find(q.qpn);
  return it == qps_.end() || rnr < it->second.seen_rnr ? 0 : rnr - it->second.seen_rnr;
}

DeviceSnapshot DeviceTelemetry::build(const device::Device& dev) {
  DeviceSnapshot snap;
  snap.device = options_.device;
  snap.pid = getpid();
  snap.names = published_counter_names();
  std::map<uint32_t, QpInfo> qps;
  {
    std::lock_guard lock(qp_mu_);
    qps = qps_;
  }
  uint64_t all_acks = 0;
  for (const auto& [qpn, info] : qps) {
    std::optional<transport::Counters> c = dev.qp_counters(qpn);
    if (!c) continue;
    QpSnapshot q;
    q.qpn = qpn;
    transport::QpAttr attr;
    transport::QpInitAttr init;
    if (dev.query_qp(qpn, attr, init)) {
      q.remote_qpn = attr.dest_qp_num;
      q.remote_gid = attr.ah_attr.dgid;
      q.state = static_cast<uint8_t>(attr.qp_state);
      q.qp_type = static_cast<uint8_t>(init.qp_type);
    }
    q.last_error_status = info.last_error_status;
    q.error_completions = info.error_completions;
    uint64_t acks = 0;
    {
      std::lock_guard lock(qp_mu_);
      if (const RttHistogram* h = rtt_.histogram(qpn)) q.rtt = *h;
      acks = rtt_.acks_received(qpn);
    }
    all_acks += acks;
    q.values = published_values(*c, device::IoCounters{}, acks);
    snap.qps.push_back(std::move(q));
  }
  snap.values = published_values(dev.counters(), dev.io_counters(), all_acks);
  snap.published_unix_ns = unix_ns();
  return snap;
}

void DeviceTelemetry::publish(const device::Device& dev) {
  DeviceSnapshot snap = build(dev);
  check_stalls(device::Device::now(), dev, snap);
  std::lock_guard lock(latest_mu_);
  // ACKs of destroyed QPs stay in the device total.
  if (!latest_.values.empty()) {
    const size_t acks = snap.names.size() - 1;
    snap.values[acks] = std::max(snap.values[acks], latest_.values[acks]);
  }
  latest_ = std::move(snap);
  if (shm_) shm_->publish(latest_);
}

DeviceSnapshot DeviceTelemetry::latest_snapshot() const {
  std::lock_guard lock(latest_mu_);
  return latest_;
}

const std::string& DeviceTelemetry::shm_path() const {
  static const std::string kNone;
  return shm_ ? shm_->path() : kNone;
}

double watchdog_seconds_from_env(std::string* error) {
  constexpr double kDefault = 5;
  const char* v = std::getenv("UROCE_WATCHDOG");
  if (v == nullptr || *v == '\0') return kDefault;
  const std::string text(v);
  if (text == "0" || text == "off") return 0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0) || s > 86400) {
    if (error != nullptr) {
      *error = "UROCE_WATCHDOG=" + text +
               " is not a number of seconds (0 or off: no stall warning); using 5";
    }
    return kDefault;
  }
  return s;
}

std::string diagnose_qp(const device::Device& dev, uint32_t qpn) {
  const auto* t = dynamic_cast<const DeviceTelemetry*>(dev.config().observer.get());
  return t == nullptr ? std::string() : t->diagnose(dev, qpn);
}

std::shared_ptr<device::DeviceObserver> observer_from_env(const std::string& device,
                                                          std::string* error, uint16_t udp_port) {
  TelemetryOptions o;
  o.device = device;
  o.udp_port = udp_port;
  const char* stat = std::getenv("UROCE_STAT");
  o.shm = stat == nullptr || std::string(stat) != "0";
  if (const char* m = std::getenv("UROCE_METRICS")) o.metrics = m;
  if (const char* c = std::getenv("UROCE_CAPTURE")) o.capture = c;
  std::string watchdog_error;
  o.watchdog_s = watchdog_seconds_from_env(&watchdog_error);
  if (!watchdog_error.empty()) std::fprintf(stderr, "uroce: %s\n", watchdog_error.c_str());
  if (!o.shm && o.metrics.empty() && o.capture.empty() && o.watchdog_s <= 0) return nullptr;
  return DeviceTelemetry::create(std::move(o), error);
}

}  // namespace uroce::telemetry
