// RC operations streamed between two devices of this process, `depth` outstanding on every
// QP, for the data-path benchmarks that watch what a steady transfer costs (data_path_counts:
// allocations and locks; post_call_time: how long post_send takes).
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "device_integration_util.hpp"
#include "uroce/connect.hpp"
#include "uroce/verbs.hpp"

namespace uroce::bench {

using itest::Side;

// One line naming the program and the problem; exit 1 (a run that failed) or, for bad input,
// 2.
[[noreturn]] inline void die(const char* program, const std::string& why, int status = 1) {
  fmt::print(stderr, "{}: {}\n", program, why);
  std::exit(status);
}

struct Scenario {
  const char* name;
  WrOpcode opcode;
  uint32_t size;
  int qps;
  int depth;     // messages outstanding per QP
  int messages;  // per window (data_path_counts: as many again before it, to warm up)
};

inline uint64_t sent_packets(const Side& side) {
  return side.dev.counters()[transport::Counter::kSentPkts];
}

// Called around every post_send and post_recv of the stream (post_call_time times them).
struct PostHook {
  virtual void before_post() {}
  virtual void after_post(bool receive) = 0;

 protected:
  ~PostHook() = default;
};

class Run {
 public:
  Run(Side& a, Side& b, const Scenario& s, const char* program, PostHook* hook = nullptr)
      : a_(a), b_(b), s_(s), program_(program), hook_(hook) {
    QpInitAttr init;
    init.qp_type = QpType::kRc;
    init.cap =
        QpCap{static_cast<uint32_t>(s.depth) + 1, static_cast<uint32_t>(s.depth) + 1, 1, 1, 0};
    for (int q = 0; q < s.qps; ++q) {
      init.send_cq = a.cq.id();
      init.recv_cq = a.cq.id();
      auto qa = a.pd.create_qp(init);
      init.send_cq = b.cq.id();
      init.recv_cq = b.cq.id();
      auto qb = b.pd.create_qp(init);
      if (!qa || !qb) die(program_, "can't create QPs");
      qa_.push_back(std::move(qa.value()));
      qb_.push_back(std::move(qb.value()));
      QueuePair& x = qa_.back();
      QueuePair& y = qb_.back();
      const uint32_t psn_a = 1000u + static_cast<uint32_t>(q);
      const uint32_t psn_b = 5000u + static_cast<uint32_t>(q);
      ConnectOptions o;
      o.path_mtu = Mtu::k4096;  // lo's active MTU, as `uroce perf` connects
      if (!connect_qp(x, psn_a, QpEndpoint{y.qp_num(), psn_b, b.gid()}, o) ||
          !connect_qp(y, psn_b, QpEndpoint{x.qp_num(), psn_a, a.gid()}, o)) {
        die(program_, "can't connect QPs");
      }
    }
  }

  // Moves `count` messages, keeping `depth` outstanding on every QP.
  void move(int count) {
    posted_ = 0;
    completed_ = 0;
    total_ = count;
    for (int q = 0; q < s_.qps; ++q) {
      for (int k = 0; k < s_.depth && posted_ < total_; ++k) post(q);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    Wc wc[32];
    while (completed_ < total_) {
      const int n = a_.cq.poll(std::span<Wc>(wc, 32));
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess)
          die(program_, fmt::format("{}: completion error", s_.name));
        ++completed_;
        if (posted_ < total_) post(static_cast<int>(wc[i].wr_id));
      }
      if (s_.opcode == WrOpcode::kSend) take_receives();
      if (std::chrono::steady_clock::now() > deadline)
        die(program_, fmt::format("{}: no progress for 60 s", s_.name));
    }
  }

  // post_send and post_recv calls made so far: each takes its queue's post lock once
  // (transport/post_lock.hpp), a spinlock that call_counter does not see.
  [[nodiscard]] uint64_t post_calls() const { return post_calls_; }

  // The receiver's side of SENDs: a receive for every message, taken back as it completes.
  void post_receives() {
    for (int q = 0; q < s_.qps; ++q) {
      for (int k = 0; k < s_.depth; ++k) post_recv(q);
    }
  }

 private:
  void post(int q) {
    const Sge sge = a_.mr.sge(static_cast<uint64_t>(q) * s_.size, s_.size);
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(q);
    wr.opcode = s_.opcode;
    wr.send_flags = kSendSignaled;
    wr.sg_list = std::span<const Sge>(&sge, 1);
    wr.rdma.remote_addr =
        reinterpret_cast<uint64_t>(b_.mr.addr()) + static_cast<uint64_t>(q) * s_.size;
    wr.rdma.rkey = b_.mr.rkey();
    if (hook_ != nullptr) hook_->before_post();
    const bool ok = qa_[static_cast<size_t>(q)].post_send(wr).is_ok();
    if (hook_ != nullptr) hook_->after_post(false);
    if (!ok) die(program_, fmt::format("{}: post_send failed", s_.name));
    ++posted_;
    ++post_calls_;
  }

  void post_recv(int q) {
    const Sge sge = b_.mr.sge(static_cast<uint64_t>(q) * s_.size, s_.size);
    if (hook_ != nullptr) hook_->before_post();
    const bool ok = qb_[static_cast<size_t>(q)]
                        .post_recv(RecvWr{static_cast<uint64_t>(q), std::span<const Sge>(&sge, 1)})
                        .is_ok();
    if (hook_ != nullptr) hook_->after_post(true);
    if (!ok) die(program_, fmt::format("{}: post_recv failed", s_.name));
    ++post_calls_;
  }

  void take_receives() {
    Wc wc[32];
    const int n = b_.cq.poll(std::span<Wc>(wc, 32));
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::kSuccess)
        die(program_, fmt::format("{}: receive error", s_.name));
      post_recv(static_cast<int>(wc[i].wr_id));
    }
  }

  Side& a_;
  Side& b_;
  const Scenario& s_;
  const char* program_;
  PostHook* hook_;
  std::vector<QueuePair> qa_;
  std::vector<QueuePair> qb_;
  int posted_ = 0;
  uint64_t post_calls_ = 0;
  int completed_ = 0;
  int total_ = 0;
};

}  // namespace uroce::bench
