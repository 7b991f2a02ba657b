#include "telemetry/shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "common/netns.hpp"

namespace uroce::telemetry {

namespace {

uint64_t* body_words(ShmSegment* seg) {
  return reinterpret_cast<uint64_t*>(&seg->body);
}

void store_relaxed(uint64_t& word, uint64_t v) {
  std::atomic_ref<uint64_t>(word).store(v, std::memory_order_relaxed);
}

void fill_body(ShmBody& b, const DeviceSnapshot& snap, size_t counters) {
  b.published_unix_ns = snap.published_unix_ns;
  const size_t n_qps = std::min(snap.qps.size(), kShmMaxQps);
  b.qp_count = n_qps;
  b.qp_overflow = snap.qps.size() - n_qps + snap.qp_overflow;
  for (size_t i = 0; i < counters; ++i)
    b.device_values[i] = i < snap.values.size() ? snap.values[i] : 0;
  for (size_t q = 0; q < n_qps; ++q) {
    const QpSnapshot& s = snap.qps[q];
    ShmQp& d = b.qps[q];
    d.qpn = s.qpn;
    d.remote_qpn = s.remote_qpn;
    std::memcpy(d.remote_gid, s.remote_gid.data(), 16);
    d.qp_type = s.qp_type;
    d.state = s.state;
    d.last_error_status = s.last_error_status;
    d.error_completions = s.error_completions;
    d.cc_algorithm = static_cast<uint64_t>(s.cc.algorithm);
    d.cc_rate_bps = s.cc.rate_bps;
    d.cc_target_rate_bps = s.cc.target_rate_bps;
    d.cc_alpha = s.cc.alpha;
    for (size_t i = 0; i <= kRttBuckets; ++i) d.rtt.buckets[i] = s.rtt.buckets[i];
    d.rtt.count = s.rtt.count;
    d.rtt.sum_ns = s.rtt.sum_ns;
    for (size_t i = 0; i < counters; ++i) d.values[i] = i < s.values.size() ? s.values[i] : 0;
  }
}

std::string cstr(const char* p, size_t max) {
  return std::string(p, strnlen(p, max));
}

// Segments of this process still published: unlinked at exit() too, since programs often
// exit without destroying their devices (a SIGKILL still leaves them to the readers' cleanup).
std::mutex& live_mu() {
  static auto* mu = new std::mutex;  // never destroyed: the atexit handler uses it
  return *mu;
}

std::set<std::string>& live_paths() {
  static auto* paths = new std::set<std::string>;
  return *paths;
}

void unlink_live_paths() {
  std::lock_guard lock(live_mu());
  for (const std::string& p : live_paths()) unlink(p.c_str());
}

void track(const std::string& path, bool live) {
  static const bool registered = std::atexit(unlink_live_paths) == 0;
  (void)registered;
  std::lock_guard lock(live_mu());
  if (live) {
    live_paths().insert(path);
  } else {
    live_paths().erase(path);
  }
}

}  // namespace

std::string shm_dir() {
  const char* dir = std::getenv("UROCE_STAT_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "/dev/shm";
}

uint64_t proc_start_ticks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // comm (field 2) may hold spaces and parentheses: fields restart after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22; ++i) rest >> field;  // fields 3 .. 21
  uint64_t ticks = 0;
  rest >> ticks;
  return ticks;
}

std::string program_from_cmdline(const std::string& cmdline) {
  std::vector<std::string> args;
  for (size_t at = 0; at < cmdline.size() && args.size() < 2;) {
    const size_t end = std::min(cmdline.find('\0', at), cmdline.size());
    args.push_back(cmdline.substr(at, end - at));
    at = end + 1;
  }
  if (args.empty() || args[0].empty()) return "";
  auto base = [](const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  };
  const std::string program = base(args[0]);
  const bool interpreter = program.starts_with("python") || program == "perl" || program == "sh" ||
                           program == "bash" || program == "ruby";
  if (args.size() > 1 && !args[1].empty() && args[1][0] != '-' &&
      (program == "uroce" || interpreter)) {
    return program + " " + base(args[1]);
  }
  return program;
}

std::string process_program(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  // read(), not istreambuf_iterator: a process that exits meanwhile makes the read fail with
  // ESRCH, which only a sentry-based read turns into a failed stream instead of a throw.
  std::string cmdline(4096, '\0');
  in.read(cmdline.data(), static_cast<std::streamsize>(cmdline.size()));
  cmdline.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return program_from_cmdline(cmdline);
}

std::string segment_name(int pid, uint64_t netns, const std::string& device) {
  return std::string(kSegmentPrefix) + std::to_string(pid) + "-" + netns_key(netns) + "-" + device;
}

std::unique_ptr<ShmPublisher> ShmPublisher::create(const std::string& device,
                                                   const std::vector<std::string>& names,
                                                   std::string* error) {
  const std::string base = shm_dir() + "/" + segment_name(getpid(), netns_inode(), device);
  int fd = -1;
  std::string path;
  for (int n = 0; n < 64 && fd < 0; ++n) {
    path = n == 0 ? base : base + "." + std::to_string(n);
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    if (error != nullptr) *error = "cannot create " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  if (ftruncate(fd, sizeof(ShmSegment)) != 0) {
    if (error != nullptr) *error = "cannot size " + path + ": " + std::strerror(errno);
    close(fd);
    unlink(path.c_str());
    return nullptr;
  }
  void* mem = mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    if (error != nullptr) *error = "cannot map " + path + ": " + std::strerror(errno);
    unlink(path.c_str());
    return nullptr;
  }
  auto pub = std::unique_ptr<ShmPublisher>(new ShmPublisher());
  pub->seg_ = static_cast<ShmSegment*>(mem);
  pub->path_ = path;
  ShmHeader& h = pub->seg_->header;
  h.version = kShmVersion;
  h.layout_size = sizeof(ShmSegment);
  h.pid = getpid();
  h.proc_start_ticks = proc_start_ticks(h.pid);
  h.counter_count = static_cast<uint32_t>(std::min(names.size(), kShmMaxCounters));
  std::strncpy(h.device, device.c_str(), kShmDeviceLen - 1);
  for (size_t i = 0; i < h.counter_count; ++i) {
    std::strncpy(h.names[i], names[i].c_str(), kShmNameLen - 1);
  }
  // The magic goes last: a reader that sees it sees a complete header.
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(h.magic.data(), kShmMagic.data(), kShmMagic.size());
  track(path, true);
  return pub;
}

ShmPublisher::~ShmPublisher() {
  if (seg_ != nullptr) munmap(seg_, sizeof(ShmSegment));
  unlink(path_.c_str());
  track(path_, false);
}

void ShmPublisher::publish(const DeviceSnapshot& snap) {
  // Build the body privately, then copy it inside the seqlock's write section, so the
  // section is a plain word copy.
  static thread_local std::unique_ptr<ShmBody> staging;
  if (!staging) staging = std::make_unique<ShmBody>();
  fill_body(*staging, snap, seg_->header.counter_count);
  std::atomic_ref<uint64_t> seq(seg_->seq);
  const uint64_t s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const auto* src = reinterpret_cast<const uint64_t*>(staging.get());
  uint64_t* dst = body_words(seg_);
  const size_t words = (offsetof(ShmBody, qps) + staging->qp_count * sizeof(ShmQp)) / 8;
  for (size_t i = 0; i < words; ++i) store_relaxed(dst[i], src[i]);
  seq.store(s + 2, std::memory_order_release);
}

std::optional<DeviceSnapshot> read_segment(const std::string& path, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<DeviceSnapshot> {
    if (error != nullptr) *error = path + ": " + why;
    return std::nullopt;
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(ShmHeader)) {
    close(fd);
    return fail("too short for a uroce counters segment");
  }
  void* mem = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return fail(std::strerror(errno));
  const size_t mapped = static_cast<size_t>(st.st_size);
  auto* seg = static_cast<ShmSegment*>(mem);
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{mem, mapped};
  const ShmHeader& h = seg->header;
  if (std::memcmp(h.magic.data(), kShmMagic.data(), kShmMagic.size()) != 0) {
    return fail("not a uroce counters segment (or still being created)");
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h.version != kShmVersion || h.layout_size != sizeof(ShmSegment) ||
      mapped < sizeof(ShmSegment)) {
    return fail("layout version " + std::to_string(h.version) + ", this uroce reads " +
                std::to_string(kShmVersion));
  }
  DeviceSnapshot snap;
  snap.device = cstr(h.device, kShmDeviceLen);
  snap.pid = h.pid;
  const size_t counters = std::min<size_t>(h.counter_count, kShmMaxCounters);
  for (size_t i = 0; i < counters; ++i) snap.names.push_back(cstr(h.names[i], kShmNameLen));

  auto body = std::make_unique<ShmBody>();
  auto* dst = reinterpret_cast<uint64_t*>(body.get());
  const auto* src = reinterpret_cast<const uint64_t*>(&seg->body);
  bool consistent = false;
  for (int attempt = 0; attempt < 10000 && !consistent; ++attempt) {
    std::atomic_ref<uint64_t> seq(const_cast<uint64_t&>(seg->seq));
    const uint64_t s1 = seq.load(std::memory_order_acquire);
    if ((s1 & 1) != 0) {
      std::this_thread::yield();
      continue;
    }
    // Only the words the writer wrote: the fixed part, then qp_count QP records (as
    // publish() copies them). Copying the whole body (every QP slot) made the read section so
    // much longer than the write section that a busy writer starved readers under ASan. A
    // torn qp_count is caught by the sequence check like any other torn word.
    const auto copy = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        dst[i] = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(src[i]))
                     .load(std::memory_order_relaxed);
      }
    };
    constexpr size_t kFixedWords = offsetof(ShmBody, qps) / sizeof(uint64_t);
    copy(0, kFixedWords);
    const size_t qps = std::min<uint64_t>(body->qp_count, kShmMaxQps);
    copy(kFixedWords, kFixedWords + qps * sizeof(ShmQp) / sizeof(uint64_t));
    std::atomic_thread_fence(std::memory_order_acquire);
    consistent = seq.load(std::memory_order_relaxed) == s1;
  }
  if (!consistent) return fail("writer kept it busy; try again");

  snap.published_unix_ns = body->published_unix_ns;
  snap.qp_overflow = body->qp_overflow;
  snap.values.assign(body->device_values, body->device_values + counters);
  const size_t n_qps = std::min<uint64_t>(body->qp_count, kShmMaxQps);
  for (size_t q = 0; q < n_qps; ++q) {
    const ShmQp& s = body->qps[q];
    QpSnapshot d;
    d.qpn = static_cast<uint32_t>(s.qpn);
    d.remote_qpn = static_cast<uint32_t>(s.remote_qpn);
    std::memcpy(d.remote_gid.data(), s.remote_gid, 16);
    d.qp_type = static_cast<uint8_t>(s.qp_type);
    d.state = static_cast<uint8_t>(s.state);
    d.last_error_status = static_cast<uint8_t>(s.last_error_status);
    d.error_completions = s.error_completions;
    d.cc.algorithm = static_cast<transport::CcAlgorithm>(s.cc_algorithm);
    d.cc.rate_bps = s.cc_rate_bps;
    d.cc.target_rate_bps = s.cc_target_rate_bps;
    d.cc.alpha = static_cast<uint32_t>(s.cc_alpha);
    for (size_t i = 0; i <= kRttBuckets; ++i) d.rtt.buckets[i] = s.rtt.buckets[i];
    d.rtt.count = s.rtt.count;
    d.rtt.sum_ns = s.rtt.sum_ns;
    d.values.assign(s.values, s.values + counters);
    snap.qps.push_back(std::move(d));
  }
  return snap;
}

