// `uroce exec`'s view of uroce's devices (src/cli/exec_view.hpp): written into a directory
// and read back with the same sysfs readers `uroce gids`/`doctor` use on kernel devices
// (src/kdev), so the files are what a reader of a kernel tree expects; and the counter totals
// that keep an exited process's counts.
#include "cli/exec_view.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/exec_mounts.hpp"
#include "kdev/kernel_device.hpp"
#include "temp_dir.hpp"
#include "uroce/vocab/counters.hpp"

namespace uroce::cli {
namespace {

// A host with one veth: MAC 02:00:00:00:00:07, 192.0.2.7/24, MTU 1500, speed 10 Gb/s.
std::vector<net::HostDevice> one_device() {
  net::Interface ifc;
  ifc.name = "veth7";
  ifc.ifindex = 7;
  ifc.mac = net::Mac{0x02, 0, 0, 0, 0, 0x07};
  ifc.mtu = 1500;
  ifc.oper = net::OperState::kUp;
  ifc.admin_up = ifc.running = true;
  ifc.speed_mbps = 10000;
  ifc.ipv4.push_back(net::InterfaceAddr{*net::IpAddr::parse("192.0.2.7"), 24, 0});
  const std::vector<net::Interface> all = {ifc};
  return net::build_host_devices(all, {});
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ExecView, KernelReadersSeeTheDeviceAsUroceDescribesIt) {
  const auto devices = one_device();
  ASSERT_EQ(devices.size(), 1u);
  const net::HostDevice& d = devices[0];
  test::TempDir dir;
  ASSERT_EQ(write_view(dir.path() + "/class", sysfs_view(devices)), "");

  const auto k = kdev::read_kernel_device(dir.path(), "uroce_veth7", false);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->node_type, "1: CA");
  EXPECT_EQ(k->node_guid, "0000:00ff:fe00:0007");  // EUI-64 of 02:00:00:00:00:07
  EXPECT_EQ(k->sys_image_guid, k->node_guid);
  EXPECT_EQ(k->hca_type, "uroce");
  ASSERT_EQ(k->ports.size(), 1u);
  const kdev::KernelPort& p = k->ports[0];
  EXPECT_EQ(p.state, 4);
  EXPECT_EQ(p.state_name, "ACTIVE");
  EXPECT_EQ(p.phys_state, 5);
  EXPECT_EQ(p.link_layer, "Ethernet");
  EXPECT_EQ(p.rate, "10 Gb/sec (1X FDR10)");
  EXPECT_EQ(p.active_mtu, 1024u);  // MTU 1500 carries 1024-byte RoCE payloads
  EXPECT_EQ(p.netdev, "veth7");
  ASSERT_EQ(p.gids.size(), d.port.gids.size());
  for (size_t i = 0; i < p.gids.size(); ++i) {
    EXPECT_EQ(p.gids[i].index, d.port.gids[i].index);
    EXPECT_EQ(p.gids[i].gid, d.port.gids[i].gid) << "GID " << i;
    EXPECT_EQ(p.gids[i].type, "RoCE v2");
    EXPECT_EQ(p.gids[i].ndev, "veth7");
  }
  EXPECT_EQ(p.gids.back().ipv4, "192.0.2.7");
  EXPECT_EQ(p.hw_counters.size(), transport::kCounterCount);
  for (const auto& [name, value] : p.hw_counters) EXPECT_EQ(value, 0u) << name;

  // The netdev link (rdma_cm and rdma-core's tests look there), the uverbs entry UCX matches
  // with ibv_device.dev_name, and the device is not listed again as a kernel device.
  EXPECT_EQ(
      std::filesystem::read_symlink(dir.path() + "/class/infiniband/uroce_veth7/device/net/veth7"),
      "/sys/class/net/veth7");
  EXPECT_EQ(read_file(dir.path() + "/class/infiniband_verbs/uverbs0/ibdev"), "uroce_veth7\n");
  EXPECT_EQ(read_file(dir.path() + "/class/infiniband_verbs/uverbs0/dev"), "231:192\n");
  EXPECT_TRUE(kdev::read_kernel_devices(dir.path(), false).empty());
}

TEST(ExecView, DevFilesAreNumberedInListOrder) {
  auto devices = one_device();
  devices.push_back(devices[0]);
  devices[1].name = "uroce_lo";
  const auto files = dev_view(devices);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "infiniband/uverbs0");
  EXPECT_EQ(files[1].path, "infiniband/uverbs1");
  test::TempDir dir;
  ASSERT_EQ(write_dev_view(dir.path(), files, false), "");
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/infiniband/uverbs1").c_str(), &st), 0);
  // A character device 231:193 where mknod is allowed (root), else an empty regular file.
  if (S_ISCHR(st.st_mode)) {
    EXPECT_EQ(major(st.st_rdev), 231u);
    EXPECT_EQ(minor(st.st_rdev), 193u);
  } else {
    EXPECT_TRUE(S_ISREG(st.st_mode));
  }
}

telemetry::DeviceSnapshot snapshot(const std::string& device, int pid, uint64_t sent) {
  telemetry::DeviceSnapshot s;
  s.device = device;
  s.pid = pid;
  s.names = {"sent_pkts", "rcvd_pkts"};
  s.values = {sent, sent / 2};
  return s;
}

TEST(ExecView, CounterFilesSumTheDevicesProcesses) {
  const std::vector<telemetry::DeviceSnapshot> snaps = {
      snapshot("uroce_a", 10, 100), snapshot("uroce_a", 11, 40), snapshot("uroce_b", 12, 1000)};
  const auto files = counter_files("uroce_a", snaps);
  EXPECT_EQ(files.size(), transport::kCounterCount);
  auto value = [&](const std::string& name) {
    const auto f = std::find_if(files.begin(), files.end(), [&](const ViewFile& v) {
      return v.path == "infiniband/uroce_a/ports/1/hw_counters/" + name;
    });
    return f == files.end() ? std::string("absent") : f->content;
  };
  EXPECT_EQ(value("sent_pkts"), "140\n");  // uroce_b's process is another device's
  EXPECT_EQ(value("rcvd_pkts"), "70\n");
  EXPECT_EQ(value("rdma_sends"), "0\n");
}

TEST(ExecView, WriteViewReplacesFilesInPlace) {
  test::TempDir dir;
  ASSERT_EQ(write_view(dir.path(), {ViewFile{"a/b/c", "1\n", false}}), "");
  ASSERT_EQ(write_view(dir.path(), {ViewFile{"a/b/c", "22\n", false}}), "");
  EXPECT_EQ(read_file(dir.path() + "/a/b/c"), "22\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/a/b/c.uroce-tmp"));
}

}  // namespace
}  // namespace uroce::cli
