// A minimal uroce_net member process for reuseport_process_test: joins the group on
// ADDR:PORT with registry DIR, prints "ready <slot> <position>" on stdout, then answers every
// datagram it receives with "got <slot> <dqpn>" sent back to the datagram's source, until
// SIGTERM (clean leave) or SIGKILL (crash).
//   net_port_helper ADDR PORT DIR
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/udp_port.hpp"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_term(int) {
  g_stop = 1;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace uroce::net;
  if (argc != 4) {
    std::fprintf(stderr, "usage: net_port_helper ADDR PORT DIR\n");
    return 2;
  }
  std::signal(SIGTERM, on_term);
  UdpPortConfig c;
  c.local = IpAddr::parse(argv[1]).value();
  c.port = static_cast<uint16_t>(std::atoi(argv[2]));
  c.registry_dir = argv[3];
  auto port = UdpPort::open(c);
  if (!port) {
    std::printf("error %s\n", port.error().message.c_str());
    return 1;
  }
  UdpPort& p = *port.value();
  std::printf("ready %u %u\n", *p.slot(), *p.position());
  std::fflush(stdout);
  std::vector<std::vector<uint8_t>> bufs(16, std::vector<uint8_t>(2048));
  std::vector<RxDatagram> rx(16);
  while (g_stop == 0) {
    for (size_t i = 0; i < rx.size(); ++i) rx[i].buf = bufs[i];
    const size_t n = p.recv_burst(rx);
    for (size_t i = 0; i < n; ++i) {
      const auto& b = bufs[i];
      const uint32_t dqpn = (uint32_t{b[5]} << 16) | (uint32_t{b[6]} << 8) | b[7];
      const std::string reply = "got " + std::to_string(*p.slot()) + " " + std::to_string(dqpn);
      TxDatagram d;
      d.data = {reinterpret_cast<const uint8_t*>(reply.data()), reply.size()};
      d.ip = rx[i].ip;
      d.ip.dst = rx[i].ip.src;
      d.ip.dport = rx[i].ip.sport;
      d.ip.sport = 0;
      (void)p.send_burst({&d, 1});
    }
    if (n == 0) (void)p.wait(std::chrono::milliseconds(20));
  }
  return 0;
}