namespace {

struct SegmentFile {
  std::string name;
  long pid = 0;
  bool ours = false;  // of this network namespace
};

// The segment files of shm_dir(), name order: uroce-<pid>-netns-<inode>-<device>, the pid
// taken from the name so a dead process' segment is found even when its header is unreadable.
std::vector<SegmentFile> list_segment_files(const std::string& dir) {
  std::vector<SegmentFile> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    if (std::string_view(e->d_name).starts_with(kSegmentPrefix)) files.emplace_back(e->d_name);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  const std::string our_netns = "-" + netns_key(netns_inode()) + "-";
  for (std::string& name : files) {
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + kSegmentPrefix.size(), &end, 10);
    if (end == nullptr || *end != '-' || pid <= 0) continue;
    const bool ours = std::string_view(end).substr(0, our_netns.size()) == our_netns;
    out.push_back(SegmentFile{std::move(name), pid, ours});
  }
  return out;
}

bool process_exists(long pid) {
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

SegmentFollower::SegmentFollower() {
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ >= 0 && inotify_add_watch(inotify_fd_, shm_dir().c_str(), IN_CREATE) < 0) {
    close(inotify_fd_);
    inotify_fd_ = -1;
  }
}

SegmentFollower::~SegmentFollower() {
  for (Held& h : held_) {
    if (h.fd >= 0) close(h.fd);
  }
  if (inotify_fd_ >= 0) close(inotify_fd_);
}

