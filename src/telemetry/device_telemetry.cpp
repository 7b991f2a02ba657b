#include "telemetry/device_telemetry.hpp"

#include "config/host_options.hpp"

#include <time.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "telemetry/explain.hpp"
#include "telemetry/wall_clock.hpp"

namespace uroce::telemetry {

namespace {

using transport::Counter;

// The engine's counters, then the aliases and tracker values, in the order of
// published_counter_names(), into `v` (its storage reused: publish runs every few ms).
void fill_published_values(std::vector<uint64_t>& v, const transport::Counters& c,
                           const device::IoCounters& io, uint64_t acks) {
  v.assign(c.values.begin(), c.values.end());
  v.push_back(c[Counter::kOutOfSeqRequest]);      // mlx5 out_of_sequence
  v.push_back(c[Counter::kRetryRnrExceededErr]);  // mlx5 rnr_nak_retry_err
  v.push_back(io.tx_drop_too_big);
  v.push_back(io.tx_drop_error);
  v.push_back(io.icmp_port_unreachable);
  v.push_back(io.icmp_unreachable);
  v.push_back(io.icmp_too_big);
  v.push_back(io.rx_discards);
  v.push_back(io.rx_misdelivered);
  v.push_back(io.rx_no_owner);
  v.push_back(io.rx_ring_datagrams);
  v.push_back(io.rx_ring_marker_timeouts);
  v.push_back(io.rx_ring_given_back);
  for (const uint64_t x :
       {io.impair_dropped, io.impair_duplicated, io.impair_corrupted, io.impair_ce_marked,
        io.impair_delayed, io.impair_reordered, io.impair_overflow, io.impair_queue_dropped,
        io.impair_queue_marked, io.impair_queue_max_bytes}) {
    v.push_back(x);
  }
  v.push_back(acks);
}

std::vector<uint64_t> published_values(const transport::Counters& c, const device::IoCounters& io,
                                       uint64_t acks) {
  std::vector<uint64_t> v;
  fill_published_values(v, c, io, acks);
  return v;
}

// Devices of one process with the same name (tests open two "uroce_lo") get distinct labels,
// "uroce_lo", "uroce_lo.1", ..., so their segments and Prometheus series never collide.
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

void release_label(const std::string& label) {
  std::lock_guard lock(labels_mu());
  labels_in_use().erase(label);
}

}  // namespace

const std::vector<std::string>& published_counter_names() {
  // Never destroyed: a program that exits without closing its device (ibverbs programs on an
  // error path) runs static destructors while the progress thread may still publish.
  static const std::vector<std::string>* const names = [] {
    auto* n = new std::vector<std::string>(transport::kCounterNames.begin(),
                                           transport::kCounterNames.end());
    n->emplace_back("out_of_sequence");
    n->emplace_back("rnr_nak_retry_err");
    for (const char* io :
         {"tx_drop_too_big", "tx_drop_error", "icmp_port_unreachable", "icmp_unreachable",
          "icmp_too_big", "rx_discards", "rx_misdelivered", "rx_no_owner", "rx_ring_datagrams",
          "rx_ring_marker_timeouts", "rx_ring_given_back"}) {
      n->emplace_back(io);
    }
    for (const char* im :
         {"impair_dropped", "impair_duplicated", "impair_corrupted", "impair_ce_marked",
          "impair_delayed", "impair_reordered", "impair_overflow", "impair_queue_dropped",
          "impair_queue_marked", "impair_queue_max_bytes"}) {
      n->emplace_back(im);
    }
    n->emplace_back("acks_rcvd");
    return n;
  }();
  return *names;
}

size_t acks_rcvd_index() {
  static const size_t index = published_counter_names().size() - 1;
  return index;
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
    t->metrics_ = MetricsServer::get(t->options_.metrics, {t.get()}, error);
    if (!t->metrics_) return nullptr;
  }
  return t;
}

DeviceTelemetry::~DeviceTelemetry() {
  if (metrics_) metrics_->remove(this);
  if (capture_) capture_->flush();
  release_label(options_.device);
}

void DeviceTelemetry::on_close(const device::Device& dev) {
  publish(dev);
  if (capture_) capture_->flush();
}

