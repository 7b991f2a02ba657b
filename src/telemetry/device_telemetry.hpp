// DeviceTelemetry: the device::DeviceObserver that makes a device visible from outside.
//
//   * publishes a DeviceSnapshot (device counters, per-QP counters, ACK round-trip
//     histograms, QP state and last error) every kPublishInterval while the device is busy
//     (up to 50 ms with many QPs, so that publishing takes about 1 % of the thread) and
//     once more when it goes idle (that too at most once per interval) — to the
//     shared-memory segment `uroce stat` reads, and to the Prometheus endpoint when one is
//     configured;
//   * measures ACK round trips per QP from the packets sent and received (RttTracker);
//   * writes every packet sent and received to a pcap file when asked;
//   * logs one explained line per QP and error status when poll_cq returns an error
//     completion (explain.hpp);
//   * the stall watchdog: at publish time (never per packet), an RC QP whose requests have
//     timed out with nothing received from its peer for `watchdog_s` gets one explained
//     warning, once per stall: "uroce: QP 0x11 to 10.0.0.2: no response for 5 s — <cause>".
//     Programs that retry forever (retry_cnt 7, as perftest and ibv_*_pingpong) learn why.
// The engine is read only through Device::counters()/qp_counters()/query_qp() on the
// publishing thread, every few ms; readers (stat, scrapes) never touch the engine.
//
//   auto t = DeviceTelemetry::create({.device = "uroce_eth0", .metrics = "127.0.0.1:9464"}, &err);
//   device_config.observer = t;
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "device/device.hpp"
#include "device/observer.hpp"
#include "telemetry/capture_sink.hpp"
#include "telemetry/explain.hpp"
#include "telemetry/metrics_server.hpp"
#include "telemetry/rtt_tracker.hpp"
#include "telemetry/shm_segment.hpp"

namespace uroce::telemetry {

struct TelemetryOptions {
  // The device name is the label of its segment and series ("uroce_eth0"); a second device
  // of this name in the process gets "uroce_eth0.1".
  std::string device = "uroce_lo";
  bool shm = true;           // publish for `uroce stat`
  std::string metrics;       // ADDR:PORT of the Prometheus endpoint; empty: none
  std::string capture;       // pcap path; empty: none
  uint16_t udp_port = 4791;  // the device's real UDP port, written into captures
  bool measure_rtt = true;   // parse sent/received BTHs for round trips (cheap, per packet)
  double watchdog_s = 5;     // stall warning after this long; 0: off (UROCE_WATCHDOG)
  std::function<void(const std::string&)> log;  // error-completion lines; empty: stderr
};

// UROCE_WATCHDOG: unset -> 5 s; "0" or "off" -> off; a positive number -> seconds. Anything
// else sets *error (the device does not open). The one place the variable is read.
[[nodiscard]] double watchdog_seconds_from_env(std::string* error);

// Counter names published: the engine's, then mlx5 aliases of rxe counters that count the
// same event under another name (out_of_sequence = out_of_seq_request, rnr_nak_retry_err =
// retry_rnr_exceeded_err), then the UDP driver's drops and ICMP errors (tx_drop_too_big,
// tx_drop_error, icmp_port_unreachable, icmp_unreachable, icmp_too_big, rx_discards: what
// the kernel dropped at the device's sockets, rx_misdelivered and rx_no_owner: what a shared
// port's steering handed to the wrong process; rx_ring_datagrams,
// rx_ring_marker_timeouts and rx_ring_given_back: UROCE_RX_RING's; device-wide, 0 per QP), then
// what UROCE_IMPAIR did (impair_dropped, impair_duplicated, impair_corrupted, impair_ce_marked,
// impair_delayed, impair_reordered, impair_overflow, impair_queue_dropped, impair_queue_marked,
// impair_queue_max_bytes; device-wide), then acks_rcvd (ACKs seen by the
// round-trip tracker, always last).
[[nodiscard]] const std::vector<std::string>& published_counter_names();
// acks_rcvd's position in published values (the last).
[[nodiscard]] size_t acks_rcvd_index();

// The device's counters now, indexed like published_counter_names(): for a program's own
// report (`uroce perf --json`). acks_rcvd is the device's DeviceTelemetry's as of its last
// publish, 0 without one.
[[nodiscard]] std::vector<uint64_t> device_counter_values(const device::Device& dev);

class DeviceTelemetry final : public device::DeviceObserver, public SnapshotSource {
 public:
  static std::shared_ptr<DeviceTelemetry> create(TelemetryOptions options, std::string* error);
  ~DeviceTelemetry() override;

