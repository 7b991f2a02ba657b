// MetricsServer: the process' Prometheus endpoint. A port-0 server is scraped the moment its
// port is known, so the sources it was given must already be on the page; a second device of
// the same process shares the server; a removed source leaves the page; a server dropped the
// moment it started stops, and so does one whose port was taken.
#include "telemetry/metrics_server.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <string>

namespace uroce::telemetry {
namespace {

class FixedSource : public SnapshotSource {
 public:
  explicit FixedSource(std::string device) {
    snap_.device = std::move(device);
    snap_.pid = 7;
    snap_.names = {"sent_pkts"};
    snap_.values = {5};
  }
  [[nodiscard]] DeviceSnapshot latest_snapshot() const override { return snap_; }

 private:
  DeviceSnapshot snap_;
};

std::string scrape(uint16_t port) {
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  return res ? res->body : std::string("(no answer)");
}

TEST(MetricsServer, APortZeroServerServesItsSourcesBeforeItsPortIsKnown) {
  FixedSource first("metrics_test_a");
  std::string error;
  auto server = MetricsServer::get("127.0.0.1:0", {&first}, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_GT(server->port(), 0);
  // The first scrape, with nothing in between: before the fix the port was printed before
  // the device added itself, and a scraper that was quick enough saw an empty page.
  const std::string page = scrape(server->port());
  EXPECT_NE(page.find("\nuroce_sent_pkts_total{device=\"metrics_test_a\"} 5\n"), std::string::npos)
      << page;
  server->remove(&first);
  EXPECT_EQ(scrape(server->port()).find("metrics_test_a"), std::string::npos);
}

TEST(MetricsServer, ASecondCallerOnTheSameAddressSharesTheServerAndAddsItsSources) {
  FixedSource a("metrics_test_b");
  FixedSource b("metrics_test_c");
  std::string error;
  // An explicit port that the first server chose, so the second `get` names the same address.
  auto probe = MetricsServer::get("127.0.0.1:0", {}, &error);
  ASSERT_NE(probe, nullptr) << error;
  const std::string address = "127.0.0.1:" + std::to_string(probe->port());
  probe.reset();  // frees the port for the named address below
  auto one = MetricsServer::get(address, {&a}, &error);
  ASSERT_NE(one, nullptr) << error;
  auto two = MetricsServer::get(address, {&b}, &error);
  ASSERT_EQ(two, one);
  const std::string page = scrape(one->port());
  EXPECT_NE(page.find("device=\"metrics_test_b\"} 5\n"), std::string::npos) << page;
  EXPECT_NE(page.find("device=\"metrics_test_c\"} 5\n"), std::string::npos) << page;
  one->remove(&a);
  one->remove(&b);
}

TEST(MetricsServer, AServerDroppedAtOnceStops) {
  // httplib ignores stop() until its listening loop runs; a server dropped before then used to
  // hang its destructor for ever (a device opened and closed straight away). Fifty tries, as
  // the thread's start races the drop.
  for (int i = 0; i < 50; ++i) {
    std::string error;
    auto server = MetricsServer::get("127.0.0.1:0", {}, &error);
    ASSERT_NE(server, nullptr) << error;
  }
}

TEST(MetricsServer, APortInUseIsNamedAndReturnsAtOnce) {
  std::string error;
  auto owner = MetricsServer::get("127.0.0.1:0", {}, &error);
  ASSERT_NE(owner, nullptr) << error;
  // Another spelling of the same port, so the registry does not hand back `owner`.
  const std::string taken = "0.0.0.0:" + std::to_string(owner->port());
  EXPECT_EQ(MetricsServer::get(taken, {}, &error), nullptr);
  EXPECT_EQ(error, "cannot listen for metrics on " + taken +
                       ": the port is in use (another uroce process?) or the address is not "
                       "local; choose another port, or :0 for any free one");
}

TEST(MetricsServer, AMalformedAddressIsNamed) {
  std::string error;
  EXPECT_EQ(MetricsServer::get("localhost", {}, &error), nullptr);
  EXPECT_EQ(error, "metrics address 'localhost' is not ADDR:PORT (e.g. 127.0.0.1:9464)");
}

}  // namespace
}  // namespace uroce::telemetry
