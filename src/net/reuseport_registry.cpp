#include "net/reuseport_registry.hpp"

#include "common/netns.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace uroce::net {

std::string serialize_registry(const RegistryState& s) {
  std::string out = "uroce-reuseport 1\nepoch " + std::to_string(s.epoch) + "\n";
  char line[256];
  for (const RegistryMember& m : s.members) {
    std::snprintf(line, sizeof line, "member %d %" PRIu64 " %016" PRIx64 " %u %s %u %" PRIu64,
                  static_cast<int>(m.pid), m.start_time, m.token, m.slot,
                  m.addr.to_string().c_str(), m.position, m.verified_epoch);
    out += line;
    if (m.cm_capable) out += " cm";
    for (uint64_t service : m.listens) {
      std::snprintf(line, sizeof line, " listen=%016" PRIx64, service);
      out += line;
    }
    out += '\n';
  }
  return out;
}

std::optional<RegistryState> parse_registry(std::string_view text) {
  RegistryState s;
  if (text.empty()) return s;
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != "uroce-reuseport 1") return std::nullopt;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "epoch") {
      if (!(ls >> s.epoch)) return std::nullopt;
    } else if (kind == "member") {
      RegistryMember m;
      long long pid = 0;
      std::string token, addr;
      if (!(ls >> pid >> m.start_time >> token >> m.slot >> addr >> m.position >> m.verified_epoch))
        return std::nullopt;
      auto ip = IpAddr::parse(addr);
      if (!ip || pid <= 0) return std::nullopt;
      m.pid = static_cast<pid_t>(pid);
      m.token = std::strtoull(token.c_str(), nullptr, 16);
      m.addr = *ip;
      std::string extra;
      while (ls >> extra) {
        if (extra == "cm") {
          m.cm_capable = true;
        } else if (extra.rfind("listen=", 0) == 0) {
          const std::string hex = extra.substr(7);
          char* end = nullptr;
          errno = 0;
          const uint64_t service = std::strtoull(hex.c_str(), &end, 16);
          if (hex.empty() || *end != '\0' || errno != 0) return std::nullopt;
          if (std::find(m.listens.begin(), m.listens.end(), service) == m.listens.end())
            m.listens.push_back(service);
        }  // anything else: a newer uroce's field
      }
      s.members.push_back(m);
    } else if (!kind.empty()) {
      return std::nullopt;
    }
  }
  return s;
}

void remove_member_like_kernel(RegistryState& s, size_t index) {
  const RegistryMember gone = s.members[index];
  s.members.erase(s.members.begin() + static_cast<ptrdiff_t>(index));
  RegistryMember* last = nullptr;
  for (RegistryMember& m : s.members) {
    if (m.addr == gone.addr && m.position > gone.position &&
        (last == nullptr || m.position > last->position)) {
      last = &m;
    }
  }
  // reuseport_detach_sock: socks[i] = socks[num_socks - 1]; num_socks--.
  if (last != nullptr) last->position = gone.position;
}

std::vector<RegistryMember> members_on(const RegistryState& s, const IpAddr& addr) {
  std::vector<RegistryMember> out;
  for (const RegistryMember& m : s.members) {
    if (m.addr == addr) out.push_back(m);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.position < b.position; });
  return out;
}

const RegistryMember* listener_on(const RegistryState& s, const IpAddr& addr, uint64_t service_id,
                                  uint64_t except_token) {
  for (const RegistryMember& m : s.members) {
    if (m.addr == addr && m.token != except_token &&
        std::find(m.listens.begin(), m.listens.end(), service_id) != m.listens.end())
      return &m;
  }
  return nullptr;
}

size_t listener_count_on(const RegistryState& s, const IpAddr& addr) {
  size_t n = 0;
  for (const RegistryMember& m : s.members) {
    if (m.addr == addr) n += m.listens.size();
  }
  return n;
}

std::optional<uint32_t> choose_slot(const RegistryState& s, const IpAddr& addr, int requested) {
  auto used_on = [&](uint32_t slot, bool any_addr) {
    return std::any_of(s.members.begin(), s.members.end(), [&](const RegistryMember& m) {
      return m.slot == slot && (any_addr || m.addr == addr);
    });
  };
  if (requested >= 0) {
    if (static_cast<uint32_t>(requested) >= 64 ||
        used_on(static_cast<uint32_t>(requested), false)) {
      return std::nullopt;
    }
    return static_cast<uint32_t>(requested);
  }
  for (bool any_addr : {true, false}) {
    for (uint32_t slot = 0; slot < 64; ++slot) {
      if (!used_on(slot, any_addr)) return slot;
    }
  }
  return std::nullopt;
}

// /proc/<pid>/stat is one line. Read through getline, not istreambuf_iterator: when the
// process exits between open and read, the read fails with ESRCH, which libstdc++'s filebuf
// throws as std::ios_base::failure and only a sentry-based read turns into a failed stream
// (an uncaught throw here terminated a process whose peer had just crashed).
static std::string read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(in, text);
  return text;
}

