// The shared-memory counters segment: exact round trip of every field, stale segments of
// dead processes removed, segments keyed by network namespace, and a reader never seeing a
// half-written snapshot.
#include "telemetry/shm_segment.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/netns.hpp"

namespace uroce::telemetry {
namespace {

class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uroce-shm-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    setenv("UROCE_STAT_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("UROCE_STAT_DIR");
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

const std::vector<std::string> kNames = {"sent_pkts", "rcvd_pkts", "retry_exceeded_err"};

DeviceSnapshot sample() {
  DeviceSnapshot s;
  s.device = "uroce_lo";
  s.pid = getpid();
  s.names = kNames;
  s.values = {10, 9, 1};
  s.published_unix_ns = 1234567890123ULL;
  QpSnapshot q;
  q.qpn = 0x11;
  q.remote_qpn = 0x12;
  q.remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  q.qp_type = 2;
  q.state = 6;
  q.last_error_status = 12;
  q.error_completions = 1;
  q.rtt.add(std::chrono::microseconds(30));
  q.values = {10, 0, 1};
  s.qps.push_back(q);
  return s;
}

TEST_F(ShmTest, PublishedSnapshotReadsBackExactly) {
  std::string error;
  auto pub = ShmPublisher::create("uroce_lo", kNames, &error);
  ASSERT_NE(pub, nullptr) << error;
  EXPECT_EQ(pub->path(), dir_ + "/uroce-" + std::to_string(getpid()) + "-netns-" +
                             std::to_string(netns_inode()) + "-uroce_lo");
  pub->publish(sample());
  auto all = read_segments({});
  ASSERT_EQ(all.size(), 1u);
  const DeviceSnapshot& r = all[0];
  EXPECT_EQ(r.device, "uroce_lo");
  EXPECT_EQ(r.pid, getpid());
  EXPECT_EQ(r.names, kNames);
  EXPECT_EQ(r.values, (std::vector<uint64_t>{10, 9, 1}));
  EXPECT_EQ(r.published_unix_ns, 1234567890123ULL);
  ASSERT_EQ(r.qps.size(), 1u);
  EXPECT_EQ(r.qps[0].qpn, 0x11u);
  EXPECT_EQ(r.qps[0].remote_qpn, 0x12u);
  EXPECT_EQ(gid_address(r.qps[0].remote_gid), "10.0.0.2");
  EXPECT_EQ(r.qps[0].state, 6);
  EXPECT_EQ(r.qps[0].last_error_status, 12);
  EXPECT_EQ(r.qps[0].rtt.count, 1u);
  EXPECT_EQ(r.qps[0].rtt.sum_ns, 30000u);
  EXPECT_EQ(r.qps[0].rtt.buckets[5], 1u);  // 30 us <= 32 us
  EXPECT_EQ(r.value("retry_exceeded_err"), 1u);
  EXPECT_EQ(r.qp_value(r.qps[0], "sent_pkts"), 10u);
}

// Layout version 2: the per-QP congestion state crosses the segment word for word.
TEST_F(ShmTest, CongestionStateReadsBackExactly) {
  EXPECT_EQ(kShmVersion, 2u);
  std::string error;
  auto pub = ShmPublisher::create("uroce_lo", kNames, &error);
  ASSERT_NE(pub, nullptr) << error;
  DeviceSnapshot s = sample();
  s.qps[0].cc.algorithm = transport::CcAlgorithm::kDcqcn;
  s.qps[0].cc.rate_bps = 5'000'000'001;
  s.qps[0].cc.target_rate_bps = 10'000'000'000;
  s.qps[0].cc.alpha = 1023;
  pub->publish(s);
  auto all = read_segments({});
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].qps.size(), 1u);
  const transport::QpCcState& cc = all[0].qps[0].cc;
  EXPECT_EQ(cc.algorithm, transport::CcAlgorithm::kDcqcn);
  EXPECT_EQ(cc.rate_bps, 5'000'000'001u);
  EXPECT_EQ(cc.target_rate_bps, 10'000'000'000u);
  EXPECT_EQ(cc.alpha, 1023u);
  EXPECT_EQ(all[0].qps[0].rtt.count, 1u);  // the words after it did not move
}

TEST_F(ShmTest, SecondDeviceOfTheSameNameGetsASuffix) {
  auto a = ShmPublisher::create("uroce_lo", kNames, nullptr);
  auto b = ShmPublisher::create("uroce_lo", kNames, nullptr);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->path(), a->path() + ".1");
  EXPECT_EQ(read_segments({}).size(), 2u);
}

TEST_F(ShmTest, SegmentIsRemovedWhenThePublisherGoes) {
  std::string path;
  {
    auto pub = ShmPublisher::create("uroce_lo", kNames, nullptr);
    ASSERT_NE(pub, nullptr);
    path = pub->path();
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(ShmTest, StaleSegmentOfADeadProcessIsSkippedAndRemoved) {
  const pid_t child = fork();
  if (child == 0) {
    auto pub = ShmPublisher::create("uroce_lo", kNames, nullptr);
    pub->publish(sample());
    _exit(pub ? 0 : 1);  // no destructor: the segment stays, like after a SIGKILL
  }
  int st = 0;
  waitpid(child, &st, 0);
  ASSERT_EQ(WEXITSTATUS(st), 0);
  const std::string path = dir_ + "/" + segment_name(child, netns_inode(), "uroce_lo");
  ASSERT_TRUE(std::filesystem::exists(path));
  std::vector<std::string> notes;
  EXPECT_TRUE(read_segments({.pid = child}, &notes).empty());
  EXPECT_FALSE(std::filesystem::exists(path));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "removed stale " + path + " (pid " + std::to_string(child) + " is gone)");
}

// A child publishes, the follower sees it, then the child publishes its last counts, removes
// its segment (a normal exit) and exits: the follower still returns those last counts, after
// the process is gone, on every later poll.
TEST_F(ShmTest, FollowerKeepsTheLastCountsOfAnExitedProcess) {
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    auto pub = ShmPublisher::create("uroce_lo", kNames, nullptr);
    DeviceSnapshot s = sample();
    s.values = {1, 1, 0};
    pub->publish(s);
    char c = 0;
    if (read(go[0], &c, 1) != 1) _exit(2);  // the follower has seen the segment
    s.values = {500, 400, 3};
    pub->publish(s);
    pub.reset();  // unlinks the segment
    _exit(0);
  }
  close(go[0]);
  SegmentFollower follower;
  std::vector<DeviceSnapshot> seen;
  // The segment exists (all counters 0) from create() on, a moment before the child's first
  // publish: wait until the follower has read that publish.
  for (int i = 0; i < 500 && (seen.empty() || seen[0].value("sent_pkts") == 0); ++i) {
    seen = follower.poll();
    if (seen.empty() || seen[0].value("sent_pkts") == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].value("sent_pkts"), 1u);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  close(go[1]);
  int st = 0;
  waitpid(child, &st, 0);
  ASSERT_EQ(WEXITSTATUS(st), 0);
  EXPECT_FALSE(
      std::filesystem::exists(dir_ + "/" + segment_name(child, netns_inode(), "uroce_lo")));
  for (int poll = 0; poll < 2; ++poll) {
    seen = follower.poll();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].pid, child);
    EXPECT_EQ(seen[0].value("sent_pkts"), 500u);
    EXPECT_EQ(seen[0].value("retry_exceeded_err"), 3u);
  }
}

