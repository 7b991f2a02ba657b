#include "net/reuseport_registry.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "common/netns.hpp"
#include "net_test_util.hpp"

namespace uroce::net {
namespace {

using testing::ip;

RegistryMember member(pid_t pid, uint32_t slot, const char* addr, uint32_t pos) {
  RegistryMember m;
  m.pid = pid;
  m.start_time = 1000 + static_cast<uint64_t>(pid);
  m.token = 0xABC0 + static_cast<uint64_t>(pid);
  m.slot = slot;
  m.addr = ip(addr);
  m.position = pos;
  m.verified_epoch = 3;
  return m;
}

uint32_t position_of(const RegistryState& s, pid_t pid) {
  for (const auto& m : s.members) {
    if (m.pid == pid) return m.position;
  }
  return 999;
}

TEST(Registry, SerializeParseRoundTrip) {
  RegistryState s;
  s.epoch = 42;
  s.members = {member(11, 0, "127.0.0.1", 0), member(12, 1, "fd00::2", 0)};
  const std::string text = serialize_registry(s);
  EXPECT_EQ(text.substr(0, 27), "uroce-reuseport 1\nepoch 42\n");
  EXPECT_NE(text.find("member 11 1011 000000000000abcb 0 127.0.0.1 0 3\n"), std::string::npos)
      << text;
  auto back = parse_registry(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, s);
  EXPECT_TRUE(parse_registry("").has_value());
  EXPECT_FALSE(parse_registry("something else\n").has_value());
  EXPECT_FALSE(parse_registry("uroce-reuseport 1\nmember 1 2\n").has_value());
}

TEST(Registry, CmRecordsRoundTripOnTheMembersLine) {
  RegistryState s;
  s.epoch = 5;
  s.members = {member(11, 0, "127.0.0.1", 0), member(12, 1, "127.0.0.1", 1),
               member(13, 2, "fd00::2", 0)};
  s.members[0].cm_capable = true;
  s.members[1].listens = {0x0000000001061C06ULL, 0xFEDCBA9876543210ULL};
  s.members[2].cm_capable = true;
  s.members[2].listens = {0x0000000001064853ULL};
  const std::string text = serialize_registry(s);
  EXPECT_NE(text.find("member 11 1011 000000000000abcb 0 127.0.0.1 0 3 cm\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("member 12 1012 000000000000abcc 1 127.0.0.1 1 3 "
                      "listen=0000000001061c06 listen=fedcba9876543210\n"),
            std::string::npos)
      << text;
  auto back = parse_registry(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, s);
  // A malformed service ID makes the file corrupt; an unknown trailing field (a newer
  // uroce's) is ignored.
  EXPECT_FALSE(
      parse_registry("uroce-reuseport 1\nmember 1 2 ab 0 127.0.0.1 0 0 listen=xyz\n").has_value());
  auto newer = parse_registry("uroce-reuseport 1\nmember 1 2 ab 0 127.0.0.1 0 0 future=1 cm\n");
  ASSERT_TRUE(newer.has_value());
  ASSERT_EQ(newer->members.size(), 1u);
  EXPECT_TRUE(newer->members[0].cm_capable);
}

TEST(Registry, FileWithoutCmRecordsStillParses) {
  // What uroce wrote before QP1 steering: no member is CM-capable or listens.
  const char* old =
      "uroce-reuseport 1\nepoch 9\n"
      "member 4242 777 00000000deadbeef 3 127.0.0.1 0 9\n"
      "member 4243 778 00000000deadbef0 4 ::1 0 8\n";
  auto s = parse_registry(old);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->epoch, 9u);
  ASSERT_EQ(s->members.size(), 2u);
  EXPECT_EQ(s->members[0].token, 0xdeadbeefULL);
  EXPECT_EQ(s->members[1].slot, 4u);
  for (const auto& m : s->members) {
    EXPECT_FALSE(m.cm_capable);
    EXPECT_TRUE(m.listens.empty());
  }
  EXPECT_EQ(serialize_registry(*s), old);  // and is written back unchanged
}

TEST(Registry, ListenersArePerAddressAndGoWithTheirDeadMember) {
  RegistryState s;
  s.members = {member(1, 0, "127.0.0.1", 0), member(2, 1, "127.0.0.1", 1),
               member(3, 2, "192.0.2.2", 0)};
  s.members[0].listens = {0x100};
  s.members[1].listens = {0x200, 0x300};
  s.members[2].listens = {0x100};
  const uint64_t token1 = s.members[0].token;
  const uint64_t token2 = s.members[1].token;
  ASSERT_NE(listener_on(s, ip("127.0.0.1"), 0x100, token2), nullptr);
  EXPECT_EQ(listener_on(s, ip("127.0.0.1"), 0x100, token2)->pid, 1);
  EXPECT_EQ(listener_on(s, ip("127.0.0.1"), 0x100, token1), nullptr);  // only itself
  EXPECT_EQ(listener_on(s, ip("127.0.0.1"), 0x400, 0), nullptr);
  EXPECT_EQ(listener_on(s, ip("192.0.2.2"), 0x100, token1)->pid, 3);  // another address
  EXPECT_EQ(listener_count_on(s, ip("127.0.0.1")), 3u);
  EXPECT_EQ(listener_count_on(s, ip("192.0.2.2")), 1u);
  auto alive = [](pid_t pid, uint64_t) { return pid != 2; };
  EXPECT_EQ(prune_dead_members(s, alive), 1u);
  EXPECT_EQ(listener_on(s, ip("127.0.0.1"), 0x200, 0), nullptr);
  EXPECT_EQ(listener_count_on(s, ip("127.0.0.1")), 1u);
  EXPECT_EQ(serialize_registry(s).find("listen=0000000000000200"), std::string::npos);
}

TEST(Registry, RemovalMovesTheLastMemberLikeTheKernel) {
  RegistryState s;
  s.members = {member(1, 0, "127.0.0.1", 0), member(2, 1, "127.0.0.1", 1),
               member(3, 2, "127.0.0.1", 2), member(4, 3, "127.0.0.1", 3),
               member(5, 0, "192.0.2.2", 0), member(6, 1, "192.0.2.2", 1)};
  remove_member_like_kernel(s, 1);  // pid 2 at position 1: pid 4 (last) moves into 1
  EXPECT_EQ(position_of(s, 1), 0u);
  EXPECT_EQ(position_of(s, 4), 1u);
  EXPECT_EQ(position_of(s, 3), 2u);
  EXPECT_EQ(position_of(s, 5), 0u);  // another address is another group
  EXPECT_EQ(position_of(s, 6), 1u);
  ASSERT_EQ(s.members[1].pid, 3);
  remove_member_like_kernel(s, 1);  // pid 3, now the last: nobody moves
  EXPECT_EQ(position_of(s, 1), 0u);
  EXPECT_EQ(position_of(s, 4), 1u);
  auto on = members_on(s, ip("127.0.0.1"));
  ASSERT_EQ(on.size(), 2u);
  EXPECT_EQ(on[0].pid, 1);
  EXPECT_EQ(on[1].pid, 4);
}

TEST(Registry, PruneRemovesDeadHighestPositionFirstAndBumpsEpoch) {
  RegistryState s;
  s.epoch = 7;
  s.members = {member(1, 0, "127.0.0.1", 0), member(2, 1, "127.0.0.1", 1),
               member(3, 2, "127.0.0.1", 2), member(4, 3, "127.0.0.1", 3)};
  auto alive = [](pid_t pid, uint64_t) { return pid != 1 && pid != 3; };
  EXPECT_EQ(prune_dead_members(s, alive), 2u);
  EXPECT_EQ(s.epoch, 8u);
  // pid 3 (position 2) first: pid 4 moves to 2; then pid 1 (position 0): pid 4 moves to 0.
  EXPECT_EQ(position_of(s, 4), 0u);
  EXPECT_EQ(position_of(s, 2), 1u);
  EXPECT_EQ(prune_dead_members(s, alive), 0u);
  EXPECT_EQ(s.epoch, 8u);
}

TEST(Registry, SlotChoice) {
  RegistryState s;
  s.members = {member(1, 0, "127.0.0.1", 0), member(2, 1, "192.0.2.2", 0)};
  EXPECT_EQ(choose_slot(s, ip("127.0.0.1"), -1), 2u);  // lowest slot unused on any address
  EXPECT_EQ(choose_slot(s, ip("127.0.0.1"), 1), 1u);   // slot 1 is free on 127.0.0.1
  EXPECT_FALSE(choose_slot(s, ip("127.0.0.1"), 0).has_value());
  EXPECT_FALSE(choose_slot(s, ip("127.0.0.1"), 64).has_value());
  for (uint32_t i = 2; i < 64; ++i)
    s.members.push_back(member(static_cast<pid_t>(100 + i), i, "192.0.2.2", i));
  EXPECT_EQ(choose_slot(s, ip("127.0.0.1"), -1), 1u);  // then the lowest free on this address
}

TEST(Registry, ProcessLiveness) {
  const uint64_t me = process_start_time(getpid());
  EXPECT_GT(me, 0u);
  EXPECT_TRUE(process_alive(getpid(), me));
  EXPECT_FALSE(process_alive(getpid(), me + 1));  // same pid, other process: reused pid
  pid_t child = fork();
  if (child == 0) _exit(0);
  const uint64_t start = process_start_time(child);
  // Wait until it is a zombie: dead although kill(pid, 0) still succeeds.
  for (int i = 0; i < 200 && process_alive(child, start); ++i) usleep(5000);
  EXPECT_FALSE(process_alive(child, start));
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(process_alive(child, start));
}

TEST(Registry, FileStoreLoadAndChangeDetection) {
  const testing::TempDir temp;  // removed when the test ends, early or not
  ASSERT_FALSE(temp.path().empty());
  const std::string& dir = temp.path();
  {
    auto a = RegistryFile::open(dir, 24700);
    auto b = RegistryFile::open(dir, 24700);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a.value().path(), dir + "/" + netns_key(netns_inode()) + "/port-24700.reg");
    RegistryState s;
    {
      auto lock = a.value().lock();
      s = a.value().load();
      EXPECT_TRUE(s.members.empty());
      s.members.push_back(member(9, 4, "127.0.0.1", 0));
      a.value().store(s);
    }
    (void)b.value().load();
    EXPECT_FALSE(b.value().changed_since_last_seen());
    EXPECT_FALSE(a.value().changed_since_last_seen());
    s.epoch = 1;
    a.value().store(s);
    EXPECT_TRUE(b.value().changed_since_last_seen());
    EXPECT_EQ(b.value().load(), s);
    EXPECT_FALSE(b.value().changed_since_last_seen());
  }
}