bool SegmentFollower::take_created() {
  if (inotify_fd_ < 0) return false;
  bool ours = false;
  alignas(inotify_event) char events[4096];
  for (;;) {
    const ssize_t n = read(inotify_fd_, events, sizeof events);
    if (n <= 0) return ours;
    for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(events + off);
      if (e->len > 0 && std::string_view(e->name).starts_with(kSegmentPrefix)) ours = true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
}

std::vector<DeviceSnapshot> SegmentFollower::poll() {
  const std::string dir = shm_dir();
  for (const SegmentFile& f : list_segment_files(dir)) {
    if (!f.ours || !process_exists(f.pid)) continue;
    const bool known =
        std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.name == f.name; });
    if (known) continue;
    const int fd = open((dir + "/" + f.name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) held_.push_back(Held{f.name, static_cast<int>(f.pid), fd, std::nullopt});
  }
  std::vector<DeviceSnapshot> out;
  for (Held& h : held_) {
    if (h.fd >= 0) {
      // Whether the process is gone is asked first, so the read that follows is its last.
      const bool ended = !process_exists(h.pid);
      if (auto snap = read_segment("/proc/self/fd/" + std::to_string(h.fd), nullptr)) {
        h.last = std::move(snap);
      }
      if (ended) {
        close(h.fd);
        h.fd = -1;
      }
    }
    if (h.last) out.push_back(*h.last);
  }
  return out;
}

