#include "net/netdev.hpp"

#include <gtest/gtest.h>

namespace uroce::net {
namespace {

IpAddr ip(const char* text) {
  return IpAddr::parse(text).value();
}

Interface fake_eth(const char* name, int ifindex, Mac mac, uint32_t mtu) {
  Interface i;
  i.name = name;
  i.ifindex = ifindex;
  i.mac = mac;
  i.mtu = mtu;
  i.oper = OperState::kUp;
  i.admin_up = true;
  i.running = true;
  return i;
}

Interface fake_lo() {
  Interface lo;
  lo.name = "lo";
  lo.ifindex = 1;
  lo.mtu = 65536;
  lo.oper = OperState::kUnknown;
  lo.admin_up = lo.running = lo.loopback = true;
  lo.ipv4.push_back({ip("127.0.0.1"), 8, 0});
  lo.ipv6.push_back({ip("::1"), 128, 0});
  return lo;
}

TEST(IpAddr, ParsesAndPrintsBothFamilies) {
  EXPECT_EQ(ip("192.0.2.7").to_string(), "192.0.2.7");
  EXPECT_TRUE(ip("192.0.2.7").is_v4());
  EXPECT_EQ(ip("::ffff:192.0.2.7"), ip("192.0.2.7"));
  EXPECT_EQ(ip("[fd00::2]").to_string(), "fd00::2");
  EXPECT_FALSE(ip("fd00::2").is_v4());
  EXPECT_TRUE(ip("fe80::1").is_link_local());
  EXPECT_TRUE(ip("127.0.0.9").is_loopback());
  EXPECT_TRUE(ip("::1").is_loopback());
  EXPECT_FALSE(IpAddr::parse("300.1.1.1").has_value());
  const Gid expect = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7};
  EXPECT_EQ(ip("192.0.2.7").bytes, expect);
  EXPECT_EQ(endpoint_string(ip("fd00::2"), 4791), "[fd00::2]:4791");
  EXPECT_EQ(endpoint_string(ip("10.1.2.3"), 4791), "10.1.2.3:4791");
}

TEST(Gid, DefaultGidIsModifiedEui64OfTheMac) {
  EXPECT_EQ(default_gid_from_mac({0x02, 0xfc, 0x00, 0x00, 0x00, 0x01}),
            ip("fe80::fc:ff:fe00:1").bytes);
  EXPECT_EQ(default_gid_from_mac({0x00, 0x11, 0x22, 0x33, 0x44, 0x55}),
            ip("fe80::211:22ff:fe33:4455").bytes);
  EXPECT_EQ(default_gid_from_mac({0x52, 0x54, 0x00, 0xab, 0xcd, 0xef}),
            ip("fe80::5054:ff:feab:cdef").bytes);
}

TEST(Gid, TableOrderDefaultThenIpv4ThenNonLinkLocalIpv6) {
  Interface eth = fake_eth("eth0", 2, {0x02, 0xfc, 0, 0, 0, 1}, 1500);
  eth.ipv6.push_back({ip("fe80::fc:ff:fe00:1"), 64, 2});
  eth.ipv6.push_back({ip("fd00::2"), 64, 0});
  eth.ipv4.push_back({ip("192.0.2.2"), 24, 0});
  eth.ipv4.push_back({ip("198.51.100.9"), 24, 0});
  eth.ipv6.push_back({ip("fe80::1234"), 64, 2});  // stable-privacy link-local: left out
  eth.ipv6.push_back({ip("2001:db8::5"), 64, 0});
  const auto t = build_gid_table(eth);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].gid, ip("fe80::fc:ff:fe00:1").bytes);
  EXPECT_TRUE(t[0].is_default);
  EXPECT_EQ(t[0].scope_id, 2u);
  EXPECT_EQ(t[0].ipv4, "");
  EXPECT_EQ(t[1].gid, ip("::ffff:192.0.2.2").bytes);
  EXPECT_EQ(t[1].ipv4, "192.0.2.2");
  EXPECT_EQ(t[2].gid, ip("198.51.100.9").bytes);
  EXPECT_EQ(t[2].ipv4, "198.51.100.9");
  EXPECT_EQ(t[3].gid, ip("fd00::2").bytes);
  EXPECT_EQ(t[4].gid, ip("2001:db8::5").bytes);
  for (uint32_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].index, i);
    EXPECT_EQ(t[i].type, GidType::kRoceV2);
    EXPECT_EQ(t[i].netdev, "eth0");
    EXPECT_EQ(t[i].ifindex, 2);
  }
}

TEST(Gid, LoopbackHasIndex0Ipv6LoopbackAndIndex1Ipv4) {
  const auto t = build_gid_table(fake_lo());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].gid, ip("::1").bytes);
  EXPECT_TRUE(t[0].is_default);
  EXPECT_EQ(t[1].gid, ip("127.0.0.1").bytes);
  EXPECT_EQ(t[1].ipv4, "127.0.0.1");
}

TEST(Gid, NetdevWithoutAddressesStillHasTheDefaultGid) {
  const auto t = build_gid_table(fake_eth("eth1", 3, {0, 1, 2, 3, 4, 5}, 1500));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].gid, ip("fe80::201:2ff:fe03:405").bytes);
}

