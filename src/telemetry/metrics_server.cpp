#include "telemetry/metrics_server.hpp"

#include <httplib.h>
#include <time.h>

#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

#include "common/library_thread.hpp"
#include "telemetry/prometheus.hpp"
#include "telemetry/wall_clock.hpp"

namespace uroce::telemetry {

namespace {

std::mutex& server_registry_mu() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, std::weak_ptr<MetricsServer>>& server_registry() {
  static std::map<std::string, std::weak_ptr<MetricsServer>> servers;
  return servers;
}

}  // namespace

bool parse_listen_address(const std::string& text, ListenAddress& out) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  unsigned port = 0;
  auto [p, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || p != last || first == last || port > 65535) return false;
  out.host = host;
  out.port = static_cast<uint16_t>(port);
  return true;
}

MetricsServer::MetricsServer() : http_(std::make_unique<httplib::Server>()) {}

std::shared_ptr<MetricsServer> MetricsServer::get(const std::string& address,
                                                  const std::vector<const SnapshotSource*>& sources,
                                                  std::string* error) {
  std::lock_guard lock(server_registry_mu());
  if (auto existing = server_registry()[address].lock()) {
    for (const SnapshotSource* s : sources) existing->add(s);
    return existing;
  }
  ListenAddress where;
  if (!parse_listen_address(address, where)) {
    if (error != nullptr)
      *error = "metrics address '" + address + "' is not ADDR:PORT (e.g. 127.0.0.1:9464)";
    return nullptr;
  }
  auto server = std::shared_ptr<MetricsServer>(new MetricsServer());
  MetricsServer* self = server.get();
  server->http_->Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server->http_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("uroce metrics: /metrics\n", "text/plain");
  });
  // httplib sets SO_REUSEPORT by default, which lets a second process bind the same port
  // and take half the scrapes: a metrics port must be ours alone, so SO_REUSEADDR only.
  server->http_->set_socket_options([](int sock) {
    int one = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  });
  int port = where.port;
  if (where.port == 0) {
    port = server->http_->bind_to_any_port(where.host);
  } else if (!server->http_->bind_to_port(where.host, where.port)) {
    port = -1;
  }
  if (port <= 0) {
    if (error != nullptr) {
      *error = "cannot listen for metrics on " + address +
               ": the port is in use (another uroce process?) or the address is not local; "
               "choose another port, or :0 for any free one";
    }
    return nullptr;
  }
  server->port_ = static_cast<uint16_t>(port);
  for (const SnapshotSource* s : sources) server->add(s);
  if (where.port == 0) {
    // Nobody could know the port otherwise.
    std::fprintf(stderr, "uroce: metrics on http://%s:%u/metrics\n",
                 where.host.find(':') != std::string::npos ? ("[" + where.host + "]").c_str()
                                                           : where.host.c_str(),
                 static_cast<unsigned>(port));
  }
  server->thread_ = common::start_library_thread([self] {
    self->http_->listen_after_bind();
    self->listen_returned_.store(true);
  });
  server_registry()[address] = server;
  return server;
}

MetricsServer::~MetricsServer() {
  // httplib's stop() does nothing until the listening loop has begun, and that loop would then
  // never end: a server dropped at once (a device opened and closed straight away) hung here.
  if (!thread_.joinable()) return;  // never listened: the address could not be bound
  while (!http_->is_running() && !listen_returned_.load()) std::this_thread::yield();
  http_->stop();
  thread_.join();
}

void MetricsServer::add(const SnapshotSource* source) {
  std::lock_guard lock(mu_);
  sources_.push_back(source);
}

void MetricsServer::remove(const SnapshotSource* source) {
  std::lock_guard lock(mu_);
  std::erase(sources_, source);
}

std::string MetricsServer::render() const {
  std::vector<DeviceSnapshot> snaps;
  {
    std::lock_guard lock(mu_);
    for (const SnapshotSource* s : sources_) snaps.push_back(s->latest_snapshot());
  }
  return render_prometheus(snaps, unix_ns());
}

}  // namespace uroce::telemetry
