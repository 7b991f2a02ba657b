// The RDMA resources of one side of `uroce perf`: the device, a PD, a CQ shared by every QP
// (with a completion channel for -e), `num_qps` QPs, and one registered buffer laid out as
// perf_protocol.hpp says. Client and server build the same thing from the same PerfSetup.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/perf_protocol.hpp"
#include "cli/verbs_setup.hpp"
#include "device/device.hpp"

namespace uroce::cli {

class PerfContext {
 public:
  // Creates everything and moves the QPs to INIT. `setup.qps` is ignored (that is the peer's).
  static std::unique_ptr<PerfContext> create(std::unique_ptr<device::Device> dev,
                                             const PerfSetup& setup, const GidChoice& gid,
                                             std::string& error);
  PerfContext(const PerfContext&) = delete;
  PerfContext& operator=(const PerfContext&) = delete;

  // Our QPs as the peer needs them.
  [[nodiscard]] std::vector<PerfQpInfo> local_info() const;
  // INIT -> RTR -> RTS towards the peer's QPs (and address handles for UD). `rd_atomic`
  // overrides the outstanding READ/atomic depth (a perftest peer announces its own).
  // `recovery`: selective repeat only after both sides agreed (RC).
  [[nodiscard]] bool connect(const std::vector<PerfQpInfo>& remote, std::string& error,
                             std::optional<uint8_t> rd_atomic = std::nullopt,
                             transport::Recovery recovery = transport::Recovery::kGoBackN);

  // The device layer underneath, for the data path (posts by QPN, progress, telemetry).
  [[nodiscard]] device::Device& dev() { return dev_.raw(); }
  [[nodiscard]] const device::Device& dev() const { return dev_.raw(); }
  [[nodiscard]] const PerfSetup& setup() const { return setup_; }
  // Before connect(): the path MTU both sides agreed on (the smaller active MTU).
  void set_mtu(uint32_t bytes) { setup_.mtu = bytes; }
  // Before connect(): the traffic class of every QP's GRH (-T/--tclass), not part of the
  // setup the peer sees (each side takes its own, as perftest).
  void set_traffic_class(uint8_t tclass) { traffic_class_ = tclass; }
  [[nodiscard]] uint8_t traffic_class() const { return traffic_class_; }
  [[nodiscard]] const GidChoice& gid() const { return gid_; }
  [[nodiscard]] uint32_t qpn(int q) const { return qps_[static_cast<size_t>(q)].qp_num(); }
  [[nodiscard]] int qp_index(uint32_t qpn) const;  // -1 if not ours
  [[nodiscard]] uint32_t lkey() const { return buffer_->mr().lkey(); }
  [[nodiscard]] uint32_t max_inline() const { return max_inline_; }
  [[nodiscard]] const std::vector<PerfQpInfo>& remote() const { return remote_; }
  [[nodiscard]] const transport::AhAttr& ah(int q) const { return ahs_[static_cast<size_t>(q)]; }

  [[nodiscard]] uint8_t* slot(int q, uint64_t k) const {
    return buffer_->data() + perf_slot_offset(setup_, q, k);
  }
  [[nodiscard]] uint8_t* aux(int q) const { return buffer_->data() + perf_aux_offset(setup_, q); }
  [[nodiscard]] uint64_t remote_slot(int q, uint64_t k) const {
    return remote_[static_cast<size_t>(q)].vaddr + perf_slot_offset(setup_, 0, k);
  }

  // Completions: polls; with -e (events) and nothing ready, arms the CQ and sleeps on the
  // channel up to `max_wait` first. Negative on a CQ error.
  int poll(std::span<transport::Wc> out, Nanos max_wait);
  [[nodiscard]] bool events() const { return channel_.has_value(); }  // -e
  // An empty turn of a wait on memory (write_lat): yields the CPU, every turn with -e, busy
  // polling as an empty poll() does.
  void idle_turn();
  transport::Status post_recv_slot(int q, uint64_t k, uint32_t length);

 private:
  explicit PerfContext(Device dev) : dev_(std::move(dev)) {}

  // Declared parents first, so children go first (QPs, then the MR, the CQ, its channel,
  // the PD), as ibverbs wants them destroyed.
  Device dev_;
  PerfSetup setup_;
  GidChoice gid_;
  std::optional<ProtectionDomain> pd_;
  std::optional<CompletionChannel> channel_;
  std::optional<CompletionQueue> cq_;
  std::unique_ptr<RegisteredBuffer> buffer_;
  std::vector<QueuePair> qps_;
  std::vector<uint32_t> psns_;
  std::vector<PerfQpInfo> remote_;
  std::vector<transport::AhAttr> ahs_;
  uint32_t max_inline_ = 0;
  uint8_t traffic_class_ = 0;
  // Busy polling yields the CPU once kYieldInterval has passed since it last did, looking at
  // the clock every kPollsPerClock empty polls. By time, not by count: an empty poll is a
  // system call through the sockets (1-2 us here) but a memory read through a receive ring
  // (UROCE_RX_RING, some 0.2 us), and a yield (over a microsecond on a VM) every 16 of those
  // put a third of the arriving packets behind one.
  void busy_turn();
  static constexpr uint32_t kPollsPerClock = 16;
  static constexpr Nanos kYieldInterval = std::chrono::microseconds(25);
  uint32_t empty_polls_ = 0;
  std::chrono::steady_clock::time_point last_yield_{};
};

// The one message of a ping-pong latency iteration (write_lat / send_lat), signaled and
// inline when small, from `sge` to QP 0's peer: an RDMA WRITE into its slot 0, or a SEND
// (with the UD address when `ud`). The caller fills the buffer and posts, so the pattern
// fill stays outside the timed section.
[[nodiscard]] transport::SendWr pingpong_wr(PerfContext& ctx, const transport::Sge& sge,
                                            uint64_t it, bool write, bool ud);

}  // namespace uroce::cli