TEST(Mtu, ActiveMtuIsNetdevMtuMinus80RoundedDown) {
  EXPECT_EQ(active_mtu_for_netdev_mtu(1500), 1024u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(4200), 4096u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(9000), 4096u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(576), 256u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(4176), 4096u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(4175), 2048u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(2128), 2048u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(2127), 1024u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(65536), 4096u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(336), 256u);
  EXPECT_EQ(active_mtu_for_netdev_mtu(335), 0u);
  EXPECT_EQ(ib_mtu_enum(256), 1);
  EXPECT_EQ(ib_mtu_enum(1024), 3);
  EXPECT_EQ(ib_mtu_enum(4096), 5);
  EXPECT_EQ(ib_mtu_enum(1500), 0);
}

TEST(Device, SelectsUpInterfacesWithAddressesInIfindexOrder) {
  Interface eth0 = fake_eth("eth0", 2, {2, 0, 0, 0, 0, 1}, 1500);
  eth0.ipv4.push_back({ip("192.0.2.2"), 24, 0});
  Interface ifb0 = fake_eth("ifb0", 4, {2, 0, 0, 0, 0, 4}, 1500);
  ifb0.oper = OperState::kDown;
  ifb0.admin_up = false;
  ifb0.running = false;
  Interface eth1 = fake_eth("eth1", 3, {2, 0, 0, 0, 0, 3}, 9000);
  eth1.ipv4.push_back({ip("10.0.0.1"), 8, 0});
  eth1.oper = OperState::kLowerLayerDown;  // cable out
  eth1.running = false;
  Interface eth2 = fake_eth("eth2", 5, {2, 0, 0, 0, 0, 5}, 9000);  // up, no address
  Interface eth3 = fake_eth("eth3", 6, {2, 0, 0, 0, 0, 6}, 9000);
  eth3.ipv6.push_back({ip("fd00::6"), 64, 0});
  std::vector<Interface> all = {eth3, eth0, ifb0, fake_lo(), eth1, eth2};
  auto sel = select_device_netdevs(all);
  ASSERT_EQ(sel.size(), 3u);
  EXPECT_EQ(sel[0].name, "lo");
  EXPECT_EQ(sel[1].name, "eth0");
  EXPECT_EQ(sel[2].name, "eth3");

  std::vector<std::string> only = {"eth3", "eth0"};
  auto some = select_device_netdevs(all, only);
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].name, "eth0");

  auto ports = build_ports(sel);
  ASSERT_EQ(ports.size(), 3u);
  EXPECT_EQ(ports[0].port_num, 1);
  EXPECT_EQ(ports[0].active_mtu, 4096u);
  EXPECT_EQ(ports[1].port_num, 2);
  EXPECT_EQ(ports[1].active_mtu, 1024u);
  auto at = find_gid(ports, ip("192.0.2.2"));
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->port_num, 2);
  EXPECT_EQ(at->gid_index, 1u);
  EXPECT_EQ(at->entry->netdev, "eth0");
  auto lo1 = find_gid(ports, ip("127.0.0.1"));
  ASSERT_TRUE(lo1.has_value());
  EXPECT_EQ(lo1->port_num, 1);
  EXPECT_EQ(lo1->gid_index, 1u);
  EXPECT_FALSE(find_gid(ports, ip("10.0.0.1")).has_value());
  EXPECT_EQ(find_interface_by_addr(all, ip("10.0.0.1"))->name, "eth1");

  const std::string text = format_gid_table("uroce0", ports);
  EXPECT_NE(
      text.find(
          "uroce0\t2\t1\t0000:0000:0000:0000:0000:ffff:c000:0202\t192.0.2.2      \tv2\teth0\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(describe_host_addresses(std::vector<Interface>{fake_lo()}), "lo 127.0.0.1 ::1");
}

TEST(Host, DiscoversLoopback) {
  auto ifs = discover_interfaces();
  ASSERT_TRUE(ifs.ok()) << ifs.error().message;
  const Interface* lo = find_interface_by_addr(ifs.value(), ip("127.0.0.1"));
  ASSERT_NE(lo, nullptr);
  EXPECT_TRUE(lo->loopback);
  EXPECT_FALSE(lo->mac.has_value());
  EXPECT_GT(lo->ifindex, 0);
  EXPECT_GT(lo->mtu, 0u);
  EXPECT_EQ(lo->speed_mbps, -1);  // sysfs speed is EINVAL on lo
  for (size_t i = 1; i < ifs.value().size(); ++i)
    EXPECT_LT(ifs.value()[i - 1].ifindex, ifs.value()[i].ifindex);
  auto sel = select_device_netdevs(ifs.value());
  ASSERT_FALSE(sel.empty());
  auto ports = build_ports(sel);
  auto at = find_gid(ports, ip("127.0.0.1"));
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->gid_index, 1u);
}

TEST(Host, RouteSourceOfLoopbackIsLoopback) {
  auto src = route_source_for(ip("127.0.0.1"));
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_EQ(src.value(), ip("127.0.0.1"));
  auto src6 = route_source_for(ip("::1"));
  if (src6.ok()) {
    EXPECT_EQ(src6.value(), ip("::1"));
  }
}

TEST(OperState, ParsesSysfsText) {
  EXPECT_EQ(parse_oper_state("up\n"), OperState::kUp);
  EXPECT_EQ(parse_oper_state("lowerlayerdown"), OperState::kLowerLayerDown);
  EXPECT_EQ(parse_oper_state("unknown"), OperState::kUnknown);
  EXPECT_EQ(oper_state_name(OperState::kDormant), "dormant");
}

}  // namespace
}  // namespace uroce::net
