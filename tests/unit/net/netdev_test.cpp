#include "net/netdev.hpp"

#include <gtest/gtest.h>

#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using testing::ip;

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

  // No default route: the non-loopback netdevs by ifindex, loopback last; one port each.
  auto devices = build_host_devices(sel, {});
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0].name, "uroce_eth0");
  EXPECT_EQ(devices[1].name, "uroce_eth3");
  EXPECT_EQ(devices[2].name, "uroce_lo");
  for (const HostDevice& d : devices) EXPECT_EQ(d.port.port_num, 1);
  EXPECT_EQ(devices[0].port.active_mtu, 1024u);
  EXPECT_EQ(devices[2].port.active_mtu, 4096u);
  EXPECT_EQ(devices[0].node_guid, 0x000000fffe000001u);  // 02:00:00:00:00:01 as EUI-64
  EXPECT_EQ(devices[2].node_guid, 0x00007ffffe000001u);  // lo: 02:00 + 127.0.0.1

  const std::vector<PortGids> eth0_port = {devices[0].port};
  auto at = find_gid(eth0_port, ip("192.0.2.2"));
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->port_num, 1);
  EXPECT_EQ(at->gid_index, 1u);
  EXPECT_EQ(at->entry->netdev, "eth0");
  EXPECT_FALSE(find_gid(eth0_port, ip("127.0.0.1")).has_value());
  EXPECT_EQ(find_device_with_gid(devices, ip("127.0.0.1")), &devices[2]);
  EXPECT_EQ(find_device_with_gid(devices, ip("fd00::6")), &devices[1]);
  EXPECT_EQ(find_device_with_gid(devices, ip("10.0.0.1")), nullptr);  // eth1 is down
  EXPECT_EQ(find_interface_by_addr(all, ip("10.0.0.1"))->name, "eth1");

  const std::string text = format_gid_table(devices);
  EXPECT_EQ(text,
            "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4\t\tVER\tDEV\n"
            "---\t----\t-----\t---\t\t\t\t\t------------\t---\t---\n"
            "uroce_eth0\t1\t0\tfe80:0000:0000:0000:0000:00ff:fe00:0001\t               \tv2\teth0\n"
            "uroce_eth0\t1\t1\t0000:0000:0000:0000:0000:ffff:c000:0202\t192.0.2.2      \tv2\teth0\n"
            "uroce_eth3\t1\t0\tfe80:0000:0000:0000:0000:00ff:fe00:0006\t               \tv2\teth3\n"
            "uroce_eth3\t1\t1\tfd00:0000:0000:0000:0000:0000:0000:0006\t               \tv2\teth3\n"
            "uroce_lo\t1\t0\t0000:0000:0000:0000:0000:0000:0000:0001\t               \tv2\tlo\n"
            "uroce_lo\t1\t1\t0000:0000:0000:0000:0000:ffff:7f00:0001\t127.0.0.1      \tv2\tlo\n");
  EXPECT_EQ(describe_host_addresses(std::vector<Interface>{fake_lo()}), "lo 127.0.0.1 ::1");
}

// /proc/net/route of a host with two IPv4 default routes (eth1 preferred by metric), a
// down one and a network route.
constexpr const char* kProcRoute =
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "eth0\t00000000\t010200C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
    "eth1\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
    "eth2\t00000000\t0100000A\t0002\t0\t0\t50\t00000000\t0\t0\t0\n"
    "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

// /proc/net/ipv6_route: a default via eth3, the kernel's unreachable default on lo
// (RTF_REJECT) and a /64 on eth0.
constexpr const char* kProcIpv6Route =
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
    "fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth3\n"
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"
    "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n";

TEST(Device, DefaultRoutesFromTheRoutingTables) {
  EXPECT_EQ(parse_ipv4_default_routes(kProcRoute), (std::vector<std::string>{"eth1", "eth0"}));
  EXPECT_EQ(parse_ipv6_default_routes(kProcIpv6Route), (std::vector<std::string>{"eth3"}));
  EXPECT_TRUE(parse_ipv4_default_routes("").empty());
  EXPECT_TRUE(parse_ipv6_default_routes("garbage line\n").empty());
}