void DeviceTelemetry::on_tx(TimePoint now, std::span<const transport::TxSlot> sent) {
  // Packets built by an application thread's flush change counters outside a pass.
  note_activity();
  if (capture_) {
    capture_->write_sent(sent);
    capture_unflushed_.store(true, std::memory_order_relaxed);
  }
  if (!options_.measure_rtt) return;
  std::lock_guard lock(qp_mu_);
  for (const transport::TxSlot& s : sent) {
    rtt_.on_sent(now, s.meta, std::span<const uint8_t>(s.buf.data(), s.len));
  }
}

void DeviceTelemetry::on_rx(TimePoint now, std::span<const device::RxPacket> received) {
  if (capture_) {
    capture_->write_received(received);
    capture_unflushed_.store(true, std::memory_order_relaxed);
  }
  if (!options_.measure_rtt) return;
  std::lock_guard lock(qp_mu_);
  for (const device::RxPacket& p : received) {
    rtt_.on_received(now, p.meta, p.bytes());
  }
}

void DeviceTelemetry::mark_published(TimePoint now) {
  last_publish_ = now;
  last_publish_ns_.store(now.count(), std::memory_order_relaxed);
  unpublished_.store(false, std::memory_order_relaxed);
}

void DeviceTelemetry::on_pass(TimePoint now, const device::Device& dev) {
  // A busy-polling program makes a pass every microsecond or two: most only note that they
  // happened, with no lock (a trylock each was a fifth of the device's lock operations).
  note_activity();
  if (now - TimePoint(Nanos(last_publish_ns_.load(std::memory_order_relaxed))) <
      publish_interval()) {
    return;
  }
  std::unique_lock lock(publish_mu_, std::try_to_lock);
  if (!lock.owns_lock() || now - last_publish_ < publish_interval()) return;
  mark_published(now);
  lock.unlock();
  publish(dev);
}