// uroce exec polls on new_segments_fd() so that a process shorter than its refresh interval
// is held from its start: the fd is readable once a segment is created; take_created() says
// whether a uroce segment was among what woke it, and empties it.
TEST_F(ShmTest, FollowerIsWokenWhenASegmentIsCreated) {
  SegmentFollower follower;
  const int fd = follower.new_segments_fd();
  ASSERT_GE(fd, 0) << "inotify on " << dir_;
  const auto readable = [fd](int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) == 1;
  };
  EXPECT_FALSE(readable(0));
  EXPECT_TRUE(follower.poll().empty());
  // Another program's file wakes the fd, but is no reason to read the segments.
  { std::ofstream(dir_ + "/sem.other-program") << "x"; }
  EXPECT_TRUE(readable(1000));
  EXPECT_FALSE(follower.take_created());
  EXPECT_FALSE(readable(0));
  auto pub = ShmPublisher::create("uroce_lo", kNames, nullptr);
  ASSERT_NE(pub, nullptr);
  EXPECT_TRUE(readable(1000));
  EXPECT_TRUE(follower.take_created());
  EXPECT_FALSE(readable(0));
  DeviceSnapshot s = sample();
  s.values = {7, 6, 0};
  pub->publish(s);
  const std::vector<DeviceSnapshot> seen = follower.poll();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].value("sent_pkts"), 7u);
}

