// DeviceTelemetry: the device::DeviceObserver that makes a device visible from outside.
//
//   * publishes a DeviceSnapshot (device counters, per-QP counters, ACK round-trip
//     histograms, QP state and last error) every kPublishInterval while the device is busy
//     and once more when its progress thread goes idle — to the shared-memory segment
//     `uroce stat` reads, and to the Prometheus endpoint when one is configured;
//   * measures ACK round trips per QP from the packets sent and received (RttTracker);
//   * writes every packet sent and received to a pcap file when asked;
//   * logs one explained line per QP and error status when poll_cq returns an error
//     completion (explain.hpp).
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
#include <set>
#include <string>

#include "device/device.hpp"
#include "device/observer.hpp"
#include "telemetry/capture_sink.hpp"
#include "telemetry/metrics_server.hpp"
#include "telemetry/rtt_tracker.hpp"
#include "telemetry/shm_segment.hpp"

namespace uroce::telemetry {

struct TelemetryOptions {
  // The device name is the label of its segment and series ("uroce_eth0"); a second device
  // of this name in the process gets "uroce_eth0.1".
  std::string device = "uroce_lo";
  bool shm = true;          // publish for `uroce stat`
  std::string metrics;      // ADDR:PORT of the Prometheus endpoint; empty: none
  std::string capture;      // pcap path; empty: none
  bool measure_rtt = true;  // parse sent/received BTHs for round trips (cheap, per packet)
  std::function<void(const std::string&)> log;  // error-completion lines; empty: stderr
};

// Counter names published: the engine's, then mlx5 aliases of rxe counters that count the
// same event under another name (out_of_sequence = out_of_seq_request, rnr_nak_retry_err =
// retry_rnr_exceeded_err), then acks_rcvd (ACKs seen by the round-trip tracker).
[[nodiscard]] const std::vector<std::string>& published_counter_names();

class DeviceTelemetry final : public device::DeviceObserver, public SnapshotSource {
 public:
  static std::shared_ptr<DeviceTelemetry> create(TelemetryOptions options, std::string* error);
  ~DeviceTelemetry() override;

  void on_tx(TimePoint now, std::span<const transport::TxSlot> sent) override;
  void on_rx(TimePoint now, std::span<const device::RxPacket> received) override;
  void on_pass(TimePoint now, const device::Device& dev) override;
  void on_idle(TimePoint now, const device::Device& dev) override;
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

 private:
  struct QpInfo {
    uint8_t last_error_status = 0;
    uint64_t error_completions = 0;
    std::set<uint8_t> explained;  // statuses already logged for this QP
  };

  explicit DeviceTelemetry(TelemetryOptions options);
  DeviceSnapshot build(const device::Device& dev);

  TelemetryOptions options_;
  std::unique_ptr<ShmPublisher> shm_;
  std::shared_ptr<MetricsServer> metrics_;
  std::shared_ptr<CaptureSink> capture_;

  mutable std::mutex qp_mu_;  // qps_, rtt_
  std::map<uint32_t, QpInfo> qps_;
  RttTracker rtt_;

  std::mutex publish_mu_;
  TimePoint last_publish_{};
  uint64_t passes_since_publish_ = 0;
  std::atomic<bool> tx_outside_pass_{false};

  mutable std::mutex latest_mu_;
  DeviceSnapshot latest_;
};

// The observer a driver attaches from the environment: UROCE_STAT=0 turns off the
// shared-memory segment, UROCE_METRICS=ADDR:PORT serves Prometheus metrics,
// UROCE_CAPTURE=FILE.pcap captures every packet. Null (and *error, when something was asked
// for and failed) when nothing is to be observed.
[[nodiscard]] std::shared_ptr<device::DeviceObserver> observer_from_env(const std::string& device,
                                                                        std::string* error);

}  // namespace uroce::telemetry