std::vector<DeviceSnapshot> read_segments(const ReadOptions& options,
                                          std::vector<std::string>* notes) {
  std::vector<DeviceSnapshot> out;
  const std::string dir = shm_dir();
  for (const SegmentFile& f : list_segment_files(dir)) {
    const std::string& name = f.name;
    const std::string path = dir + "/" + name;
    const long pid = f.pid;
    if (options.pid && *options.pid != pid) continue;
    const bool exists = process_exists(pid);
    if (!f.ours) {
      // Another network namespace's process (or an older uroce's unkeyed name): not shown
      // here, as its devices are not reachable from here; removed once its process is gone,
      // which any namespace can tell since they share the pid namespace.
      if (!exists && options.clean_stale) unlink(path.c_str());
      continue;
    }
    std::string error;
    std::optional<DeviceSnapshot> snap = read_segment(path, &error);
    bool alive = exists;
    if (alive && snap) {
      // Same pid, other program: the start time differs.
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      ShmHeader h{};
      if (fd >= 0) {
        alive = pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
                (h.proc_start_ticks == 0 ||
                 h.proc_start_ticks == proc_start_ticks(static_cast<int>(pid)));
        close(fd);
      }
    }
    if (!alive) {
      if (options.clean_stale && unlink(path.c_str()) == 0) {
        if (notes != nullptr)
          notes->push_back("removed stale " + path + " (pid " + std::to_string(pid) + " is gone)");
      } else if (notes != nullptr) {
        notes->push_back("skipped stale " + path + " (pid " + std::to_string(pid) + " is gone)");
      }
      continue;
    }
    if (!snap) {
      if (notes != nullptr) notes->push_back("skipped " + error);
      continue;
    }
    if (!options.device.empty() && snap->device != options.device) continue;
    out.push_back(std::move(*snap));
  }
  return out;
}

}  // namespace uroce::telemetry