TEST(ShmNameTest, NameCarriesPidNamespaceAndDevice) {
  EXPECT_EQ(segment_name(1234, 4026531840, "uroce_lo"), "uroce-1234-netns-4026531840-uroce_lo");
}

// A process in another network namespace (root only: unshare) publishes into the same
// directory; this namespace's reader does not list it, its own reader does not list ours, and
// its segment is removed by our reader once it is gone.
TEST_F(ShmTest, OtherNetworkNamespacesSegmentsAreNotListed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace";
  auto ours = ShmPublisher::create("uroce_lo", kNames, nullptr);
  ASSERT_NE(ours, nullptr);
  ours->publish(sample());
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 1 unshare, 2 publish, 3 it saw something other than itself.
    if (unshare(CLONE_NEWNET) != 0) _exit(1);
    auto pub = ShmPublisher::create("uroce_lo", kNames, nullptr);
    if (pub == nullptr) _exit(2);
    DeviceSnapshot s = sample();
    s.pid = getpid();
    pub->publish(s);
    const auto seen = read_segments({});
    const bool only_itself = seen.size() == 1 && seen[0].pid == getpid();
    char c = only_itself ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(4);
    if (read(done[0], &c, 1) != 1) _exit(4);
    _exit(only_itself ? 0 : 3);  // no destructor: the segment stays, like after a SIGKILL
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  const auto seen = read_segments({});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].pid, getpid());
  EXPECT_TRUE(read_segments({.pid = child}).empty());
  // Its segment is there, under its own namespace's name.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2u);
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_EQ(WEXITSTATUS(st), 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
  EXPECT_EQ(read_segments({}).size(), 1u);
  files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string(), ours->path());
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(ShmTest, ReaderNeverSeesATornSnapshot) {
  auto pub = ShmPublisher::create("uroce_lo", kNames, nullptr);
  ASSERT_NE(pub, nullptr);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    DeviceSnapshot s = sample();
    for (uint64_t i = 1; !stop.load(); ++i) {
      s.values = {i, i, i};
      s.qps[0].values = {i, i, i};
      s.published_unix_ns = i;
      pub->publish(s);
    }
  });
  uint64_t reads = 0;
  uint64_t torn = 0;
  std::string first_torn;
  // 200 consistent reads while the writer publishes flat out (at most 20 s on a loaded host).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (reads < 200 && std::chrono::steady_clock::now() < end) {
    std::string error;
    auto r = read_segment(pub->path(), &error);
    if (!r || r->published_unix_ns == 0) continue;  // busy for 10000 tries, or not published yet
    ++reads;
    const uint64_t v = r->published_unix_ns;
    const std::vector<uint64_t> want = {v, v, v};
    if (r->values != want || r->qps.size() != 1 || r->qps[0].values != want) {
      if (torn++ == 0) {
        first_torn = "published " + std::to_string(v) + " values " + std::to_string(r->values[0]) +
                     " qps " + std::to_string(r->qps.size());
      }
    }
  }
  stop = true;
  writer.join();
  EXPECT_EQ(torn, 0u) << first_torn;
  EXPECT_EQ(reads, 200u);
}

}  // namespace
}  // namespace uroce::telemetry
