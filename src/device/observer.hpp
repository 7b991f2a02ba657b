// DeviceObserver: the one seam through which telemetry (src/telemetry: shared-memory
// counters for `uroce stat`, the Prometheus exporter, packet capture) watches a Device
// without the device depending on it. A driver puts one in DeviceConfig::observer.
//
// Who calls what, and what it may cost:
//   on_tx / on_rx       whoever drives the PacketIo (io_mu_ held), once per burst, with the
//                       packets actually sent / received; no engine lock is held
//   on_pass             after every I/O pass, no lock held; the observer rate-limits itself
//                       (it may read counters through the Device, which takes engine_mu_)
//   on_idle             the progress thread is about to sleep: publish what is pending, or
//                       return when to be called again (the thread sleeps no longer)
//   on_qp_*             after a successful create / modify / destroy, from the caller's thread
//   on_completion_error poll_cq returned a completion with an error status (no lock held)
// A Device without an observer pays one null check per burst and per poll_cq.
#pragma once

#include <cstdint>
#include <span>

#include "device/packet_io.hpp"
#include "transport/engine.hpp"
#include "uroce/vocab/time.hpp"

namespace uroce::device {

class Device;

class DeviceObserver {
 public:
  virtual ~DeviceObserver() = default;

  virtual void on_tx(TimePoint now, std::span<const transport::TxSlot> sent) = 0;
  virtual void on_rx(TimePoint now, std::span<const RxPacket> received) = 0;
  virtual void on_pass(TimePoint now, const Device& dev) = 0;
  // The time the observer wants on_idle again (it held back a publish), or kNever.
  virtual TimePoint on_idle(TimePoint now, const Device& dev) = 0;
  // The device is closing: its progress thread has stopped and nothing will change its
  // counters again (telemetry publishes them one last time for readers that outlive it).
  virtual void on_close(const Device& /*dev*/) {}

  virtual void on_qp_created(uint32_t qpn) = 0;
  virtual void on_qp_modified(uint32_t qpn, const transport::QpAttr& attr, uint32_t mask) = 0;
  virtual void on_qp_destroyed(uint32_t qpn) = 0;
  virtual void on_completion_error(const Device& dev, const transport::Wc& wc) = 0;
};

}  // namespace uroce::device
