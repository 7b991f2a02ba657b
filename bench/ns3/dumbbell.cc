// The ns-3 half of bench/sim-vs-ns3: N UDP constant-bit-rate flows across a dumbbell
// (left hosts -> router L -> bottleneck -> router R -> right hosts), point-to-point links,
// drop-tail device queues and no queue discs, MTU-sized packets like RoCE's. It counts
// packet-hops (one per PhyTxEnd on any device: every transmission on any link) and prints
// one key=value line with the wall and CPU time of Simulator::Run() only (setup excluded,
// as uroce sim's run_s/cpu_s exclude reading the scenario).
//
// Build: bench/ns3/build (pkg-config against Debian's libns3-dev, ns-3 3.37).
#include <ctime>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

namespace {

uint64_t g_hops = 0;

void on_phy_tx_end(Ptr<const Packet> /*p*/) {
  ++g_hops;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t flows = 8;
  double access_gbps =
      12.5;  // each host's NIC: the flow's constant rate, as in speed-dumbbell.toml
  double bottleneck_gbps = 100;
  double rate_gbps =
      12.5;  // per flow, on the wire: flows x rate = the bottleneck, no standing queue
  uint32_t payload =
      4124;  // UDP payload: a RoCE WRITE packet (BTH 12 + 4096 + ICRC 4, + RETH 16 at most)
  double duration_ms = 20;
  uint32_t delay_ns = 1000;
  uint32_t queue_bytes = 12582912;

  CommandLine cmd(__FILE__);
  cmd.AddValue("flows", "number of UDP CBR flows (= hosts per side)", flows);
  cmd.AddValue("accessGbps", "host link rate, Gb/s", access_gbps);
  cmd.AddValue("bottleneckGbps", "router-to-router link rate, Gb/s", bottleneck_gbps);
  cmd.AddValue("rateGbps", "each flow's constant rate on the wire (PPP+IP+UDP+payload), Gb/s",
               rate_gbps);
  cmd.AddValue("payload", "UDP payload bytes per packet", payload);
  cmd.AddValue("durationMs", "simulated time the flows send, ms", duration_ms);
  cmd.AddValue("delayNs", "propagation delay of every link, ns", delay_ns);
  cmd.AddValue("queueBytes", "drop-tail limit of every device queue, bytes", queue_bytes);
  cmd.Parse(argc, argv);

  NodeContainer left;
  NodeContainer right;
  NodeContainer routers;
  left.Create(flows);
  right.Create(flows);
  routers.Create(2);

  PointToPointHelper access;
  access.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(access_gbps * 1e9))));
  access.SetDeviceAttribute("Mtu", UintegerValue(9000));
  access.SetChannelAttribute("Delay", TimeValue(NanoSeconds(delay_ns)));
  access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                  QueueSizeValue(QueueSize(std::to_string(queue_bytes) + "B")));
  PointToPointHelper bottleneck = access;
  bottleneck.SetDeviceAttribute("DataRate",
                                DataRateValue(DataRate(uint64_t(bottleneck_gbps * 1e9))));

  InternetStackHelper stack;
  stack.InstallAll();

  Ipv4AddressHelper addr;
  std::vector<Ipv4Address> right_addr;
  std::vector<NetDeviceContainer> all;
  all.push_back(bottleneck.Install(routers.Get(0), routers.Get(1)));
  addr.SetBase("10.255.0.0", "255.255.255.0");
  addr.Assign(all.back());
  for (uint32_t i = 0; i < flows; ++i) {
    all.push_back(access.Install(left.Get(i), routers.Get(0)));
    addr.SetBase(Ipv4Address((10u << 24) | (1u << 16) | (i << 8)), "255.255.255.0");
    addr.Assign(all.back());
    all.push_back(access.Install(right.Get(i), routers.Get(1)));
    addr.SetBase(Ipv4Address((10u << 24) | (2u << 16) | (i << 8)), "255.255.255.0");
    right_addr.push_back(addr.Assign(all.back()).GetAddress(0));
  }
  // Drop-tail only: take away the default pfifo_fast queue discs so a packet goes straight
  // to the device's DropTailQueue, like a naked switch's tail-drop queue.
  TrafficControlHelper tch;
  for (auto& d : all) tch.Uninstall(d);
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();

  const uint16_t port = 9000;
  // PPP 2 + IPv4 20 + UDP 8 bytes ride with the payload on a point-to-point link.
  const double packet_s = (payload + 30) * 8.0 / (rate_gbps * 1e9);
  for (uint32_t i = 0; i < flows; ++i) {
    UdpServerHelper server(port);
    ApplicationContainer s = server.Install(right.Get(i));
    s.Start(Seconds(0));
    UdpClientHelper client(right_addr[i], port);
    // 3.37 sends one packet with MaxPackets 0: give it more than the run can send.
    client.SetAttribute("MaxPackets", UintegerValue(UINT32_MAX));
    client.SetAttribute("Interval", TimeValue(Seconds(packet_s)));
    client.SetAttribute("PacketSize", UintegerValue(payload));
    ApplicationContainer c = client.Install(left.Get(i));
    c.Start(Seconds(0));
    c.Stop(MilliSeconds(duration_ms));
  }
  Config::ConnectWithoutContext("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/PhyTxEnd",
                                MakeCallback(&on_phy_tx_end));
  Simulator::Stop(MilliSeconds(duration_ms) + MicroSeconds(100));

  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  Simulator::Run();
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_s = cpu_seconds() - cpu0;
  const uint64_t events = Simulator::GetEventCount();
  Simulator::Destroy();

  std::printf(
      "ns3 flows=%u packet_hops=%llu events=%llu run_s=%.6f cpu_s=%.6f "
      "packet_hops_per_s=%.0f packet_hops_per_cpu_s=%.0f\n",
      flows, static_cast<unsigned long long>(g_hops), static_cast<unsigned long long>(events),
      run_s, cpu_s, g_hops / run_s, g_hops / cpu_s);
  return 0;
}