// changed_since_last_seen() compares the file with what was loaded last piece by piece, with
// no copy: a rewrite to fewer, more or as many bytes, and files of more than one 4 KiB read.
TEST(Registry, ChangeDetectionSeesShorterLongerAndSameLengthRewrites) {
  const testing::TempDir temp;  // removed when the test ends, early or not
  ASSERT_FALSE(temp.path().empty());
  const std::string& dir = temp.path();
  {
    auto a = RegistryFile::open(dir, 24701);
    auto b = RegistryFile::open(dir, 24701);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok());
    RegistryState s;
    for (uint32_t i = 0; i < 200; ++i) {
      s.members.push_back(member(static_cast<pid_t>(1000 + i), i % 64, "192.0.2.7", i));
    }
    ASSERT_GT(serialize_registry(s).size(), 2u * 4096);  // three reads of the file
    a.value().store(s);
    (void)b.value().load();
    EXPECT_FALSE(b.value().changed_since_last_seen());

    RegistryState same_length = s;  // a pid digit in the last 4 KiB changes, nothing else
    same_length.members.back().pid = 1198;
    ASSERT_EQ(serialize_registry(same_length).size(), serialize_registry(s).size());
    a.value().store(same_length);
    EXPECT_TRUE(b.value().changed_since_last_seen());
    EXPECT_EQ(b.value().load(), same_length);
    EXPECT_FALSE(b.value().changed_since_last_seen());

    RegistryState shorter = same_length;
    shorter.members.pop_back();
    a.value().store(shorter);
    EXPECT_TRUE(b.value().changed_since_last_seen());
    EXPECT_EQ(b.value().load(), shorter);
    EXPECT_FALSE(b.value().changed_since_last_seen());

    a.value().store(same_length);  // longer again
    EXPECT_TRUE(b.value().changed_since_last_seen());
    EXPECT_EQ(b.value().load(), same_length);
    EXPECT_FALSE(b.value().changed_since_last_seen());
  }
}