uint64_t process_start_time(pid_t pid) {
  const std::string text = read_proc_stat(pid);
  // The command name (field 2) may hold spaces and parentheses: parse after the last ')'.
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  // Fields 3.. follow; start_time is field 22, i.e. the 20th after ')'.
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return 0;
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

bool process_alive(pid_t pid, uint64_t start_time) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  if (access(("/proc/" + std::to_string(pid) + "/stat").c_str(), R_OK) != 0) {
    return access("/proc/self/stat", R_OK) != 0;  // no /proc: trust kill()
  }
  const std::string text = read_proc_stat(pid);
  size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  const char state = text[close + 2];
  // A zombie has closed its sockets already; it only waits to be reaped.
  if (state == 'Z' || state == 'X' || state == 'x') return false;
  return start_time == 0 || process_start_time(pid) == start_time;
}

size_t prune_dead_members(RegistryState& s, AliveFn alive) {
  size_t removed = 0;
  for (;;) {
    // Highest position first: a crash of several members is resolved as if they closed from
    // the end of the array, which needs no moves; survivors verify with probes anyway.
    ptrdiff_t victim = -1;
    for (size_t i = 0; i < s.members.size(); ++i) {
      const RegistryMember& m = s.members[i];
      if (alive(m.pid, m.start_time)) continue;
      if (victim < 0 || m.position > s.members[static_cast<size_t>(victim)].position)
        victim = static_cast<ptrdiff_t>(i);
    }
    if (victim < 0) break;
    remove_member_like_kernel(s, static_cast<size_t>(victim));
    ++removed;
  }
  if (removed > 0) ++s.epoch;
  return removed;
}

std::string RegistryFile::default_dir() {
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/uroce";
  }
  return "/tmp/uroce-" + std::to_string(geteuid());
}

std::string RegistryFile::namespace_dir(const std::string& dir, uint64_t netns) {
  return dir + "/" + netns_key(netns);
}

std::string RegistryFile::path_for(const std::string& dir, uint64_t netns, uint16_t port) {
  return namespace_dir(dir, netns) + "/port-" + std::to_string(port) + ".reg";
}

namespace {

// mkdir -m 0700 that accepts an existing directory only if it is ours (not a symlink).
NetResult<bool> make_private_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    int err = errno;
    return NetError{
        err, "cannot create the uroce registry directory " + dir + ": " + std::strerror(err)};
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return NetError{EPERM, dir + " is not a directory owned by uid " + std::to_string(geteuid()) +
                               "; remove it or set XDG_RUNTIME_DIR to a private directory"};
  }
  return true;
}

}  // namespace

NetResult<RegistryFile> RegistryFile::open(const std::string& dir_in, uint16_t port) {
  const std::string dir = dir_in.empty() ? default_dir() : dir_in;
  const uint64_t netns = netns_inode();
  for (const std::string& d : {dir, namespace_dir(dir, netns)}) {
    if (auto made = make_private_dir(d); !made) return made.error();
  }
  std::string path = path_for(dir, netns, port);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int err = errno;
    return NetError{err, "cannot open the uroce registry " + path + ": " + std::strerror(err)};
  }
  return RegistryFile(fd, std::move(path));
}

RegistryFile::RegistryFile(RegistryFile&& o) noexcept
    : fd_(o.fd_), path_(std::move(o.path_)), last_text_(std::move(o.last_text_)) {
  o.fd_ = -1;
}

RegistryFile& RegistryFile::operator=(RegistryFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
    path_ = std::move(o.path_);
    last_text_ = std::move(o.last_text_);
  }
  return *this;
}

RegistryFile::~RegistryFile() {
  if (fd_ >= 0) ::close(fd_);
}

RegistryFile::Lock::Lock(int fd) : fd_(fd) {
  while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

RegistryFile::Lock::~Lock() {
  flock(fd_, LOCK_UN);
}

void RegistryFile::read_into(std::string& text) const {
  text.clear();
  char buf[4096];
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(fd_, buf, sizeof buf, off);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    off += n;
  }
}

RegistryState RegistryFile::load() const {
  read_into(last_text_);
  return parse_registry(last_text_).value_or(RegistryState{});
}

void RegistryFile::store(const RegistryState& s) {
  std::string text = serialize_registry(s);
  if (text == last_text_) return;
  if (ftruncate(fd_, 0) == 0) {
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  last_text_ = std::move(text);
}

// File timestamps are too coarse (one jiffy) to see two quick writes, so compare contents: a
// registry is a few hundred bytes and this is one pread.
bool RegistryFile::changed_since_last_seen() const {
  // Compared piece by piece as it is read, with one read past the end to see a longer file.
  char buf[4096];
  size_t off = 0;
  for (;;) {
    const ssize_t n = pread(fd_, buf, sizeof buf, static_cast<off_t>(off));
    if (n < 0) return true;
    if (n == 0) return off != last_text_.size();
    const size_t got = static_cast<size_t>(n);
    if (off + got > last_text_.size() || std::memcmp(buf, last_text_.data() + off, got) != 0) {
      return true;
    }
    off += got;
  }
}

}  // namespace uroce::net
