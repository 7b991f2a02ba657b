#include "net/reuseport_registry.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>

namespace uroce::net {
namespace {

IpAddr ip(const char* text) {
  return IpAddr::parse(text).value();
}

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
  char tmpl[] = "/tmp/uroce-net-reg-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    auto a = RegistryFile::open(dir, 24700);
    auto b = RegistryFile::open(dir, 24700);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a.value().path(), dir + "/port-24700.reg");
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
  std::filesystem::remove_all(dir);
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