  void on_tx(TimePoint now, std::span<const transport::TxSlot> sent) override;
  void on_rx(TimePoint now, std::span<const device::RxPacket> received) override;
  void on_pass(TimePoint now, const device::Device& dev) override;
  TimePoint on_idle(TimePoint now, const device::Device& dev) override;
  // Publishes the final counters: `uroce exec` reads a closed device's segment once more
  // through the file it holds open (telemetry::SegmentFollower).
  void on_close(const device::Device& dev) override;
  void on_qp_created(uint32_t qpn) override;
  void on_qp_modified(uint32_t qpn, const transport::QpAttr& attr, uint32_t mask) override;
  void on_qp_destroyed(uint32_t qpn) override;
  void on_completion_error(const device::Device& dev, const transport::Wc& wc) override;

  [[nodiscard]] DeviceSnapshot latest_snapshot() const override;
  // Builds and publishes a snapshot now (tests, and on_idle).
  void publish(const device::Device& dev);

  [[nodiscard]] const std::string& shm_path() const;
  [[nodiscard]] uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  [[nodiscard]] const CaptureSink* capture() const { return capture_.get(); }

  // Why QP `qpn` gets no answer (explain_stall), from the latest snapshot and the device;
  // empty if the QP is unknown.
  [[nodiscard]] std::string diagnose(const device::Device& dev, uint32_t qpn) const;

 private:
  struct QpInfo {
    uint8_t last_error_status = 0;
    uint64_t error_completions = 0;
    std::set<uint8_t> explained;  // statuses already logged for this QP
    // Watchdog, as of the last answer: answers (acks_rcvd), unanswered work (ACK timeouts
    // + RNR NAKs + sequence NAKs) and RNR NAKs.
    uint64_t seen_answers = 0;
    uint64_t seen_pending = 0;
    uint64_t seen_rnr = 0;
    std::optional<TimePoint> stall_since;  // first timeout after the last answer
    // Packets to the peer the network or the local stack refused as too big (PathReport::
    // too_big) when the stall began: more since is certain evidence, worth a warning at once.
    uint64_t too_big_at_stall = 0;
    bool warned = false;
  };

  explicit DeviceTelemetry(TelemetryOptions options);
  void build(const device::Device& dev, DeviceSnapshot& snap);
  StallEvidence evidence(const device::Device& dev, const QpSnapshot& qp) const;
  void check_stalls(TimePoint now, const device::Device& dev, const DeviceSnapshot& snap);
  void log_line(const std::string& line) const;
  uint64_t rnr_naks_since_answer(const QpSnapshot& q) const;
  static std::string mtu_hint(transport::WcStatus status, const StallEvidence& ev);

  TelemetryOptions options_;
  std::unique_ptr<ShmPublisher> shm_;
  std::shared_ptr<MetricsServer> metrics_;
  std::shared_ptr<CaptureSink> capture_;

  mutable std::mutex qp_mu_;  // qps_, rtt_
  std::map<uint32_t, QpInfo> qps_;
  RttTracker rtt_;

  std::mutex publish_mu_;
  TimePoint last_publish_{};  // under publish_mu_
  // last_publish_ for the passes to read without the lock: most passes find no publish due.
  std::atomic<TimePoint::rep> last_publish_ns_{0};
  // A pass, or packets sent outside one, since the last publish: what an idle device's
  // final publish waits for.
  std::atomic<bool> unpublished_{false};
  void note_activity() {
    if (!unpublished_.load(std::memory_order_relaxed)) {
      unpublished_.store(true, std::memory_order_relaxed);
    }
  }
  void mark_published(TimePoint now);  // with publish_mu_ held
  std::atomic<bool> capture_unflushed_{false};
  std::atomic<Nanos::rep> cost_ns_{0};  // how long a publish takes (moving average)
  [[nodiscard]] Nanos publish_interval() const;

  std::mutex build_mu_;  // publish(): build, check and store as one step
  // build's scratch (under build_mu_): the QPs to read, and the snapshot replaced last,
  // whose storage the next build reuses.
  struct QpRow {
    uint32_t qpn;
    uint8_t last_error_status;
    uint64_t error_completions;
  };
  std::vector<QpRow> rows_;
  DeviceSnapshot spare_;
  mutable std::mutex latest_mu_;
  DeviceSnapshot latest_;
};

// The observer a driver attaches from the environment: UROCE_STAT=0 turns off the
// shared-memory segment, UROCE_METRICS=ADDR:PORT serves Prometheus metrics,
// UROCE_CAPTURE=FILE.pcap captures every packet, UROCE_WATCHDOG=0 turns off the stall
// warning. Null (and *error, when something was asked for and failed) when nothing is to be
// observed.
[[nodiscard]] std::shared_ptr<device::DeviceObserver> observer_from_env(const std::string& device,
                                                                        std::string* error,
                                                                        uint16_t udp_port = 4791);

// DeviceTelemetry::diagnose of the device's observer; empty without one.
[[nodiscard]] std::string diagnose_qp(const device::Device& dev, uint32_t qpn);

}  // namespace uroce::telemetry
