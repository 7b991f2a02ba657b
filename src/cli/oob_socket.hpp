// The TCP side channel that `uroce pingpong` and `uroce perf` use to swap QP numbers, PSNs,
// GIDs and keys before any RDMA traffic, like rdma-core's pingpong programs and perftest.
//
//   server: auto s = OobSocket::accept_one(18515, deadline);   // listens on every address
//   client: auto s = OobSocket::connect_to("host", 18515, deadline);  // retries until then
//   s->send_all(bytes); s->recv_all(bytes, deadline); s->send_line(json); s->recv_line(...)
//
// Every blocking call takes a deadline so nothing waits forever when the peer vanishes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "net/ip_addr.hpp"

namespace uroce::cli {

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;  // nullopt: no limit

// A deadline `seconds` from now, or none for seconds <= 0.
[[nodiscard]] Deadline deadline_after(double seconds);

class OobSocket {
 public:
  // Listens on `port` (IPv6 socket accepting IPv4 too, or IPv4 if the host has no IPv6),
  // accepts one connection and closes the listener. On failure returns null and sets `error`.
  static std::unique_ptr<OobSocket> accept_one(uint16_t port, Deadline deadline,
                                               std::string& error);
  // Connects to host:port, retrying every 100 ms while the server is not listening yet and
  // `deadline` has not passed (no deadline: one try). The error names the cause
  // ("connection refused by HOST:PORT: is the server running?").
  static std::unique_ptr<OobSocket> connect_to(const std::string& host, uint16_t port,
                                               Deadline deadline, std::string& error);
  ~OobSocket();
  OobSocket(const OobSocket&) = delete;
  OobSocket& operator=(const OobSocket&) = delete;

  [[nodiscard]] bool send_all(std::span<const char> bytes);
  [[nodiscard]] bool recv_all(std::span<char> bytes, Deadline deadline);
  // Newline-framed text messages (the JSON of `uroce perf`).
  [[nodiscard]] bool send_line(const std::string& line);
  [[nodiscard]] bool recv_line(std::string& line, Deadline deadline);
  // True once the peer closed the connection (or it broke); reads nothing that is queued.
  // For watching the side channel while the data path runs.
  [[nodiscard]] bool peer_closed() const;
  // A complete line if one is already buffered or readable without blocking.
  [[nodiscard]] bool try_recv_line(std::string& line, bool& closed);

  // Our address of the connection (IPv4 as ::ffff:a.b.c.d): the one the peer reached us on.
  [[nodiscard]] const net::IpAddr& local_address() const { return local_; }
  [[nodiscard]] const net::IpAddr& peer_address() const { return peer_; }
  [[nodiscard]] int fd() const { return fd_; }

 private:
  explicit OobSocket(int fd);
  bool fill(Deadline deadline, bool& closed);  // one read into buffer_

  int fd_ = -1;
  std::string buffer_;  // bytes read past the last returned line
  net::IpAddr local_;
  net::IpAddr peer_;
};

}  // namespace uroce::cli