// The key is the namespace's inode as the kernel names it in the /proc/self/ns/net link.
TEST(Registry, NetnsInodeIsTheNamespaceLinksInode) {
  char link[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/net", link, sizeof link - 1), 0);
  EXPECT_EQ("net:[" + std::to_string(netns_inode()) + "]", std::string(link));
  EXPECT_NE(netns_inode(), 0u);
  EXPECT_EQ(netns_key(4026531840), "netns-4026531840");
}

TEST(Registry, PathIsKeyedByNetworkNamespaceAndPort) {
  EXPECT_EQ(RegistryFile::path_for("/tmp/uroce-1000", 4026531840, 4791),
            "/tmp/uroce-1000/netns-4026531840/port-4791.reg");
  EXPECT_EQ(RegistryFile::namespace_dir("/run/user/1000/uroce", 4026532301),
            "/run/user/1000/uroce/netns-4026532301");
  EXPECT_NE(RegistryFile::path_for("/d", 1, 4791), RegistryFile::path_for("/d", 2, 4791));
  EXPECT_NE(RegistryFile::path_for("/d", 1, 4791), RegistryFile::path_for("/d", 1, 4792));
}

// A process in another network namespace, same directory and port, gets its own file: what it
// registers is not in ours, and ours is not in its (root only: unshare(CLONE_NEWNET)).
TEST(Registry, AnotherNetworkNamespaceHasItsOwnRegistry) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace";
  const testing::TempDir temp;  // removed when the test ends, early or not
  ASSERT_FALSE(temp.path().empty());
  const std::string& dir = temp.path();
  constexpr uint16_t kPort = 24701;
  auto ours = RegistryFile::open(dir, kPort);
  ASSERT_TRUE(ours.ok()) << ours.error().message;
  {
    auto lock = ours.value().lock();
    RegistryState s = ours.value().load();
    s.members.push_back(member(getpid(), 3, "127.0.0.1", 0));
    ours.value().store(s);
  }
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipefd[0]);
    // Exit codes: 1 unshare failed, 2 open failed, 3 our member visible, 4 same path.
    if (unshare(CLONE_NEWNET) != 0) _exit(1);
    auto theirs = RegistryFile::open(dir, kPort);
    if (!theirs.ok()) _exit(2);
    auto lock = theirs.value().lock();
    RegistryState s = theirs.value().load();
    if (!s.members.empty()) _exit(3);
    s.members.push_back(member(getpid(), 3, "127.0.0.1", 0));
    theirs.value().store(s);
    const uint64_t ino = netns_inode();
    if (write(pipefd[1], &ino, sizeof ino) != sizeof ino) _exit(5);
    _exit(theirs.value().path() == RegistryFile::path_for(dir, netns_inode(), kPort) &&
                  theirs.value().path() != RegistryFile::path_for(dir, 0, kPort)
              ? 0
              : 4);
  }
  close(pipefd[1]);
  uint64_t child_ns = 0;
  ASSERT_EQ(read(pipefd[0], &child_ns, sizeof child_ns), static_cast<ssize_t>(sizeof child_ns));
  close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(child_ns, netns_inode());
  EXPECT_EQ(ours.value().path(), RegistryFile::path_for(dir, netns_inode(), kPort));
  {
    auto lock = ours.value().lock();
    const RegistryState s = ours.value().load();
    ASSERT_EQ(s.members.size(), 1u);
    EXPECT_EQ(s.members[0].pid, getpid());
  }
  // The child's record sits in its own namespace's file.
  auto theirs = parse_registry([&] {
    std::ifstream in(RegistryFile::path_for(dir, child_ns, kPort));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }());
  ASSERT_TRUE(theirs.has_value());
  ASSERT_EQ(theirs->members.size(), 1u);
  EXPECT_EQ(theirs->members[0].pid, child);
}

TEST(Registry, DefaultDirIsPerUser) {
  const std::string d = RegistryFile::default_dir();
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') {
    EXPECT_EQ(d, std::string(xdg) + "/uroce");
  } else {
    EXPECT_EQ(d, "/tmp/uroce-" + std::to_string(geteuid()));
  }
}

}  // namespace
}  // namespace uroce::net