TEST(Device, DefaultRouteNetdevFirstOthersByIfindexLoopbackLast) {
  Interface eth0 = fake_eth("eth0", 2, {2, 0, 0, 0, 0, 1}, 1500);
  eth0.ipv4.push_back({ip("192.0.2.2"), 24, 0});
  Interface eth1 = fake_eth("eth1", 3, {2, 0, 0, 0, 0, 3}, 9000);
  eth1.ipv4.push_back({ip("10.0.0.1"), 8, 0});
  Interface eth3 = fake_eth("eth3", 6, {2, 0, 0, 0, 0, 6}, 1500);
  eth3.ipv6.push_back({ip("fd00::6"), 64, 0});
  const std::vector<Interface> sel = {fake_lo(), eth0, eth1, eth3};
  auto names = [](const std::vector<HostDevice>& d) {
    std::vector<std::string> out;
    for (const HostDevice& x : d) out.push_back(x.name);
    return out;
  };
  // IPv4 default routes first (by metric), then IPv6 ones, as read_default_route_netdevs
  // orders them.
  const std::vector<std::string> routes = {"eth1", "eth0", "eth3"};
  EXPECT_EQ(names(build_host_devices(sel, routes)),
            (std::vector<std::string>{"uroce_eth1", "uroce_eth0", "uroce_eth3", "uroce_lo"}));
  const std::vector<std::string> v6_only = {"eth3"};
  EXPECT_EQ(names(build_host_devices(sel, v6_only)),
            (std::vector<std::string>{"uroce_eth3", "uroce_eth0", "uroce_eth1", "uroce_lo"}));
  // A default route through a netdev without a device (not selected, or lo) changes nothing.
  const std::vector<std::string> elsewhere = {"wg0", "lo"};
  EXPECT_EQ(names(build_host_devices(sel, elsewhere)),
            (std::vector<std::string>{"uroce_eth0", "uroce_eth1", "uroce_eth3", "uroce_lo"}));
  // Only loopback: it is the first device.
  EXPECT_EQ(names(build_host_devices(std::vector<Interface>{fake_lo()}, routes)),
            (std::vector<std::string>{"uroce_lo"}));
}

TEST(Device, NamesAndTheDeprecatedAlias) {
  EXPECT_EQ(device_name_for("eth0"), "uroce_eth0");
  EXPECT_EQ(device_name_for("enp0s31f6"), "uroce_enp0s31f6");
  Interface eth0 = fake_eth("eth0", 2, {2, 0, 0, 0, 0, 1}, 1500);
  eth0.ipv4.push_back({ip("192.0.2.2"), 24, 0});
  const std::vector<Interface> sel = {fake_lo(), eth0};
  const auto devices = build_host_devices(sel, {});
  EXPECT_EQ(find_host_device(devices, ""), &devices[0]);
  EXPECT_EQ(find_host_device(devices, "uroce0"), &devices[0]);  // the old single device
  EXPECT_EQ(find_host_device(devices, "uroce_eth0"), &devices[0]);
  EXPECT_EQ(find_host_device(devices, "uroce_lo"), &devices[1]);
  EXPECT_EQ(find_host_device(devices, "uroce1"), nullptr);
  EXPECT_EQ(find_host_device(devices, "eth0"), nullptr);  // a netdev is not a device name
  EXPECT_EQ(find_host_device(std::vector<HostDevice>{}, ""), nullptr);
  EXPECT_EQ(device_names(devices), "uroce_eth0, uroce_lo");
  EXPECT_EQ(device_names(std::vector<HostDevice>{}), "no device");
}

TEST(Device, EachDeviceHasRxesGidLayoutOfItsOwnNetdev) {
  Interface eth0 = fake_eth("eth0", 2, {0x02, 0xfc, 0, 0, 0, 1}, 1500);
  eth0.ipv4.push_back({ip("192.0.2.2"), 24, 0});
  eth0.ipv6.push_back({ip("fd00::2"), 64, 0});
  eth0.ipv6.push_back({ip("fe80::fc:ff:fe00:1"), 64, 2});
  const std::vector<Interface> sel = {fake_lo(), eth0};
  const auto devices = build_host_devices(sel, std::vector<std::string>{"eth0"});
  ASSERT_EQ(devices.size(), 2u);
  const auto& eth = devices[0].port.gids;
  ASSERT_EQ(eth.size(), 3u);
  EXPECT_EQ(eth[0].gid, ip("fe80::fc:ff:fe00:1").bytes);  // 0: link-local / default GID
  EXPECT_TRUE(eth[0].is_default);
  EXPECT_EQ(eth[1].gid, ip("::ffff:192.0.2.2").bytes);  // 1: the IPv4 address
  EXPECT_EQ(eth[1].ipv4, "192.0.2.2");
  EXPECT_EQ(eth[2].gid, ip("fd00::2").bytes);  // then the other IPv6 addresses
  const auto& lo = devices[1].port.gids;
  ASSERT_EQ(lo.size(), 2u);
  EXPECT_EQ(lo[0].gid, ip("::1").bytes);
  EXPECT_EQ(lo[1].gid, ip("::ffff:127.0.0.1").bytes);
  for (const auto* t : {&eth, &lo}) {
    for (size_t i = 0; i < t->size(); ++i) EXPECT_EQ((*t)[i].index, i);
  }
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
  auto devices = build_host_devices(sel, read_default_route_netdevs());
  const HostDevice* lo_dev = find_device_with_gid(devices, ip("127.0.0.1"));
  ASSERT_NE(lo_dev, nullptr);
  EXPECT_EQ(lo_dev->name, "uroce_lo");
  EXPECT_EQ(&devices.back(), lo_dev);  // loopback is last
  const std::vector<PortGids> lo_port = {lo_dev->port};
  auto at = find_gid(lo_port, ip("127.0.0.1"));
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
