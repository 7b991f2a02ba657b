// MetricsServer: the process' Prometheus endpoint (GET /metrics), shared by every device of
// the process that asked for one (UROCE_METRICS=ADDR:PORT, `--metrics ADDR:PORT`). Served
// by cpp-httplib on its own thread; a scrape renders the snapshots the devices last
// published (never touches an engine), so scraping costs the data path nothing.
//
//   auto server = MetricsServer::get("127.0.0.1:9464", {&source}, &error);
//   ... server->remove(&source);
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "telemetry/snapshot.hpp"

namespace httplib {
class Server;
}

namespace uroce::telemetry {

class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  [[nodiscard]] virtual DeviceSnapshot latest_snapshot() const = 0;
};

// "127.0.0.1:9464", "[::1]:9464", ":9464" (every address), port 0: any free port.
struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};
[[nodiscard]] bool parse_listen_address(const std::string& text, ListenAddress& out);

class MetricsServer {
 public:
  // The server listening on `address`, started on first use, serving `sources` (and those of
  // earlier callers); null with *error when the address is malformed or cannot be bound.
  // The sources are added before port 0's chosen port is printed, so a scraper that reads
  // the printed port never finds an empty page.
  static std::shared_ptr<MetricsServer> get(const std::string& address,
                                            const std::vector<const SnapshotSource*>& sources,
                                            std::string* error);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void add(const SnapshotSource* source);
  void remove(const SnapshotSource* source);
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] std::string render() const;

 private:
  MetricsServer();
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<const SnapshotSource*> sources_;
};

}  // namespace uroce::telemetry