TimePoint DeviceTelemetry::on_idle(TimePoint now, const device::Device& dev) {
  // The capture is complete on disk whenever the device rests (a reader may be waiting).
  if (capture_ && capture_unflushed_.exchange(false, std::memory_order_relaxed)) {
    capture_->flush();
  }
  if (!unpublished_.load(std::memory_order_relaxed)) return kNever;
  // Not due yet, as most idles of a receiver between the sender's bursts: no lock either.
  const TimePoint last(Nanos(last_publish_ns_.load(std::memory_order_relaxed)));
  if (now - last < publish_interval()) return last + publish_interval();
  {
    std::lock_guard lock(publish_mu_);
    if (!unpublished_.load(std::memory_order_relaxed)) return kNever;
    // A receiving progress thread goes idle between the sender's bursts, thousands of
    // times a second; what is pending waits for the interval, and the thread wakes for it.
    const Nanos interval = publish_interval();
    if (now - last_publish_ < interval) return last_publish_ + interval;
    mark_published(now);
  }
  publish(dev);
  return kNever;
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

void DeviceTelemetry::log_line(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void DeviceTelemetry::build(const device::Device& dev, DeviceSnapshot& snap) {
  // Into the storage of the snapshot replaced last: with 64 QPs a snapshot built afresh (a
  // map of QPs copied with their sets, a vector per QP) cost ~35 us, 5-10 % of a receiving
  // progress thread that publishes every few ms.
  snap.device = options_.device;
  snap.pid = getpid();
  if (snap.names.empty()) snap.names = published_counter_names();
  rows_.clear();
  {
    std::lock_guard lock(qp_mu_);
    for (const auto& [qpn, info] : qps_) {
      rows_.push_back({qpn, info.last_error_status, info.error_completions});
    }
  }
  uint64_t all_acks = 0;
  size_t n = 0;
  for (const QpRow& row : rows_) {
    std::optional<transport::Counters> c = dev.qp_counters(row.qpn);
    if (!c) continue;
    if (n == snap.qps.size()) snap.qps.emplace_back();
    QpSnapshot& q = snap.qps[n++];
    std::vector<uint64_t> values = std::move(q.values);  // storage kept, every field reset
    q = QpSnapshot{};
    q.values = std::move(values);
    q.qpn = row.qpn;
    transport::QpAttr attr;
    transport::QpInitAttr init;
    if (dev.query_qp(row.qpn, attr, init)) {
      q.remote_qpn = attr.dest_qp_num;
      q.remote_gid = attr.ah_attr.dgid;
      q.state = static_cast<uint8_t>(attr.qp_state);
      q.qp_type = static_cast<uint8_t>(init.qp_type);
      q.cc = attr.cc;
    }
    q.last_error_status = row.last_error_status;
    q.error_completions = row.error_completions;
    uint64_t acks = 0;
    {
      std::lock_guard lock(qp_mu_);
      if (const RttHistogram* h = rtt_.histogram(row.qpn)) q.rtt = *h;
      acks = rtt_.acks_received(row.qpn);
    }
    all_acks += acks;
    fill_published_values(q.values, *c, device::IoCounters{}, acks);
  }
  snap.qps.resize(n);
  fill_published_values(snap.values, dev.counters(), dev.io_counters(), all_acks);
  snap.published_unix_ns = unix_ns();
}

void DeviceTelemetry::publish(const device::Device& dev) {
  // One publisher at a time, so the snapshot stored last is the one built last. Otherwise the
  // progress thread's pass could build before poll_cq's error completion set the QP's status
  // and store after it: `uroce stat` would show the QP in ERR with no error line.
  std::lock_guard order(build_mu_);
  const TimePoint start = device::Device::now();
  build(dev, spare_);
  check_stalls(device::Device::now(), dev, spare_);
  std::lock_guard lock(latest_mu_);
  // ACKs of destroyed QPs stay in the device total.
  if (!latest_.values.empty()) {
    const size_t acks = acks_rcvd_index();
    spare_.values[acks] = std::max(spare_.values[acks], latest_.values[acks]);
  }
  std::swap(latest_, spare_);  // the old one's storage is the next build's
  if (shm_) shm_->publish(latest_);
  // A moving average: one publish slowed by a preemption does not stretch the interval.
  const Nanos::rep cost = (device::Device::now() - start).count();
  const Nanos::rep avg = cost_ns_.load(std::memory_order_relaxed);
  cost_ns_.store(avg + (cost - avg) / 8, std::memory_order_relaxed);
}

Nanos DeviceTelemetry::publish_interval() const {
  // Reading every QP's counters costs ~1 us per QP once they are out of the cache: 1024 QPs
  // published every 5 ms took a fifth of the publishing thread. The interval grows so that
  // publishing takes about 1 % of it, up to kMaxPublishInterval (`uroce stat` stays fresh).
  return std::clamp(Nanos(cost_ns_.load(std::memory_order_relaxed) * 100), kPublishInterval,
                    kMaxPublishInterval);
}

DeviceSnapshot DeviceTelemetry::latest_snapshot() const {
  std::lock_guard lock(latest_mu_);
  return latest_;
}

const std::string& DeviceTelemetry::shm_path() const {
  static const std::string kNone;
  return shm_ ? shm_->path() : kNone;
}

std::vector<uint64_t> device_counter_values(const device::Device& dev) {
  uint64_t acks = 0;
  if (const auto* t = dynamic_cast<const DeviceTelemetry*>(dev.config().observer.get())) {
    const DeviceSnapshot snap = t->latest_snapshot();
    if (!snap.values.empty()) acks = snap.values.back();
  }
  return published_values(dev.counters(), dev.io_counters(), acks);
}

std::shared_ptr<device::DeviceObserver> observer_from_env(const std::string& device,
                                                          std::string* error, uint16_t udp_port) {
  TelemetryOptions o;
  o.device = device;
  o.udp_port = udp_port;
  std::string bad;
  o.shm = config::env_flag("UROCE_STAT", true, bad);
  if (!bad.empty()) {
    if (error != nullptr) *error = bad;
    return nullptr;
  }
  if (const char* m = std::getenv("UROCE_METRICS")) o.metrics = m;
  if (const char* c = std::getenv("UROCE_CAPTURE")) o.capture = c;
  std::string watchdog_error;
  o.watchdog_s = watchdog_seconds_from_env(&watchdog_error);
  if (!watchdog_error.empty()) {
    if (error != nullptr) *error = watchdog_error;
    return nullptr;
  }
  if (!o.shm && o.metrics.empty() && o.capture.empty() && o.watchdog_s <= 0) return nullptr;
  return DeviceTelemetry::create(std::move(o), error);
}

}  // namespace uroce::telemetry
